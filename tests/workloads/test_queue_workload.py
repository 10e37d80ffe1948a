"""The queue workload's pure parts: generator, configuration, fault plans, client outcomes."""
import itertools

import pytest

from harness.config import CampaignError, needs_faultfs, resolve
from workloads.registry import WORKLOADS
from harness.config import node_config
from nemesis.faults import grudge, node_targets
from nemesis.schedule import plan
from workloads.queue import REASSIGN_EVERY, QueueGenerator


def test_generator_is_a_function_of_seed_and_process_with_unique_values():
    a = list(itertools.islice(QueueGenerator(7, 4).ops(3), 200))
    b = list(itertools.islice(QueueGenerator(7, 4).ops(3), 200))
    assert a == b
    assert a != list(itertools.islice(QueueGenerator(8, 4).ops(3), 200))
    sends = [op for op in a if op.f == "send"]
    assert len({op.value for op in sends}) == len(sends) and 60 < len(sends) < 140
    assert {op.key for op in sends} == {"k0", "k1", "k2", "k3"}
    other = {op.value for op in itertools.islice(QueueGenerator(7, 4).ops(4), 200)
             if op.f == "send"}
    assert not other & {op.value for op in sends}, "values are unique across processes"


def test_every_process_re_assigns_now_and_then():
    """One operation in REASSIGN_EVERY starts the consumer over: in seed 1's 60 s campaign
    (300 operations at 5 a second) each of the 15 processes reads every partition again."""
    for process in range(15):
        ops = list(itertools.islice(QueueGenerator(1, 4).ops(process), 300))
        assigns = [i for i, op in enumerate(ops) if op.f == "assign"]
        assert 1 <= len(assigns) <= 15, (process, assigns)
        assert all(ops[i].key is None and ops[i].value is None for i in assigns)
    ops = list(itertools.islice(QueueGenerator(1, 4).ops(0), 50 * REASSIGN_EVERY))
    assert 25 <= sum(op.f == "assign" for op in ops) <= 80


def test_queue_defaults_and_power_loss_node_config():
    cfg = resolve({"workload": "queue"}, {})
    assert cfg.test == "queue" and cfg.nemesis == ["partition", "kill", "power-loss",
                                                   "depose-leader", "strand-replica"]
    assert cfg.idempotent is None, "half the producers idempotent, half without retries"
    assert cfg.flush_messages == 1, "queue campaigns fsync every batch unless told otherwise"
    # power loss through faultfs, from outside the node: the node's own seam stays off
    assert "chaoskraft.power.loss.enable" not in node_config(cfg) and needs_faultfs(cfg)
    # a producer naming the topic before the workload made it must not make it (one replica)
    assert node_config(cfg)["auto.create.topics.enable"] == "false"
    assert node_config(resolve({"node_config": {"auto.create.topics.enable": "true"}}, {}))[
        "auto.create.topics.enable"] == "true", "a campaign may turn it on"
    never = resolve({"workload": "queue", "flush_messages": None, "nemesis": ["kill"]}, {})
    assert never.flush_messages is None and not needs_faultfs(never)
    seam = resolve({"workload": "queue", "nemesis_options": {"power-loss": {"via": "process"}}}, {})
    assert node_config(seam)["chaoskraft.power.loss.enable"] == "true" and not needs_faultfs(seam)
    assert resolve({}, {}).nemesis == ["partition", "kill"], "the register default is unchanged"


@pytest.mark.parametrize("fields, words", [
    ({"min_insync_replicas": 4}, "more than the replication factor"),
    ({"replication_factor": 6}, "more than the 5 nodes"),
    ({"allowed_anomalies": ["lost-writes"]}, "unknown anomaly 'lost-writes'"),
    ({"power_loss_targets": ["most"]}, "'most' is not one of"),
    ({"client": "sarama"}, "is not one of"),
    ({"idempotent": "yes"}, "wrong type"),
    ({"partitions": 0}, "must be positive"),
])
def test_bad_queue_fields_name_the_field(fields, words):
    with pytest.raises(CampaignError) as e:
        resolve({"workload": "queue", **fields}, {})
    assert words in str(e.value)


def test_queue_plans_aim_at_partition_leaders_and_register_plans_do_not():
    q = plan(3, ["partition", "kill", "power-loss"], 300, 5, workload="queue",
             power_loss_targets=("all",))
    first = {}
    for s in q:
        first.setdefault(s.kind, s.spec)
    assert first == {"partition": "isolate-partition-leader", "kill": "partition-leader",
                     "power-loss": "all"}
    r = plan(3, ["partition", "kill"], 300, 5)
    assert not {s.spec for s in r} & {"isolate-partition-leader", "partition-leader", "all"}
    assert r == plan(3, ["partition", "kill"], 300, 5), "plans are a function of the seed"


