"""The queue workload in the deterministic simulator: brokers, topics, Produce, Fetch, ISR
and high watermark under the simulator's faults, Kafka clients speaking the wire protocol,
the data-plane invariants and the queue checker."""
import subprocess
import sys

import pytest

from conftest import NIGHTLY
from harness.simulate import run_seed
from node_image.bugs import BUGS as BUG_OPTIONS
from simulator.cluster import Simulation

DURATION_S = 120
# seeds of the correct node: 200 nightly (10 x 20), 6 in CI (of which 0 and 3 draw
# transactions)
CHUNKS, PER_CHUNK = (10, 20) if NIGHTLY else (1, 6)


def test_same_seed_same_trace_and_history():
    a = Simulation(6, 5, 40, workload="queue").run()
    b = Simulation(6, 5, 40, workload="queue").run()
    c = Simulation(7, 5, 40, workload="queue").run()
    assert a.trace_hash == b.trace_hash and a.history == b.history
    assert a.trace_hash != c.trace_hash


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_correct_node_holds_and_its_acknowledged_records_are_read(chunk):
    txns = 0
    for seed in range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK):
        o = run_seed(seed, 5, DURATION_S, frozenset(), workload="queue")
        r = o.result
        assert r.stats["crashes"] + r.stats["partitions"] + r.stats["power_losses"] > 0, \
            f"seed {seed} injected no fault"
        assert o.ok, (f"seed {seed}: {o.invariant} at event {o.event_index}: {o.detail}\n"
                      f"{o.counterexample}\noptions: {r.options.describe()} "
                      f"{r.queue_options.describe()}")
        acked = {h["value"]["value"] for h in r.history if h["f"] == "send" and h["type"] == "ok"}
        acked |= {mop[2][1] for h in r.history if h["f"] == "txn" and h["type"] == "ok"
                  for mop in h["value"]}  # committed transactions' sends
        final = [h for h in r.history if h["f"] == "final-poll" and h["type"] == "ok"]
        assert acked and len(final) == 1, f"seed {seed}: {len(acked)} sends acknowledged"
        read = {v for msgs in final[0]["value"].values() for _, v in msgs}
        assert acked <= read, f"seed {seed}: acknowledged and not read: {sorted(acked - read)[:5]}"
        if r.queue_options.transactions:
            txns += 1
            aborted = {mop[2][1] for h in r.history if h["f"] == "txn" and h["type"] == "fail"
                       for mop in h["value"]}
            assert not aborted & read, f"seed {seed}: aborted sends read: {sorted(aborted & read)[:5]}"
    assert txns, "some seeds of the chunk draw transactions"


def test_a_leader_keeps_its_proposed_isr_while_the_outcome_is_unknown():
    """Seed 75 once broke HighWatermarkWithinIsr on the correct node: a leader proposed n2
    back into the ISR, the controller wrote it and resigned (NOT_CONTROLLER), the leader
    dropped its proposal and moved the high watermark past n2, and the next controller
    committed the ISR with n2 in it. The leader now keeps the proposal (and the maximal ISR
    the high watermark waits for) until it knows, as Kafka's Partition does."""
    o = run_seed(75, 5, DURATION_S, frozenset(), workload="queue")
    assert o.ok, (o.invariant, o.detail)
    assert o.result.stats.get("scenarios"), "the seed draws the scenarios that led there"


def test_a_node_whose_producer_id_request_went_unanswered_does_not_spin():
    """Seed 4: a broker's AllocateProducerIds went unanswered and its deadline stayed the
    node's next one, in the past, so the node's timer fired every millisecond (as the
    runtime's would). The simulator now fails such a node (TimerDueAfterPoll)."""
    o = run_seed(4, 5, DURATION_S, frozenset(), workload="queue")
    assert o.ok, (o.invariant, o.detail)
    assert o.result.events < 100_000, o.result.events


