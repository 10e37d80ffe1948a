"""Zombie producers in the simulator (``--option zombie_producers=true``, with crash_client_ms
and transactions): when a transactional client's life ends, a new producer of the slot's
transactional id starts while the old one still runs; the new one's InitProducerId fences
the old, which goes on until a request of its is refused as fenced, and closes."""
from collections import defaultdict

import pytest

from harness.simulate import run_seed

ZOMBIES = {"transactions": True, "crash_client_ms": 5000, "zombie_producers": True}


def test_a_producer_taken_over_runs_until_fenced_and_the_correct_node_holds():
    for seed in (1, 2):
        o = run_seed(seed, 5, 60, frozenset(), dict(ZOMBIES), workload="queue")
        r = o.result
        assert o.ok, (seed, o.invariant, o.detail, o.counterexample)
        zombies = r.stats["zombie_producers"]
        assert zombies >= 2 and r.stats["zombies_fenced"] == zombies, r.stats
        rows = defaultdict(list)
        for h in r.history:
            rows[h["process"]].append(h)
        slots = r.queue_options.producers + r.queue_options.consumers
        taken = {p - slots for p in rows if p >= slots and p - slots in rows
                 and rows[p - slots] and rows[p - slots][0]["f"] == "txn"}
        assert taken, seed
        fenced = 0
        for p in taken:  # a zombie is never crashed: it ends with its last transaction
            assert not any(h["f"] == "crash" for h in rows[p]), p
            last = rows[p][-1]
            assert last["f"] == "txn" and last["type"] in ("fail", "info", "ok"), last
            fenced += last["type"] == "fail" and last.get("error") in (
                "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
        assert fenced, "some zombie's transaction is known aborted: refused as fenced"


def test_a_zombies_late_batch_is_caught_and_only_with_zombies():
    """fenced-epoch-appends: a zombie's batch after the takeover's ABORT marker opens a
    transaction the new producer's next COMMIT marker ends, and the zombie's failed
    transaction is read (G1a). Without zombies (the clients crashed instead) the same seed
    holds."""
    bug = frozenset({"fenced-epoch-appends"})
    o = run_seed(4, 5, 60, bug, dict(ZOMBIES), workload="queue")
    assert not o.ok and o.invariant == "QueueAnomaly", (o.invariant, o.detail)
    assert "G1a" in {c["anomaly"] for c in o.counterexample}, o.detail
    crashed = run_seed(4, 5, 60, bug, {**ZOMBIES, "zombie_producers": False}, workload="queue")
    assert crashed.ok, (crashed.invariant, crashed.detail)
    assert crashed.result.stats["client_crashes"] > 0


def test_zombies_need_crashed_transactional_clients():
    for options in ({"zombie_producers": True, "transactions": True},
                    {"zombie_producers": True, "crash_client_ms": 5000, "transactions": False},
                    {**ZOMBIES, "crash_mid_op": True}):
        with pytest.raises(ValueError, match="zombie_producers needs crash_client_ms and "
                                             "transactions, and not crash_mid_op"):
            run_seed(1, 5, 10, frozenset(), options, workload="queue")


@pytest.mark.nightly
@pytest.mark.parametrize("chunk", range(10))
def test_the_correct_node_holds_200_seeds_with_zombie_producers(chunk):
    for seed in range(1 + 20 * chunk, 21 + 20 * chunk):
        o = run_seed(seed, 5, 60, frozenset(), dict(ZOMBIES), workload="queue")
        assert o.ok, (seed, o.invariant, o.detail, o.counterexample)
