"""Queue campaigns on Docker: a correct node is valid, a planted data-plane bug is caught, and
the flush policy decides whether a power loss on every node loses acknowledged writes."""
import json
from pathlib import Path

import pytest

from harness.config import resolve
from harness.runner import run
from harness.store import new_run_dir

pytestmark = pytest.mark.docker


def campaign(tmp_path, **fields):
    cfg = resolve({"workload": "queue", **fields}, {"results_dir": str(tmp_path)})
    run_dir = new_run_dir(Path(tmp_path), cfg.test, cfg.seed)
    with open(run_dir / "progress.log", "w") as progress:
        code = run(cfg, stream=progress, run_dir=run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    return code, results, run_dir


def test_default_queue_campaign_on_a_correct_node_is_valid(docker_client, node_image, tmp_path):
    code, results, run_dir = campaign(tmp_path, seed=11, time_limit_s=40)
    q = results["checkers"]["queue"]
    assert (code, results["valid"]) == (0, True), (q["anomalies"], run_dir)
    assert q["stats"]["sends"]["ok"] > 100 and q["stats"]["final_polls"]
    faults = {f["f"] for f in results["stats"]["faults"]}
    assert {"restart-all"} <= faults and faults & {"kill", "power-loss", "start-partition"}


def test_ack_before_replication_loses_acknowledged_writes(docker_client, node_image, tmp_path):
    """Detection depends on a leader failing with unreplicated acknowledged writes (4 of 5
    seeds in `chaoskraft matrix`): the bug must be caught within three seeds."""
    runs = []
    for seed in (2, 3, 4):
        code, results, run_dir = campaign(tmp_path / str(seed), seed=seed, time_limit_s=40,
                                          bugs=["ack-before-replication"])
        q = results["checkers"]["queue"]
        runs.append((seed, results["verdict"], q["bad_anomalies"], str(run_dir)))
        if results["valid"] is False:
            assert code == 1
            assert set(q["bad_anomalies"]) & {"lost-write", "unseen", "durability"}, runs
            return
    pytest.fail(f"ack-before-replication not caught in seeds 2-4: {runs}")


@pytest.mark.parametrize("flush_messages, loses", [(None, True), (1, False)])
def test_power_loss_on_every_node_and_the_flush_policy(docker_client, node_image, tmp_path,
                                                       flush_messages, loses):
    """Kafka's default never fsyncs: all replicas losing power at once lose what they
    acknowledged. With flush.messages=1 every acknowledged batch is on disk."""
    code, results, run_dir = campaign(
        tmp_path, seed=5, time_limit_s=30, nemesis=["power-loss"], power_loss_targets=["all"],
        nemesis_interval_s=12, flush_messages=flush_messages)
    q = results["checkers"]["queue"]
    lost = set(q["anomalies"]) & {"lost-write", "durability", "unseen", "inconsistent-offsets"}
    assert any(f["f"] == "power-loss" for f in results["stats"]["faults"]), run_dir
    if loses:
        assert results["valid"] is False and lost, (q["anomalies"].keys(), run_dir)
        counts = ", ".join(f"{a} {q['anomalies'][a]['count']}" for a in sorted(lost))
        print(f"never fsync: {counts}")
    else:
        assert results["valid"] is True and not lost, (q["anomalies"], run_dir)
        print(f"fsync every batch: valid, {q['stats']['sends']['ok']} acknowledged sends all read")


def _history(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "history.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("scenario, bug, fields, expected", [
    ("strand-replica", "unclean-election", {},
     {"lost-write", "durability", "inconsistent-offsets"}),
    ("depose-leader", "skip-epoch-truncation", {"idempotent": False},
     {"lost-write", "durability", "inconsistent-offsets"}),
])
def test_scenario_holds_on_a_correct_node_and_catches_its_bug(docker_client, node_image, tmp_path,
                                                               scenario, bug, fields, expected):
    """Each scenario does what it says (the history shows its faults on one partition's
    replicas), a correct node stays valid under it, and the bug it aims at is caught within
    three seeds (`chaoskraft matrix` measures it on five)."""
    code, results, run_dir = campaign(tmp_path / "correct", seed=1, time_limit_s=35,
                                      nemesis=[scenario], **fields)
    q = results["checkers"]["queue"]
    assert (code, results["valid"]) == (0, True), (q["anomalies"], run_dir)
    rows = [r for r in _history(run_dir) if r["process"] == "nemesis" and r["type"] == "info"]
    cuts = [r["value"] for r in rows if r["f"] == "start-partition"]
    assert cuts and all(c["shape"] == scenario for c in cuts), rows
    g = {int(k): set(v) for k, v in cuts[0]["grudge"].items()}
    if scenario == "strand-replica":
        kills = [r["value"] for r in rows if r["f"] == "kill"]
        assert kills and kills[0]["partition"] == cuts[0]["partition"], rows
        stranded = next(n for n, drops in g.items() if drops and n not in kills[0]["nodes"])
        assert g[stranded] == set(kills[0]["nodes"]), "cut from exactly the replicas later killed"
    else:
        isolated = [n for n, drops in g.items() if len(drops) == len(g) - 1]
        assert len(isolated) == 1, g
    runs = []
    for seed in (1, 2, 3):
        code, results, run_dir = campaign(tmp_path / str(seed), seed=seed, time_limit_s=35,
                                          nemesis=[scenario], bugs=[bug], **fields)
        q = results["checkers"]["queue"]
        runs.append((seed, results["verdict"], q["bad_anomalies"], str(run_dir)))
        if results["valid"] is False:
            assert code == 1 and set(q["bad_anomalies"]) & expected, runs
            return
    pytest.fail(f"{bug} not caught by {scenario} in seeds 1-3: {runs}")
