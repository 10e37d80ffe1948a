"""Dependency cycles of a queue history, as Jepsen's Kafka checker asks Elle for them.

The graph
---------
Vertices are the operations that may have taken effect: completions ``ok`` or
``info`` of sends, polls and transactions (a transaction's micro-operations
share its index). Edges, after ``jepsen.tests.kafka``:

- wr: T1 sent v to k and T2 polled v from k;
- ww (only when asked, ``ww_deps``; Jepsen's ``--ww-deps``): T1 sent v1 and T2
  sent v2, the next value in k's log (offsets in order, gaps skipped);
- process: T1 and T2 are successive operations of one process (an ``info``
  operation may take effect later, so none leaves it: the chain goes on from
  the process's last ``ok`` operation);
- realtime: T1 completed ``ok`` before T2 was invoked, transitively reduced
  (each operation is linked from the operations completed before its
  invocation that no later-completed one already covers).

Cycles are classified as Elle names them: G0 (ww only), G1c (ww and wr, at
least one wr), and each with -process (process edges too, at least one) and
-realtime (realtime and process edges too, at least one realtime). Jepsen
allows G0 in every mode (Kafka does not isolate writes), and G1c when ww
edges are inferred.

Finding them without the whole graph in one place
-------------------------------------------------
Order the operations by the index of their completion, ``π``. Process and
realtime edges always point forward in ``π`` (T1 completes before T2 is
invoked, so before T2 completes). Only data edges (wr, ww) can point back.
Every cycle crosses each cut between its lowest and highest ``π`` forward and
back again, so the spans ``[π(head), π(tail)]`` of its backward edges cover
that whole range: a cycle lies within one *interval*, a maximal union of
overlapping backward spans, and uses only operations whose ``π`` is in it.
A history with no backward edge is acyclic without any search. Each interval
is searched on its own (in Spark, a group of ``applyInArrow``): strongly
connected components by scipy, then per class a shortest cycle through an
edge of a required kind by breadth-first search, as Elle reports one.
"""
from __future__ import annotations

import json
from collections import deque

import numpy as np
import pyarrow as pa

WW, WR, PROCESS, REALTIME = 0, 1, 2, 3
RELS = ("ww", "wr", "process", "realtime")
# name: (the edge kinds a cycle of it may use, the kinds it must contain)
CLASSES = {
    "G0": ({WW}, {WW}),
    "G1c": ({WW, WR}, {WR}),
    "G0-process": ({WW, PROCESS}, {WW, PROCESS}),
    "G1c-process": ({WW, WR, PROCESS}, {WR, PROCESS}),
    "G0-realtime": ({WW, PROCESS, REALTIME}, {WW, REALTIME}),
    "G1c-realtime": ({WW, WR, PROCESS, REALTIME}, {WR, REALTIME}),
}
# Data edges, as the per-key pass makes them: src and dst are operation indexes.
EDGES = pa.schema([("src", pa.int64()), ("dst", pa.int64()), ("rel", pa.int8()),
                   ("key", pa.int32()), ("value", pa.int64())])
# The operations: index (of the completion), invoke (index of the invocation; null if
# unknown), process, ok (False: info).
OPS = pa.schema([("index", pa.int64()), ("invoke", pa.int64()), ("process", pa.int32()),
                 ("ok", pa.bool_())])
CANDIDATES = 16  # edges of a required kind tried per component before giving up on a class


