"""Dependency cycles of queue histories (checkers/queue/cycles.py).

Each class planted in a small history and found, in process and through
Spark alike; none on histories of a simulated correct broker with
concurrent transactional and plain clients; and the search by intervals
finds exactly the strongly connected operations that a naive search of the
whole graph (every realtime pair linked) finds, on random graphs.
"""
import random

import numpy as np
import pyarrow as pa
import pytest

from conftest import NIGHTLY
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from checkers.queue import cycles as qc
from checkers.queue import history as queue_history
from checkers.queue import ANOMALIES, CYCLES, check_queue, default_allowed


class Ops:
    """Operations invoked and completed at chosen points: ``at`` steps of the history."""

    def __init__(self):
        self.events = []  # (time, seq, row)

    def op(self, p, start, end, f, invoke, done, type_="ok", key=None):
        self.events.append((start, len(self.events), {"process": p, "type": "invoke", "f": f,
                                                      "key": key, "value": invoke}))
        self.events.append((end, len(self.events), {"process": p, "type": type_, "f": f,
                                                    "key": key, "value": done}))
        return self

    def txn(self, p, start, end, mops, type_="ok"):
        invoke = [["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in mops]
        return self.op(p, start, end, "txn", invoke, mops, type_)

    def rows(self, final: dict | None = None):
        out = []
        for i, (_, _, r) in enumerate(sorted(self.events, key=lambda e: (e[0], e[1]))):
            out.append({**r, "index": i, "time": i})
        if final is not None:
            n = len(out)
            out.append({"index": n, "time": n, "process": 1000, "type": "invoke",
                        "f": "final-poll", "value": None})
            out.append({"index": n + 1, "time": n + 1, "process": 1000, "type": "ok",
                        "f": "final-poll", "value": final})
        return out


def check(tmp_path, rows, spark=None, **kw):
    path = tmp_path / "q.parquet"
    queue_history.write(rows, path)
    local = check_queue(None, str(path), engine="local", **kw)
    # through Spark as well in `make nightly` (in CI test_queue_differential holds the engines
    # equal, cycles included)
    if spark is not None and NIGHTLY:
        remote = check_queue(spark, str(path), engine="spark", **kw)
        assert remote["anomalies"] == local["anomalies"]
    return local


def planted():
    """name -> (history rows, ww_deps): the class planted on its own."""
    return {
        # Two transactions, each reading what the other sent.
        "G1c": (Ops().txn(1, 0, 10, [["send", "a", [0, 1]], ["poll", {"b": [[0, 2]]}]])
                .txn(2, 1, 11, [["send", "b", [0, 2]], ["poll", {"a": [[0, 1]]}]]).rows(), False),
        # Each process reads the other's send and then sends what the other one reads.
        "G1c-process": (Ops().op(1, 0, 2, "poll", None, {"a": [[0, 5]]})
                        .op(2, 1, 3, "poll", None, {"b": [[0, 6]]})
                        .op(1, 4, 6, "send", {"value": 6}, {"value": 6, "offset": 0}, key="b")
                        .op(2, 5, 7, "send", {"value": 5}, {"value": 5, "offset": 0}, key="a")
                        .rows(), False),
        # A poll that completed before the send of what it read was invoked.
        "G1c-realtime": (Ops().op(1, 0, 1, "poll", None, {"a": [[0, 9]]})
                         .op(2, 2, 3, "send", {"value": 9}, {"value": 9, "offset": 0}, key="a")
                         .rows(), False),
        # Two transactions sending to a and b in opposite log orders.
        "G0": (Ops().txn(1, 0, 10, [["send", "a", [0, 1]], ["send", "b", [1, 3]]])
               .txn(2, 1, 11, [["send", "a", [1, 2]], ["send", "b", [0, 4]]]).rows(), True),
        # One process's later send went before its earlier one in the log.
        "G0-process": (Ops().op(1, 0, 5, "send", {"value": 1}, {"value": 1, "offset": 1}, key="a")
                       .op(1, 6, 9, "send", {"value": 2}, {"value": 2, "offset": 0}, key="a")
                       .rows(), True),
        # As above, across two processes in real time.
        "G0-realtime": (Ops().op(1, 0, 5, "send", {"value": 1}, {"value": 1, "offset": 1}, key="a")
                        .op(2, 6, 9, "send", {"value": 2}, {"value": 2, "offset": 0}, key="a")
                        .rows(), True),
    }


@pytest.mark.spark
@pytest.mark.xdist_group("spark")
@pytest.mark.parametrize("name", ["G1c", "G0"])
def test_cycles_through_spark_by_either_path_equal_the_local_ones(spark, tmp_path, name):
    """The Spark check's two ways to the folds (a shared directory's buckets, and Spark's
    shuffle) find the same cycles as the check in process."""
    from checkers.queue.spark import check_spark
    rows, ww = planted()[name]
    kw = {"ww_deps": ww, "allowed": default_allowed(True, ww_deps=ww)}
    local = check(tmp_path, rows, **kw)
    assert name in local["anomalies"]
    for shuffle in (False, True):
        remote = check_spark(spark, str(tmp_path / "q.parquet"), shuffle=shuffle, **kw)
        assert remote["anomalies"] == local["anomalies"], shuffle
        assert remote["stats"] == local["stats"], shuffle


@pytest.mark.spark
def test_each_cycle_class_is_found_with_its_cycle(spark_if_nightly, tmp_path):
    cases = planted()
    assert set(cases) == set(CYCLES) and set(CYCLES) <= set(ANOMALIES)
    for name, (rows, ww) in cases.items():
        r = check(tmp_path, rows, spark_if_nightly, ww_deps=ww, allowed=default_allowed(True, ww_deps=ww))
        assert name in r["anomalies"], (name, r["anomalies"])
        cyc = r["anomalies"][name]["examples"][0]["cycle"]
        rels = {s["rel"] for s in cyc}
        allowed, required = qc.CLASSES[name]
        assert {qc.RELS.index(x) for x in rels} <= allowed and \
            required <= {qc.RELS.index(x) for x in rels}, (name, cyc)
        # Each step's operation is in the history, and the cycle closes.
        indexes = {row["index"] for row in rows}
        assert all(s["index"] in indexes for s in cyc) and len(cyc) >= 2, cyc
        if name.startswith("G0"):  # allowed, as Jepsen allows them
            assert name not in r["bad_anomalies"]
        else:
            assert name in r["bad_anomalies"] and r["valid"] is False


def test_without_ww_deps_no_write_cycle_is_inferred(tmp_path):
    rows, _ = planted()["G0"]
    assert not set(check(tmp_path, rows)["anomalies"]) & set(CYCLES)


def correct_broker(rng: random.Random, n_ops: int = 300, procs: int = 5, txn: bool = True):
    """A history of a correct broker: each operation takes effect at one instant inside its
    invocation and completion; a transaction's sends are appended at once, as they are
    sent, and visible to polls only once it commits (aborted ones never); polls read on
    from each process's position. Some operations time out (info) after taking effect."""
    keys = ["a", "b", "c"]
    log = {k: [] for k in keys}  # [offset, value, txn id or None]
    committed: set = set()
    aborted: set = set()
    pos = {p: {k: 0 for k in keys} for p in range(procs)}
    ops = Ops()
    clock = 0.0
    free = {p: 0.0 for p in range(procs)}
    value = 0
    plans = []
    for n in range(n_ops):
        p = rng.randrange(procs)
        start = max(free[p], clock) + rng.random()
        effect = start + rng.random() * 3
        end = effect + rng.random() * 3
        free[p] = end + 0.01
        clock = start
        kind = rng.random()
        if txn and kind < 0.5:
            mops = [("send", rng.choice(keys)) if rng.random() < 0.6 else ("poll",)
                    for _ in range(rng.randint(1, 4))]
        elif kind < 0.75:
            mops = [("send", rng.choice(keys))]
        else:
            mops = [("poll",)]
        is_txn = txn and kind < 0.5
        fate = "ok" if not is_txn or rng.random() < 0.85 else "fail"  # aborted on purpose
        plans.append((effect, n, p, start, end, mops, fate, is_txn))
    for effect, n, p, start, end, mops, fate, is_txn in sorted(plans):
        done = []
        for m in mops:
            if m[0] == "send":
                value += 1
                k = m[1]
                off = log[k][-1][0] + 1 + (1 if is_txn else 0) if log[k] else 0  # markers
                log[k].append([off, value, n if is_txn else None])
                done.append(["send", k, [off if fate == "ok" else None, value]])
            else:
                got = {}
                for k in keys:
                    msgs = [e for e in log[k] if e[0] >= pos[p][k]]
                    out = []
                    for e in msgs:
                        if e[2] is not None and e[2] not in committed and e[2] not in aborted:
                            break  # the last stable offset: an open transaction
                        if e[2] is None or e[2] in committed:
                            out.append([e[0], e[1]])
                        pos[p][k] = e[0] + 1
                    if out:
                        got[k] = out
                done.append(["poll", got])
        (committed if fate == "ok" else aborted).add(n)
        typ = fate if rng.random() > 0.05 else "info"  # took effect; its end unknown
        if typ == "info":  # what its polls read is still known, as a consumer has it
            done = [["send", m[1], [None, m[2][1]]] if m[0] == "send" else m for m in done]
        if is_txn:
            ops.txn(p, start, end, done, typ)
        elif mops[0][0] == "send":
            v, off = done[0][2][1], done[0][2][0]
            ops.op(p, start, end, "send", {"value": v},
                   {"value": v, **({"offset": off} if typ == "ok" else {})}, typ, key=done[0][1])
        else:
            ops.op(p, start, end, "poll", None, done[0][1])
    final = {k: [[e[0], e[1]] for e in log[k] if e[2] is None or e[2] in committed]
             for k in keys}
    return ops.rows(final)


@pytest.mark.parametrize("seed", range(8))
def test_no_cycle_or_anomaly_on_a_correct_broker(tmp_path, seed):
    rng = random.Random(seed)
    rows = correct_broker(rng, txn=seed % 2 == 0)
    r = check(tmp_path, rows)
    allowed = set(default_allowed(True))
    assert not set(r["anomalies"]) - allowed, r["anomalies"]
    assert r["valid"] is True
    # With ww edges, write cycles of interleaved transactions are expected and allowed.
    r = check(tmp_path, rows, ww_deps=True, allowed=default_allowed(True, ww_deps=True))
    assert r["valid"] is True, r["bad_anomalies"]


@pytest.mark.spark
@pytest.mark.nightly
def test_a_correct_broker_in_spark_too(spark, tmp_path):
    rows = correct_broker(random.Random(99))
    r = check(tmp_path, rows, spark, ww_deps=True)
    assert not set(r["anomalies"]) - set(default_allowed(True, ww_deps=True))


def naive_components(ops: pa.Table, edges: pa.Table) -> set:
    """Operations in a cycle, from the whole graph: every pair (A ok, A before B's
    invocation) linked, process order as queue_cycles draws it."""
    idx = ops["index"].to_numpy()
    inv = ops["invoke"].fill_null(-1).to_numpy()
    proc = ops["process"].to_numpy()
    ok = ops["ok"].to_numpy(zero_copy_only=False)
    pos = {int(i): j for j, i in enumerate(idx)}
    src, dst = [], []
    for s, d in zip(edges["src"].to_numpy(), edges["dst"].to_numpy()):
        if int(s) in pos and int(d) in pos:
            src.append(pos[int(s)])
            dst.append(pos[int(d)])
    for a in range(len(idx)):
        for b in range(len(idx)):
            if ok[a] and inv[b] >= 0 and idx[a] < inv[b]:
                src.append(a)
                dst.append(b)
        later_ok = [b for b in range(len(idx)) if proc[b] == proc[a] and idx[b] > idx[a]]
        if ok[a] and later_ok:
            src.append(a)
            dst.append(min(later_ok, key=lambda b: idx[b]))
    n = len(idx)
    g = csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    _, label = connected_components(g, directed=True, connection="strong")
    sizes = np.bincount(label)
    return {int(idx[j]) for j in range(n) if sizes[label[j]] > 1}


@pytest.mark.parametrize("seed", range(20))
def test_intervals_find_what_the_whole_graph_holds(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 40)
    # Operations: invocation and completion points on a shared line, 4 processes.
    points = list(range(4 * n))
    rng.shuffle(points)
    ops, free = [], {}
    for j in range(n):
        a, b = sorted(points[2 * j:2 * j + 2])
        ops.append((b, a, rng.randrange(4), rng.random() < 0.9))
    ops.sort()
    # Keep each process sequential: drop an operation that overlaps its process's last.
    kept = []
    for b, a, p, ok in ops:
        if free.get(p, -1) < a:
            kept.append((b, a, p, ok))
            free[p] = b
    table = pa.table({"index": [o[0] for o in kept], "invoke": [o[1] for o in kept],
                      "process": [o[2] for o in kept], "ok": [o[3] for o in kept]},
                     schema=qc.OPS)
    e = rng.randint(1, 2 * len(kept))
    pairs = [(rng.choice(kept)[0], rng.choice(kept)[0]) for _ in range(e)]
    pairs = [(s, d) for s, d in pairs if s != d]
    edges = pa.table({"src": [s for s, _ in pairs], "dst": [d for _, d in pairs],
                      "rel": [qc.WR] * len(pairs), "key": [0] * len(pairs),
                      "value": list(range(len(pairs)))}, schema=qc.EDGES)
    got = set()
    for vidx, _, src, dst, _, _, _ in qc.interval_graphs(table, edges):
        g = csr_matrix((np.ones(len(src)), (src, dst)), shape=(len(vidx), len(vidx)))
        _, label = connected_components(g, directed=True, connection="strong")
        sizes = np.bincount(label)
        got |= {int(vidx[j]) for j in range(len(vidx)) if sizes[label[j]] > 1}
    assert got == naive_components(table, edges)


def test_spans_merge_when_they_share_an_operation():
    lo, hi = qc.merge_spans(np.array([5, 1, 9, 3]), np.array([7, 3, 12, 4]))
    assert lo.tolist() == [1, 5, 9] and hi.tolist() == [4, 7, 12]
    assert qc.interval_of(np.array([0, 1, 4, 5, 8, 12, 13]), lo, hi).tolist() == \
        [-1, 0, 0, 1, -1, 2, -1]