@pytest.mark.parametrize("workload, packages, opening", [
    ("queue", ["partition", "kill", "power-loss", "depose-leader", "strand-replica"],
     ["depose-leader", "strand-replica"]),
    ("register", ["partition", "kill"], ["partition"]),
])
def test_default_plans_open_with_the_faults_that_find_the_workloads_bugs(workload, packages,
                                                                          opening):
    """Every seed's default 60 s plan starts with the opening: no seed of a default campaign
    goes without the fault a bug needs."""
    for seed in range(200):
        steps = plan(seed, packages, 60, 5, workload=workload,
                     duration_s=WORKLOADS[workload].fault_duration_s)
        assert [s.kind for s in steps[:len(opening)]] == opening, (seed, steps)
        assert steps[len(opening) - 1].at_s + steps[len(opening) - 1].duration_s < 55, steps
        if workload == "register":
            assert steps[0].spec == "isolate-controller" and steps[0].duration_s >= 7.5
    # weight 0 takes a package out of the opening too
    steps = plan(1, packages, 60, 5, workload=workload,
                 options={opening[0]: {"weight": 0}})
    assert opening[0] not in {s.kind for s in steps}


def test_leader_targets_resolve_to_the_leader():
    import random
    assert node_targets("partition-leader", [1, 2, 3, 4, 5], random.Random(1), leader=4) == [4]
    assert node_targets("all", [3, 1, 2], random.Random(1)) == [1, 2, 3]
    g = grudge("isolate-partition-leader", [1, 2, 3], random.Random(1), leader=2)
    assert g[2] == {1, 3} and g[1] == {2}


def test_scenarios_pick_a_partition_the_scenario_can_act_on():
    import random
    from nemesis.packages.depose_leader import depose_choice
    from nemesis.packages.strand_replica import strand_choice
    controllers = {1, 2, 3}
    # partition 0 lives on three controllers: killing two of them would end the quorum;
    # partition 1's ISR is not full; partition 2 fits, stranding one of its followers
    infos = [(0, 1, [1, 2, 3], [1, 2, 3]), (1, 4, [4, 5, 1], [4, 5]), (2, 4, [4, 5, 2], [4, 5, 2])]
    seen = set()
    for seed in range(20):
        partition, stranded, others = strand_choice(infos, controllers, random.Random(seed))
        assert partition == 2 and others == sorted({4, 5, 2} - {stranded})
        seen.add(stranded)
    assert seen == {2, 5}, "the leader is never the stranded replica"
    assert strand_choice(infos[:2], controllers, random.Random(0)) is None
    # partition 3 (led by n5, its preferred replica n4 about to take over) would strand n4,
    # the leader-to-be: partition 2, led by its preferred replica, comes first
    infos2 = [(3, 5, [4, 5, 2], [4, 5, 2]), infos[2]]
    assert {strand_choice(infos2, controllers, random.Random(s))[0] for s in range(20)} == {2}
    assert strand_choice(infos2[:1], controllers, random.Random(0))[0] == 3, "still, if alone"
    # a partition led by its preferred replica is deposed (it is the one that leads again)
    infos = [(0, 2, [1, 2, 3], [1, 2, 3]), (1, 4, [4, 5, 1], [4, 5, 1]), (2, -1, [2, 3, 4], [2])]
    assert {depose_choice(infos, random.Random(s)) for s in range(20)} == {(1, 4)}
    assert depose_choice([(2, -1, [2, 3, 4], [2])], random.Random(0)) is None
    # a leader alone in its ISR: cut off, no other replica may lead (unclean elections off)
    assert depose_choice([(0, 2, [2, 3, 4], [2]), (1, 3, [3, 4, 5], [3, 4])],
                         random.Random(0)) == (1, 3)
    assert depose_choice([(0, 2, [2, 3, 4], [2])], random.Random(0)) is None


def test_scenario_packages_are_for_the_queue_and_set_what_they_need():
    with pytest.raises(CampaignError) as e:
        resolve({"nemesis": ["kill", "strand-replica"]}, {})
    assert "'strand-replica' aims at a partition" in str(e.value)
    with pytest.raises(ValueError):
        plan(1, ["depose-leader"], 60, 5, workload="register")
    cfg = resolve({"workload": "queue", "nemesis": ["strand-replica", "depose-leader"]}, {})
    props = node_config(cfg)
    assert props["replica.lag.time.max.ms"] == "3000"
    assert props["leader.imbalance.check.interval.seconds"] == "3"
    steps = plan(4, cfg.nemesis, 120, 5, workload="queue")
    assert {s.kind for s in steps} == {"strand-replica", "depose-leader"}
    assert {(s.kind, s.duration_s) for s in steps} <= {("strand-replica", 24.0),
                                                         ("depose-leader", 18.0)}
    assert steps[-1].at_s + steps[-1].duration_s <= 120