# Each data-plane bug, and what may catch it: an invariant after the event that breaks it,
# or the queue checker on the history at the end. The seeds are tried in order until one
# catches it; the simulator is deterministic, so the first such seed is fixed.
BUGS = {
    "ack-before-replication": {"AckedHeldByIsr"},
    "hw-ignores-isr": {"AckedHeldByIsr", "HighWatermarkWithinIsr"},
    "fetch-above-hw": {"ConsumerReadsBelowHighWatermark"},
    "skip-epoch-truncation": {"ReplicasAgreeBelowHighWatermark", "QueueAnomaly",
                              "AckedRecordsKept"},
    "unclean-election": {"QueueAnomaly", "AckedRecordsKept", "ReplicasAgreeBelowHighWatermark",
                         "HighWatermarkWithinIsr"},
    "skip-fsync": {"QueueAnomaly", "AckedRecordsKept", "HighWatermarkWithinIsr",
                   "ReplicasAgreeBelowHighWatermark"},
    # the transaction bugs, with transactional producers and read_committed consumers
    # (their sim_options): an aborted send read is G1a; a partition whose commit marker
    # never comes holds back every committed send after it (lost-write, durability)
    "read-committed-past-lso": {"ReadCommittedBelowLastStableOffset", "QueueAnomaly"},
    "no-aborted-list": {"QueueAnomaly"},
    "abort-as-commit": {"QueueAnomaly"},
    "partial-commit-markers": {"QueueAnomaly"},
    # with reassignments drawn (its sim_options): an empty new replica in the ISR, or
    # leading, and the others truncated to match it
    "reassign-skips-catch-up": {"HighWatermarkWithinIsr", "QueueAnomaly", "AckedRecordsKept",
                                "ReplicasAgreeBelowHighWatermark", "AckedHeldByIsr"},
    # with elr-crash drawn alone and no fsync (its sim_options): the crashed leader, kept
    # in the ELR, leads without what it lost, and the replica that had it truncates
    "elr-keeps-crashed-replica": {"QueueAnomaly", "AckedRecordsKept", "HighWatermarkWithinIsr",
                                  "ReplicasAgreeBelowHighWatermark", "AckedHeldByIsr"},
    # with preferred elections drawn (its sim_options): the preferred replica, back but cut
    # off outside the ISR, leads without what it missed, and the others truncate to it
    "preferred-election-ignores-isr": {"HighWatermarkWithinIsr", "QueueAnomaly",
                                       "AckedRecordsKept", "ReplicasAgreeBelowHighWatermark",
                                       "AckedHeldByIsr"},
    # with feature upgrades drawn (its sim_options): a replica outside the ISR, down or
    # behind, made leader by the upgrade, leads without what it missed
    "upgrade-elects-outside-isr": {"HighWatermarkWithinIsr", "QueueAnomaly",
                                   "AckedRecordsKept", "ReplicasAgreeBelowHighWatermark",
                                   "AckedHeldByIsr"},
    # a liveness bug: no safety invariant names it, the end-of-run liveness check does
    "isr-expands-only-to-min": {"Liveness", "SendsServeAfterFaults"},
    # two producers sharing an id and epoch: the second's batch taken for a retry of the
    # first's is acknowledged at the first's offset
    "pid-given-twice": {"AckedRecordsKept", "QueueAnomaly"},
    # a zombie producer's batch after its takeover's ABORT marker, committed by the new
    # producer's next marker there: its failed transaction is read
    "fenced-epoch-appends": {"QueueAnomaly"},
}


# What the queue checker must name among the anomalies of a transaction bug it catches.
TXN_ANOMALIES = {"no-aborted-list": {"G1a"}, "abort-as-commit": {"G1a"},
                 "fenced-epoch-appends": {"G1a"},
                 "partial-commit-markers": {"lost-write", "durability"}}


def test_every_data_plane_bug_is_swept():
    assert set(BUGS) == {b.name for b in BUG_OPTIONS.values() if b.workload == "queue"}
    assert set(FIRST_CATCH) <= set(BUGS)


# Where CI's sweep of a bug starts: the first seed that caught it when this table was last
# written (most bugs: seed 1). The simulator is deterministic, so the seeds before it are
# runs CI already knows miss the bug; a change that moves the first catching seed shows at
# night, where every sweep starts at seed 1 (and here as a sweep past this seed).
FIRST_CATCH = {"preferred-election-ignores-isr": 20, "unclean-election": 11}
SWEEP = 30  # seeds tried from the start before the bug counts as missed


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_a_seed_sweep_catches_each_data_plane_bug(bug):
    tried = []
    start = 1 if NIGHTLY else FIRST_CATCH.get(bug, 1)
    for seed in range(start, start + SWEEP):
        o = run_seed(seed, 5, DURATION_S, frozenset({bug}), dict(BUG_OPTIONS[bug].sim_options),
                     workload="queue")
        if not o.ok:
            assert o.invariant in BUGS[bug], (seed, o.invariant, o.detail)
            if bug in TXN_ANOMALIES:
                found = {c["anomaly"] for c in o.counterexample}
                assert found & TXN_ANOMALIES[bug], (seed, o.detail)
            return
        tried.append(seed)
    pytest.fail(f"{bug}: no seed of {tried[0]}-{tried[-1]} caught it")


