"""Campaign files and matrices: validation before anything starts, expansion into cells, and
the fault schedules their nemesis entries describe. No Docker needed."""
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

from harness import cli
from harness.campaign_matrix import load_matrix
from harness.config import CampaignError, load_campaign, node_config, resolve
from harness.campaign import fault_plan



def write(tmp_path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip())
    return p


@pytest.mark.parametrize("path", sorted((ROOT / "campaigns").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_campaign_is_valid_and_plans_faults(path):
    if "seeds" in path.read_text():
        cells = load_matrix(path).cells
        assert cells
        configs = [c.config for c in cells]
    else:
        configs = [resolve(load_campaign(path), {"seed": 1})]
    for cfg in configs:
        steps = fault_plan(cfg)
        assert steps, f"{path.name}: no fault in {cfg.time_limit_s} s"
        assert {s.kind for s in steps} <= set(cfg.nemesis)


BAD = [
    ("typo", """
        workload: queue
        nemesis:
          - package: kill
            duraton_s: 5
        """, 4, "nemesis[0].duraton_s", "unknown option 'duraton_s'"),
    ("negative", """
        workload: register
        time_limit_s: 30
        nemesis:
          - package: pause
            targets: [one]
            duration_s: [-1, 4]
        """, 6, "nemesis[0].duration_s", "-1 is negative"),
    ("target", """
        workload: register
        nemesis:
          - package: clock
            targets: [one, half]
        """, 4, "nemesis[0].targets", "unknown target 'half'"),
    ("direction", """
        workload: register
        nemesis:
          - package: clock
            directions: [backward]
        """, 4, "nemesis[0].directions", "['backward'] is not a non-empty list of back, forward"),
    ("field", """
        workload: register
        time_limt_s: 30
        """, 2, "time_limt_s", "unknown field 'time_limt_s'"),
    ("shape", """
        nemesis:
          - partition
          - package: partition
        """, 3, "nemesis[1]", "listed twice"),
    ("leader-of", """
        workload: queue
        nemesis:
          - {package: kill, targets: [leader-of:x]}
        """, 3, "nemesis[0].targets", "leader-of takes a partition number"),
    ("node-id", """
        nemesis:
          - {package: pause, targets: ["node:x"]}
        """, 2, "nemesis[0].targets", "node takes a node id"),
    ("node-outside", """
        nodes: 3
        nemesis:
          - {package: kill, targets: ["node:4"]}
        """, 3, "nemesis[0].targets", "'node:4' names no node of the cluster (nodes 1-3)"),
    ("codec", """
        workload: queue
        compression: brotli
        """, 2, "compression", "'brotli' is not one of none, gzip, snappy, lz4, zstd"),
    ("clocks-overlap", """
        nemesis: [clock, clock-rate, kill]
        nemesis_combine: concurrent
        """, 2, "nemesis_combine", "faults of clock and clock-rate would overlap"),
]


@pytest.mark.parametrize("name, text, line, field, words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_campaign_names_file_line_and_field(tmp_path, name, text, line, field, words):
    path = write(tmp_path, text)
    with pytest.raises(CampaignError) as e:
        load_campaign(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:{line}: ") and field in msg and words in msg, msg


@pytest.mark.parametrize("command", ["run", "campaign"])
def test_a_bad_campaign_fails_before_any_container(tmp_path, monkeypatch, capsys, command):
    import harness.backends.docker_backend as db
    import harness.images as images

    def forbidden(*a, **kw):
        raise AssertionError("a container or image was touched for a bad campaign")
    monkeypatch.setattr(db.DockerCluster, "up", forbidden)
    monkeypatch.setattr(images, "build_images", forbidden)
    text = BAD[1][1] if command == "run" else BAD[1][1] + "seeds: [1, 2]\n"
    path = write(tmp_path, text)
    argv = ["run", "--campaign", str(path)] if command == "run" else ["campaign", str(path)]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert f"{path}:6: " in err and "duration_s" in err and "negative" in err, err


def test_a_matrix_expands_and_its_errors_are_located(tmp_path):
    path = write(tmp_path, """
        time_limit_s: 20
        seeds: 3-4
        workloads:
          - workload: register
          - name: q
            workload: queue
            partitions: 2
        nemeses:
          - name: kills
            nemesis: [kill]
          - name: lossy
            nemesis: [{package: packet-loss, probability: 0.5}]
        cells:
          - match: {workload: q, nemesis: kills, seed: 4}
            bugs: [ack-before-replication]
        """)
    m = load_matrix(path)
    assert [c.id for c in m.cells] == [
        "register-kills-seed3", "register-kills-seed4", "register-lossy-seed3",
        "register-lossy-seed4", "q-kills-seed3", "q-kills-seed4", "q-lossy-seed3", "q-lossy-seed4"]
    bugged = [c.id for c in m.cells if c.config.bugs]
    assert bugged == ["q-kills-seed4"], "the override applies to exactly its cell"
    c = m.cells[-1].config
    assert (c.workload, c.partitions, c.seed, c.time_limit_s) == ("queue", 2, 4, 20)
    assert c.nemesis_options == {"packet-loss": {"probability": 0.5}}
    assert c.test == "c-q-lossy-seed4"
    # a scenario for the register workload is refused at the nemesis entry's line
    bad = write(tmp_path, """
        seeds: [1]
        workloads:
          - workload: register
        nemeses:
          - name: s
            nemesis: [strand-replica]
        """, "bad.yaml")
    with pytest.raises(CampaignError) as e:
        load_matrix(bad)
    assert str(e.value).startswith(f"{bad}:5: cell register-s-seed1: ") and "strand-replica" in str(e.value)
    with pytest.raises(CampaignError) as e:
        load_campaign(path)
    assert "chaoskraft campaign" in str(e.value) and f"{path}:2:" in str(e.value)


def test_concurrent_packages_overlap_and_options_shape_the_plan():
    cfg = resolve({"workload": "queue", "time_limit_s": 120, "nemesis_combine": "concurrent",
                   "nemesis": [{"package": "packet-loss", "targets": ["all"], "duration_s": 10,
                                "interval_s": 4},
                               {"package": "clock", "modes": ["strobe"], "duration_s": [2, 3]}]},
                  {"seed": 5})
    steps = fault_plan(cfg)
    loss = [s for s in steps if s.kind == "packet-loss"]
    clock = [s for s in steps if s.kind == "clock"]
    assert loss and clock
    assert all(s.spec == "all" and s.duration_s == 10 for s in loss)
    assert all(s.mode == "strobe" and 2 <= s.duration_s <= 3 for s in clock)
    overlap = any(a.at_s < b.at_s + b.duration_s and b.at_s < a.at_s + a.duration_s
                  for a in loss for b in clock)
    assert overlap, "concurrent packages overlap"
    assert [s.index for s in steps] == list(range(len(steps)))
    assert steps == fault_plan(cfg), "a plan is a function of the config"
    seq = resolve({**{k: v for k, v in cfg.to_dict().items()}, "nemesis_combine": "sequential"}, {})
    s2 = fault_plan(seq)
    assert all(a.at_s + a.duration_s <= b.at_s for a, b in zip(s2, s2[1:])), "one at a time"


def test_a_partition_that_cuts_off_the_leader_outlasts_an_election():
    from nemesis.packages.partition import LEADER_PARTITION_MIN_S, LEADER_PARTITIONS
    from nemesis.schedule import plan
    for workload in ("register", "queue"):
        steps = [s for seed in range(40) for s in plan(seed, ["partition", "kill"], 120, 5.0,
                                                       workload=workload)]
        leader = [s for s in steps if s.spec in LEADER_PARTITIONS]
        others = [s for s in steps if s.kind == "partition" and s.spec not in LEADER_PARTITIONS]
        assert leader and others
        assert all(s.duration_s >= LEADER_PARTITION_MIN_S for s in leader)
        assert any(s.duration_s < LEADER_PARTITION_MIN_S for s in others)
    # A duration the campaign gives is kept.
    steps = plan(1, ["partition"], 60, 5.0, options={"partition": {"duration_s": 2}})
    assert steps and all(s.duration_s == 2 for s in steps)


def test_transactions_need_librdkafka_and_modes_are_checked():
    from harness.config import CampaignError, validate
    with pytest.raises(CampaignError, match="field 'transactions': transactions run with client "
                                            "confluent-kafka only, not kafka-python"):
        validate({"workload": "queue", "transactions": True, "client": "kafka-python"})
    with pytest.raises(CampaignError, match="consume"):
        validate({"workload": "queue", "consume": "steal"})


def test_the_consumer_group_protocol_needs_subscribe_and_librdkafka_and_sets_the_brokers():
    from harness.config import validate
    with pytest.raises(CampaignError, match="field 'group_protocol': consumer is the protocol "
                                            "of subscribe\\(\\), and 'consume' is assign"):
        validate({"workload": "queue", "group_protocol": "consumer"})
    with pytest.raises(CampaignError, match="field 'group_protocol': consumer runs with client "
                                            "confluent-kafka only, not kafka-python"):
        validate({"workload": "queue", "consume": "subscribe", "group_protocol": "consumer",
                  "client": "kafka-python"})
    with pytest.raises(CampaignError, match="group_protocol"):
        validate({"workload": "queue", "consume": "subscribe", "group_protocol": "eager"})
    cfg = resolve({"workload": "queue", "consume": "subscribe", "group_protocol": "consumer",
                   "node_config": {"group.consumer.session.timeout.ms": "8000"}}, {})
    props = node_config(cfg)
    assert props["chaoskraft.metadata.max.version"] == "12"  # ConsumerGroupHeartbeat offered
    assert props["group.consumer.session.timeout.ms"] == "8000"  # the campaign's kept
    assert "chaoskraft.metadata.max.version" not in node_config(
        resolve({"workload": "queue", "consume": "subscribe"}, {}))


def test_client_crashes_are_drawn_from_the_seed_per_slot_and_only_for_the_queue():
    import itertools
    from harness.config import validate
    from workloads.queue import client_lifetimes
    first = list(itertools.islice(client_lifetimes(4, 2, 30.0), 400))
    assert first == list(itertools.islice(client_lifetimes(4, 2, 30.0), 400)), "the seed decides"
    assert first != list(itertools.islice(client_lifetimes(4, 3, 30.0), 400)), "each slot its own"
    assert all(0 <= x <= 60 for x in first) and 25 < sum(first) / len(first) < 35
    with pytest.raises(CampaignError, match="field 'crash_clients': clients crash in the queue "
                                            "workload only, not register"):
        validate({"crash_clients": True})
    with pytest.raises(CampaignError, match="crash_client_interval_s"):
        validate({"workload": "queue", "crash_clients": True, "crash_client_interval_s": 0})
    validate({"workload": "queue", "crash_clients": True, "crash_client_interval_s": 5})


def test_the_producers_codec_is_the_campaigns_or_drawn_from_the_seed():
    from workloads.queue import CODECS, producer_codec
    assert producer_codec("gzip", 3) == "gzip"
    drawn = [producer_codec(None, seed) for seed in range(40)]
    assert drawn == [producer_codec(None, seed) for seed in range(40)], "the seed decides"
    assert set(drawn) == set(CODECS), "a sweep of seeds covers every codec"


def test_node_properties_are_read_by_the_nodes_parser_before_any_node_starts():
    """A bad node_config value, or two fault packages whose node properties conflict, is a
    campaign error naming them, not a node that fails to start."""
    with pytest.raises(CampaignError, match="fault packages features, voters.*kraft.version: "
                                            "1 .a dynamic quorum. needs"):
        resolve({"workload": "register", "nodes": 5, "controllers": 5,
                 "nemesis": ["features", "voters"]}, {})
    with pytest.raises(CampaignError, match="field 'node_config'.*fault packages none.*"
                                            "controller.quorum.fetch.timeout.ms: must be "
                                            "positive, got -5"):
        resolve({"workload": "register",
                 "node_config": {"controller.quorum.fetch.timeout.ms": "-5"}}, {})
    with pytest.raises(CampaignError, match="log.segment.bytes: 'lots' is not an integer"):
        resolve({"workload": "register", "node_config": {"log.segment.bytes": "lots"}}, {})
    resolve({"workload": "queue", "nemesis": ["features", "kill"]}, {})  # no conflict
    # formatted at the newest level (only ELR to change), features runs beside voters
    cfg = resolve({"workload": "register", "nodes": 5, "controllers": 5,
                   "nemesis": [{"package": "features", "metadata_version": 21}, "voters"]}, {})
    assert node_config(cfg)["chaoskraft.bootstrap.metadata.version"] == "21"
    for bad in (6, 7.5, "21"):
        with pytest.raises(CampaignError, match="metadata_version.*is not a metadata.version "
                                                "level"):
            resolve({"workload": "register", "nemesis": [
                {"package": "features", "metadata_version": bad}]}, {})
    with pytest.raises(CampaignError, match="fault packages features.*metadata.version"):
        resolve({"workload": "register", "nemesis": [
            {"package": "features", "metadata_version": 99}]}, {})