def test_the_active_controller_is_never_stranded():
    import random
    from nemesis.packages.strand_replica import strand_choice
    infos = [(2, 4, [4, 5, 1], [4, 5, 1])]
    for seed in range(20):
        _, stranded, _ = strand_choice(infos, {1, 2, 3}, random.Random(seed), avoid={1})
        assert stranded == 5
    assert strand_choice([(0, 4, [4, 1], [4, 1])], {1, 2, 3}, random.Random(0), avoid={1}) is None


def test_scenarios_aim_by_the_freshest_broker(monkeypatch):
    """A broker just cut off still names itself the leader: per partition, the answer with
    the highest leader epoch wins, and a broker that does not answer is passed over."""
    from workloads import queue_workload as qc
    views = {
        "n1": [(0, 2, 4, [2, 3, 4], [2, 3]), (1, 5, 0, [5, 1, 2], [5, 1, 2])],  # stale on 1
        "n2": [(0, 2, 4, [2, 3, 4], [2, 3]), (1, 1, 1, [5, 1, 2], [1, 2])],
        "n5": [(0, 2, 3, [2, 3, 4], [2, 3, 4]), (1, 5, 0, [5, 1, 2], [5, 1, 2])],
    }

    def fake(address, topic, timeout_s):
        if address == "n4":
            raise ConnectionRefusedError
        return views[address]
    monkeypatch.setattr(qc, "broker_metadata", fake)
    assert qc.freshest_partitions(["n5", "n1", "n4", "n2"], "queue", 1.0) == [
        (0, 2, [2, 3, 4], [2, 3]), (1, 1, [5, 1, 2], [1, 2])]
    assert qc.freshest_partitions(["n4"], "queue", 1.0) == []
    # an ISR shrink keeps the leader epoch; the stranded broker, cut off from the controller,
    # still names itself in the ISR: the view most brokers share wins
    views.update({
        "n1": [(3, 5, 2, [5, 1, 2], [1, 2, 5])],
        "n2": [(3, 5, 2, [5, 1, 2], [2, 5])],
        "n5": [(3, 5, 2, [5, 1, 2], [2, 5])],
    })
    assert qc.freshest_partitions(["n1", "n2", "n5"], "queue", 1.0) == [(3, 5, [5, 1, 2], [2, 5])]


def test_a_transactions_completion_as_jepsen_records_it():
    from workloads.queue_client import Result
    from workloads.queue_workload import txn_completion
    mops = [("send", "k1", 7), ("poll",), ("send", "k0", 8)]
    ok = [Result("ok", 12), Result("ok", {"k2": [[3, 5]]}), Result("ok", 4)]
    assert txn_completion(mops, ok) == (
        "ok", [["send", "k1", [12, 7]], ["poll", {"k2": [[3, 5]]}], ["send", "k0", [4, 8]]], None)
    aborted = [Result("fail", None, "aborted: on purpose"), Result("ok", {}),
               Result("fail", None, "aborted: on purpose")]
    typ, done, error = txn_completion(mops, aborted)
    assert (typ, done[0], error) == ("fail", ["send", "k1", [None, 7]], "aborted: on purpose")
    unknown = [Result("info", None, "no delivery report"), Result("fail", None, "not assigned"),
               Result("fail", None, "x")]
    typ, done, _ = txn_completion(mops, unknown)
    assert typ == "info" and done[1] == ["poll", {}], "a failed poll read nothing"


def test_fatal_client_errors_are_marked_and_counted_in_the_stats():
    from confluent_kafka import KafkaError

    from core.stats import history_stats
    from workloads.queue_client import fatal_name
    assert fatal_name(KafkaError(KafkaError._FENCED, fatal=True)) == "fatal: _FENCED"
    assert fatal_name(KafkaError(KafkaError._TIMED_OUT)) == "_TIMED_OUT"
    rows = [{"process": 1, "type": "fail", "f": "send", "error": "fatal: _FENCED"},
            {"process": 2, "type": "info", "f": "txn",
             "error": "_TIMED_OUT; abort: fatal: INVALID_TXN_STATE"},
            {"process": 3, "type": "fail", "f": "send", "error": "NOT_ENOUGH_REPLICAS"},
            {"process": 1, "type": "info", "f": "send", "error": "fatal: _FENCED"}]
    assert history_stats(rows)["fatal_errors"] == {"_FENCED": 2, "INVALID_TXN_STATE": 1}