def backward(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Edges that point back in completion order: all the intervals are made of."""
    return dst < src


def within(lo: np.ndarray, hi: np.ndarray):
    """Edges with both ends in one interval: all the search needs."""
    def keep(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        a = interval_of(src, lo, hi)
        return (a >= 0) & (a == interval_of(dst, lo, hi))
    return keep


def key_edges(key: int, s_idx, s_val, s_type_ok_or_info, r_idx, r_val, u_off, u_val,
              ww_deps: bool, keep=None) -> pa.Table:
    """The data edges of one key. Sends (``s_*``; writers are those ok or info), reads
    (``r_idx``: the reading operation of each message read, ``r_val`` its value), the
    observed log (``u_off`` ascending, ``u_val``) for ww; ``keep(src, dst)``: which to
    keep (``backward``, ``within``), applied before anything is gathered."""
    w = s_type_ok_or_info
    wv, wi = s_val[w], s_idx[w]
    order = np.argsort(wv, kind="stable")
    wv, wi = wv[order], wi[order]
    src, dst, val, rel = [], [], [], []
    if len(wv) and len(r_val):
        j = np.minimum(np.searchsorted(wv, r_val), len(wv) - 1)
        hit = (wv[j] == r_val) & (wi[j] != r_idx)
        if keep is not None:
            hit[hit] &= keep(wi[j[hit]], r_idx[hit])
        pairs = np.stack([wi[j[hit]], r_idx[hit]], axis=1)
        if len(pairs):
            pairs, first = np.unique(pairs, axis=0, return_index=True)
            src.append(pairs[:, 0])
            dst.append(pairs[:, 1])
            val.append(r_val[hit][first])
            rel.append(np.full(len(pairs), WR, np.int8))
    if ww_deps and len(u_off) > 1 and len(wv):
        one = np.concatenate([[True], u_off[1:] != u_off[:-1]])  # one value per offset
        lv = u_val[one]
        j = np.minimum(np.searchsorted(wv, lv), len(wv) - 1)
        writer = np.where(wv[j] == lv, wi[j], -1)
        a, b = writer[:-1], writer[1:]
        ok = (a >= 0) & (b >= 0) & (a != b)
        if keep is not None:
            ok[ok] &= keep(a[ok], b[ok])
        if ok.any():
            src.append(a[ok])
            dst.append(b[ok])
            val.append(lv[1:][ok])
            rel.append(np.full(int(ok.sum()), WW, np.int8))
    if not src:
        return EDGES.empty_table()
    n = sum(len(x) for x in src)
    return pa.table({"src": np.concatenate(src), "dst": np.concatenate(dst),
                     "rel": np.concatenate(rel), "key": np.full(n, key, np.int32),
                     "value": np.concatenate(val)}, schema=EDGES)


def merge_spans(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed spans -> the maximal unions of overlapping ones (sharing an operation counts),
    sorted."""
    if not len(lo):
        return lo, hi
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    new = np.concatenate([[True], lo[1:] > reach[:-1]])
    starts = np.nonzero(new)[0]
    ends = np.concatenate([starts[1:], [len(lo)]]) - 1
    return lo[starts], reach[ends]


def backward_spans(edges: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    src = edges["src"].to_numpy(zero_copy_only=False)
    dst = edges["dst"].to_numpy(zero_copy_only=False)
    back = dst < src
    return dst[back], src[back]


def interval_of(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The interval each position lies in, -1 for none."""
    if not len(lo):
        return np.full(len(x), -1, np.int64)
    i = np.searchsorted(lo, x, "right") - 1
    inside = (i >= 0) & (x <= hi[np.maximum(i, 0)])
    return np.where(inside, i, -1)


def _order_edges(index, invoke, process, ok) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Process and realtime edges among these operations (positions into the arrays)."""
    n = len(index)
    src, dst, rel = [], [], []
    # Process order: from each process's last ok operation to its next operation.
    by = np.lexsort((index, process))
    last_ok: dict[int, int] = {}
    for j in by:
        p = int(process[j])
        if p in last_ok:
            src.append(last_ok[p])
            dst.append(int(j))
            rel.append(PROCESS)
        if ok[j]:
            last_ok[p] = int(j)
    # Realtime: a sweep over invocations and ok completions in history order.
    has_inv = invoke >= 0
    events = [(int(index[j]), 1, int(j)) for j in range(n) if ok[j]]
    events += [(int(invoke[j]), 0, int(j)) for j in range(n) if has_inv[j]]
    events.sort()
    frontier: set[int] = set()
    preds: dict[int, list[int]] = {}
    for _, kind, j in events:
        if kind == 0:  # invoked: everything in the frontier completed before it
            preds[j] = list(frontier)
            for a in preds[j]:
                src.append(a)
                dst.append(j)
                rel.append(REALTIME)
        else:  # completed ok: it covers what preceded its invocation
            for a in preds.pop(j, ()):
                frontier.discard(a)
            frontier.add(j)
    return (np.array(src, np.int64), np.array(dst, np.int64), np.array(rel, np.int8))


def _cycle_through(e: int, src, dst, adj) -> list[int] | None:
    """Edge ids of a shortest cycle through edge ``e`` (``e`` first), via ``adj``
    (vertex -> [(edge id, head)]), or None."""
    start, goal = int(dst[e]), int(src[e])
    if start == goal:
        return [e]
    came: dict[int, int] = {start: -1}
    q = deque([start])
    while q:
        v = q.popleft()
        for eid, w in adj.get(v, ()):
            if w in came:
                continue
            came[w] = eid
            if w == goal:
                path = []
                while w != start:
                    path.append(came[w])
                    w = int(src[came[w]])
                return [e] + path[::-1]
            q.append(w)
    return None


def _find(n, src, dst, rel, allowed, required) -> list[list[int]]:
    """One cycle (edge ids) per strongly connected component of the edges of ``allowed``
    kinds that holds a cycle with every kind in ``required``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components
    m = np.isin(rel, list(allowed))
    if not m.any():
        return []
    es = np.nonzero(m)[0]
    g = csr_matrix((np.ones(len(es), np.int8), (src[es], dst[es])), shape=(n, n))
    _, label = connected_components(g, directed=True, connection="strong")
    inside = es[label[src[es]] == label[dst[es]]]
    if not len(inside):
        return []
    out = []
    comp = label[src[inside]]
    for c in np.unique(comp):
        mine = inside[comp == c]
        adj: dict[int, list] = {}
        for eid in mine:
            adj.setdefault(int(src[eid]), []).append((int(eid), int(dst[eid])))
        found = None
        for need in sorted(required, key=lambda r: (r in (WW, WR), r)):  # rarer kinds first
            for eid in mine[rel[mine] == need][:CANDIDATES]:
                cyc = _cycle_through(int(eid), src, dst, adj)
                if cyc is not None and required <= {int(rel[x]) for x in cyc}:
                    found = cyc
                    break
            if found is not None:
                break
        if found is not None:
            out.append(found)
    return out


def interval_graphs(ops: pa.Table, edges: pa.Table):
    """Per interval: (operation indexes, process of each, src, dst, rel, key, value) with
    src and dst positions into the indexes, data edges and the process and realtime edges
    among the interval's operations."""
    index = ops["index"].to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(index, kind="stable")
    index = index[order]
    invoke = ops["invoke"].fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)[order]
    process = ops["process"].to_numpy(zero_copy_only=False).astype(np.int64)[order]
    ok = ops["ok"].to_numpy(zero_copy_only=False).astype(bool)[order]
    e_src = edges["src"].to_numpy(zero_copy_only=False).astype(np.int64)
    e_dst = edges["dst"].to_numpy(zero_copy_only=False).astype(np.int64)
    e_rel = edges["rel"].to_numpy(zero_copy_only=False).astype(np.int8)
    e_key = edges["key"].to_numpy(zero_copy_only=False)
    e_val = edges["value"].to_numpy(zero_copy_only=False)
    lo, hi = merge_spans(*backward_spans(edges))
    if not len(lo):
        return
    v_iv = interval_of(index, lo, hi)
    s_iv, d_iv = interval_of(e_src, lo, hi), interval_of(e_dst, lo, hi)
    for iv in np.unique(v_iv[v_iv >= 0]):
        vs = np.nonzero(v_iv == iv)[0]
        es = np.nonzero((s_iv == iv) & (d_iv == iv))[0]
        vidx = index[vs]
        a = np.searchsorted(vidx, e_src[es])
        b = np.searchsorted(vidx, e_dst[es])
        real = (a < len(vs)) & (b < len(vs))
        real[real] &= (vidx[a[real]] == e_src[es][real]) & (vidx[b[real]] == e_dst[es][real])
        es, a, b = es[real], a[real], b[real]
        if not len(es):
            continue
        os_, od, orel = _order_edges(vidx, invoke[vs], process[vs], ok[vs])
        yield (vidx, process[vs], np.concatenate([a, os_]), np.concatenate([b, od]),
               np.concatenate([e_rel[es], orel]), np.concatenate([e_key[es], np.full(len(os_), -1)]),
               np.concatenate([e_val[es], np.full(len(os_), -1)]))


def cycles(ops: pa.Table, edges: pa.Table, n_examples: int = 5) -> dict:
    """Every cycle class found: ``{name: (count, examples)}``; a count is of strongly
    connected components holding a cycle of the class. ``ops``: OPS; ``edges``: EDGES
    (data edges whose ends are not both operations are dropped)."""
    found: dict[str, list] = {}
    for vidx, proc, src, dst, rel, key, val in interval_graphs(ops, edges):
        for name, (allowed, required) in CLASSES.items():
            for cyc in _find(len(vidx), src, dst, rel, allowed, required):
                found.setdefault(name, []).append([
                    {"index": int(vidx[src[x]]), "process": int(proc[src[x]]),
                     "rel": RELS[rel[x]],
                     **({"key": int(key[x]), "value": int(val[x])} if rel[x] in (WW, WR)
                        else {})} for x in cyc])
    out = {}
    for name, cycs in found.items():
        cycs.sort(key=lambda c: (len(c), [s["index"] for s in c]))
        out[name] = (len(cycs), [{"cycle": c} for c in cycs[:n_examples]])
    return out


def ops_table(t: pa.Table) -> pa.Table:
    """OPS from the typed history (any columns of it that include index, invoke, process,
    type and f): every ok or info completion of a send, poll or transaction, once."""
    import pyarrow.compute as pc
    m = pc.and_(pc.and_(pc.is_valid(t["process"]), pc.is_in(t["type"], pa.array(["ok", "info"]))),
                pc.is_in(t["f"], pa.array(["send", "poll", "final-poll"])))
    d = t.filter(m)
    idx = d["index"].to_numpy(zero_copy_only=False)
    _, first = np.unique(idx, return_index=True)
    d = d.take(pa.array(first))
    return pa.table({"index": d["index"], "invoke": d["invoke"], "process": d["process"],
                     "ok": pc.equal(d["type"], "ok")}, schema=OPS)


def key_names_in(examples: list, names: list) -> list:
    """Examples with key ids replaced by the history's key names."""
    for ex in examples:
        for step in ex["cycle"]:
            if "key" in step:
                step["key"] = names[step["key"]]
    return examples


def dumps(found: dict) -> list[tuple[str, int, str]]:
    return [(name, count, json.dumps(ex)) for name, (count, ex) in found.items()]
