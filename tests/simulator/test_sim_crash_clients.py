"""Jepsen's crash-clients in the simulator (simulator/kafka_crashes.py): a client slot's
client is crashed between two operations and a fresh one goes on as the next process number,
in seeded runs (``--option crash_client_ms=MS``) and in the twin of a Docker run made with
``crash_clients: true``."""
from collections import defaultdict

import pytest

from harness.simulate import load_twin, run_seed
from simulator.cluster import Simulation
from test_sim_twin import stored_run
from workloads.workload import FINAL_PROCESS_BASE


def _lives(history):
    """process -> its rows, and the processes crashed (each crash an invoke then an info)."""
    rows = defaultdict(list)
    for h in history:
        rows[h["process"]].append(h)
    crashed = {p for p, rs in rows.items() if any(r["f"] == "crash" for r in rs)}
    return rows, crashed


def _check_lives(history, slots: int) -> int:
    """Every crashed process stops at its crash and its successor (process + slots) goes on;
    the final reader is FINAL_PROCESS_BASE. Returns the number of crashes."""
    rows, crashed = _lives(history)
    for p in crashed:
        rs = rows[p]
        assert [(r["type"], r["f"]) for r in rs[-2:]] == [("invoke", "crash"), ("info", "crash")], \
            (p, rs[-3:])
        assert sum(r["f"] == "crash" for r in rs) == 2, p
    finals = {h["process"] for h in history if h["f"] == "final-poll"}
    assert finals == {FINAL_PROCESS_BASE}, finals
    clients = set(rows) - finals
    for p in clients:  # a successor begins only once its predecessor crashed
        assert p < slots or p - slots in crashed, (p, sorted(crashed))
        if p >= slots and (rs := rows[p]):
            first = rs[0]
            assert first["time"] >= rows[p - slots][-1]["time"], p
    assert {p % slots for p in clients} == set(range(slots))
    assert max(clients) >= slots  # some successor ran
    return len(crashed)


def test_crashed_clients_go_on_as_new_processes_and_the_correct_node_holds():
    """Seed 132 draws transactions: a producer crashed after a transaction whose end it never
    heard of left it open, and under a transactional id of its own the successor could not
    fence it, so the final read_committed reader stopped at its last stable offset."""
    crashes = 0
    for seed in (1, 2, 132):
        o = run_seed(seed, 5, 60, frozenset(), {"crash_client_ms": 4000}, workload="queue")
        r = o.result
        assert o.ok, (seed, o.invariant, o.detail, o.counterexample)
        q = r.queue_options
        n = _check_lives(r.history, q.producers + q.consumers)
        assert n == r.stats["client_crashes"] and n >= 3, (seed, n)
        crashes += n
        # a successor producer asks for a producer id of its own and its sends (or its
        # transactions) are acknowledged
        acked = defaultdict(int)
        for h in r.history:
            if h["f"] in ("send", "txn") and h["type"] == "ok":
                acked[h["process"]] += 1
        assert any(acked[p] for p in acked if p >= q.producers + q.consumers), seed


def test_clients_crashed_mid_operation_leave_it_indeterminate():
    """``crash_mid_op``: a client is crashed when its life ends, wherever it stands: a send,
    a transaction or a poll in flight ends info (error ``crash``) just before the crash
    itself, and the correct node holds (seed 1 draws no transactions, seed 3 does)."""
    ended = defaultdict(int)
    for seed in (1, 3):
        o = run_seed(seed, 5, 60, frozenset(), {"crash_client_ms": 5000, "crash_mid_op": True},
                     workload="queue")
        r = o.result
        assert o.ok, (seed, o.invariant, o.detail, o.counterexample)
        q = r.queue_options
        _check_lives(r.history, q.producers + q.consumers)
        rows, _ = _lives(r.history)
        for p, rs in rows.items():
            for i, row in enumerate(rs):
                if row.get("error") == "crash" and row["f"] != "crash":
                    assert row["type"] == "info" and rs[i - 1]["type"] == "invoke" and \
                        rs[i - 1]["f"] == row["f"], (p, rs[i - 1:i + 1])
                    assert [x["f"] for x in rs[i + 1:]] == ["crash", "crash"], (p, rs[i:])
                    ended[row["f"]] += 1
    assert ended["send"] and ended["poll"] and ended["txn"], dict(ended)


@pytest.mark.nightly
@pytest.mark.parametrize("mid_op", [False, True])
@pytest.mark.parametrize("chunk", range(10))
def test_the_correct_node_holds_200_seeds_with_crashed_clients(chunk, mid_op):
    """`make nightly`: seeds 1-200, 60 simulated seconds each, every client crashed after a
    life of 0-10 s, at its next step or mid-operation."""
    for seed in range(1 + 20 * chunk, 21 + 20 * chunk):
        o = run_seed(seed, 5, 60, frozenset(), {"crash_client_ms": 5000, "crash_mid_op": mid_op},
                     workload="queue")
        assert o.ok, (seed, o.invariant, o.detail, o.counterexample)
        assert o.result.stats["client_crashes"] > 0, seed


def test_the_same_seed_crashes_the_same_clients():
    a, b = (run_seed(3, 5, 40, frozenset(), {"crash_client_ms": 3000}, workload="queue").result
            for _ in range(2))
    assert a.trace_hash == b.trace_hash and a.history == b.history
    assert a.stats["client_crashes"] > 0
    plain = Simulation(3, 5, 40, workload="queue").run()
    assert "client_crashes" not in plain.stats
    assert "poll" in {h["f"] for h in plain.history} and \
        not any(h["f"] == "crash" for h in plain.history)


def test_the_twin_of_a_run_whose_clients_crash_crashes_them_too(tmp_path):
    run = stored_run(tmp_path / "crash", "queue.yaml", crash_clients=True,
                     crash_client_interval_s=3, time_limit_s=40, concurrency=4)
    twin = load_twin(run)
    o = run_seed(7, 0, 0, frozenset(), twin=twin)
    assert o.ok, (o.invariant, o.detail, o.counterexample)
    n = _check_lives(o.result.history, 4)
    assert n >= 4 and n == o.result.stats["client_crashes"]
    rows, _ = _lives(o.result.history)
    # a successor the stored file holds no operations for runs the generator's for its number
    succ = [p for p in rows if 4 <= p < FINAL_PROCESS_BASE]
    assert succ and all(any(r["f"] in ("send", "poll") for r in rows[p]) or
                        rows[p][-1]["f"] in ("assign", "crash") for p in succ)