def test_the_liveness_bug_is_caught_by_the_liveness_check_and_missed_without_it():
    """isr-expands-only-to-min loses nothing a safety invariant sees (seed 0): only the end-of-run
    liveness check names it, and with the check off the seed passes."""
    bug = frozenset({"isr-expands-only-to-min"})
    o = run_seed(0, 5, DURATION_S, bug, workload="queue")
    assert (o.ok, o.invariant) == (False, "Liveness"), (o.invariant, o.detail)
    assert "lacks replicas" in o.detail, o.detail
    off = run_seed(0, 5, DURATION_S, bug, {"liveness": False}, workload="queue")
    assert off.ok, (off.invariant, off.detail)
    assert off.result.trace_hash == o.result.trace_hash, "the check only reads the end state"


def chaoskraft(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_cli_says_what_broke_and_how_to_replay_it():
    args = ["sim", "--workload", "queue", "--seed", "2", "--duration-s", "120",
            "--bug", "skip-epoch-truncation"]
    p = chaoskraft(*args)
    assert p.returncode == 1, p.stderr[-2000:]
    assert "FAIL ReplicasAgreeBelowHighWatermark" in p.stdout
    assert "partitions=" in p.stdout and "producers=" in p.stdout  # the options drawn
    line = next(x for x in p.stdout.splitlines() if "reproduce with:" in x)
    assert line.split("reproduce with: ")[1] == "chaoskraft " + " ".join(
        ["sim", "--seed", "2", "--nodes", "5", "--duration-s", "120", "--workload", "queue",
         "--bug", "skip-epoch-truncation"])
    trace = next(x for x in p.stdout.splitlines() if " trace " in x).split(" trace ")[1]
    again = chaoskraft(*line.split("reproduce with: chaoskraft ")[1].split())
    assert f"trace {trace}" in again.stdout


def test_same_seed_same_trace_in_processes_with_other_hash_seeds():
    """Nothing in a run may depend on set or dict order of strings (hash randomisation) or
    anything else of the process: two processes print the same trace."""
    import os
    traces = []
    for hash_seed in ("1", "2"):
        p = subprocess.run([sys.executable, "-m", "harness.cli", "sim", "--workload", "queue",
                            "--seed", "4", "--duration-s", "20"], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONHASHSEED": hash_seed})
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        traces.append(next(x for x in p.stdout.splitlines() if " trace " in x))
    assert traces[0] == traces[1]


def test_a_failure_leaves_its_journal_and_diagram_and_the_trace_is_the_same_without(tmp_path):
    import json
    bug = frozenset({"hwm-without-majority"})
    o = run_seed(0, 5, 30, bug, journal_dir=tmp_path)
    assert not o.ok and o.invariant == "MajorityReachedHighWatermark"
    assert run_seed(0, 5, 30, bug).trace_hash == o.trace_hash  # journaling changes nothing
    jsonl, page = o.journal
    entries = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert any(e["kind"] == "msg" and e["what"].startswith("FetchRequest") for e in entries)
    assert any(e["kind"] == "event" and "leader" in e["what"] for e in entries)
    text = page.read_text()
    assert "MajorityReachedHighWatermark" in text and "<svg" in text and text.count("<line") > 20
    q = run_seed(1, 5, 60, frozenset({"ack-before-replication"}), workload="queue",
                 journal_dir=tmp_path)
    assert "Produce v8" in q.journal[1].read_text()  # Kafka frames are named by their API
    held = run_seed(1, 5, 10, frozenset(), journal_dir=tmp_path / "held")
    assert held.ok and held.journal is None and not (tmp_path / "held").exists()


def test_shrinking_finds_a_smaller_run_that_fails_the_same_way():
    from harness.simulate import shrink
    bug = frozenset({"ack-before-replication"})
    lines = []
    o, nodes, duration_s, overrides = shrink(1, 5, 120, bug, "queue", log=lines.append)
    assert o.invariant == "AckedHeldByIsr" and nodes == 3 and duration_s <= 5
    assert overrides["partition_mean_ms"] is None and overrides["producers"] == 1
    again = run_seed(1, nodes, duration_s, bug, overrides, "queue")
    assert (again.invariant, again.trace_hash) == (o.invariant, o.trace_hash)
    assert lines[0].startswith("shrinking seed 1: AckedHeldByIsr in 120 s on 5 nodes")
    assert shrink(1, 5, 10, frozenset(), "queue") is None  # a run that holds: nothing


def test_the_queue_needs_three_nodes():
    with pytest.raises(ValueError, match="at least 3 nodes"):
        Simulation(1, 2, 10, workload="queue")
    p = chaoskraft("sim", "--workload", "queue", "--seed", "1", "--nodes", "2")
    assert p.returncode != 0 and "at least 3 nodes" in p.stderr
