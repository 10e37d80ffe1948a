"""The queue checkers (after Jepsen's ``jepsen.tests.kafka``): one vectorised fold per key.

Input: the typed queue history (``checkers.queue_history``; an older
``history.parquet`` is converted first). Keys are partitions; values are
unique per send.

Definitions (the log of a key is what was observed at each offset, by polls
and by acknowledged sends; an index is a position in that log with the
offsets nobody observed left out):

- inconsistent-offsets: two different values observed at one offset of a key;
- duplicate: one value observed at two offsets of a key;
- G1a (aborted read): a poll read a value whose send definitely failed;
- lost-write: an acknowledged send never read by any poll although some
  poll read the key past its offset;
- unseen: an acknowledged send never read by any poll, final polls included;
- nonmonotonic-send: a process's acknowledged sends to a key got offsets
  that do not increase;
- int-poll-skip / int-nonmonotonic-poll: inside one poll, two successive
  values of a key skip over observed log positions / go backwards;
- poll-skip / nonmonotonic-poll: a process's successive polls of a key
  (until it re-assigns) skip over / go back to observed log positions;
- durability: an acknowledged send missing from the final polls, which read
  every partition after every node was restarted;
- int-send-skip / int-nonmonotonic-send: one operation's (a transaction's)
  successive sends to a key land at log positions that skip over others' /
  go back;
- precommitted-read: an operation read a value it sent itself;
- G0, G1c and their -process and -realtime forms: dependency cycles
  (``checkers/queue_cycles.py``), from edges the per-key folds emit.

An operation may hold several micro-operations (a transaction): its rows
share its index and are ordered by ``mop``; reads and sends are compared
per operation.

Each anomaly comes with its count and a few examples (key, offsets, values,
history indexes of the operations). Which anomalies fail a run is
configurable; Jepsen's defaults for consumers that use assign() fail on all
of them, and duplicates are allowed when producers are not idempotent.

How: every anomaly is a property of one key, given two facts about the whole
history (whether a final poll succeeded, and where each process re-assigned).
So the history becomes one row per send and one row per (poll, key) with the
poll's offsets and values of that key as lists, never one row per message;
each key's rows reach ``fold`` as one Arrow table, which finds every anomaly
of the key in numpy in one pass per concern and returns counts and the first
examples. In process (``engine="local"``) the keys are folded one after the
other; through Spark the rows are repartitioned by key and the same fold
runs in ``mapInArrow``: the history's totals and assigns over four narrow
columns, then the folds (anomalies and dependency edges in one pass), then
the cycle search over the intervals the edges make. ``checkers/queue_reference.py`` (the earlier checker, in Spark SQL)
is the reference the differential tests hold this one to.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import queue_cycles, queue_history

ANOMALIES = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-poll",
             "poll-skip", "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send", "G1a",
             "durability", "int-send-skip", "int-nonmonotonic-send", "precommitted-read",
             "G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
SEND, POLL, FINAL = 0, 1, 2
T_OK, T_FAIL, T_INFO = 0, 1, 2  # a send's type
# The rows ``fold`` takes: sends (kind 0; type T_*) and (poll, key) rows (kind 1 poll, 2
# final-poll). A send's offsets and values are empty lists: Spark hands null list columns
# to Python several times slower than empty ones.
KEY_ROWS = pa.schema([("key", pa.int32()), ("kind", pa.int8()), ("index", pa.int64()),
                      ("process", pa.int32()), ("type", pa.int8()), ("value", pa.int64()),
                      ("offset", pa.int64()), ("offsets", pa.list_(pa.int64())),
                      ("values", pa.list_(pa.int64())), ("mop", pa.int16())])
RESULT_SCHEMA = "anomaly string, count long, examples string"
# The folds' output in Spark: anomaly rows (edge columns null) and dependency edges (anomaly
# null), from one pass over the key rows.
FOLD_SCHEMA = (RESULT_SCHEMA + ", src long, dst long, rel byte, key int, value long")
MESSAGES = "messages read"  # a result row of the fold that is a total, not an anomaly
AUTO_SPARK_ROWS = 4_000_000  # history rows above which engine="auto" uses Spark


REPOSITIONS = ("assign", "subscribe")  # operations after which a consumer may start over


def default_allowed(idempotent: bool | None, consume: str = "assign",
                    ww_deps: bool = False) -> tuple[str, ...]:
    """Jepsen's allowances (``allowed-error-types``): always int-send-skip and the G0 cycles
    (Kafka does not isolate writes: transactions' sends interleave in the log); poll-skip
    and nonmonotonic-poll for subscribe() consumers (a rebalance moves a partition to
    another consumer and back between two polls); the G1c cycles when ww edges are inferred
    (``ww_deps``: t0 <ww t1 <wr t0 is then normal). Plus duplicates unless every producer is
    idempotent (``idempotent: true``): in a default campaign (None: half the producers
    without retries) a producer without retries has duplicated a record on a correct node."""
    allowed = ("int-send-skip", "G0", "G0-process", "G0-realtime")
    if idempotent is not True:
        allowed += ("duplicate",)
    if consume == "subscribe":
        allowed += ("poll-skip", "nonmonotonic-poll")
    if ww_deps:
        allowed += ("G1c", "G1c-process", "G1c-realtime")
    return allowed


def _null_first(v):
    return (0, 0) if v is None else (1, v)


# Examples are listed in this order (the order of the reference checker's reports).
ORDER = {
    "inconsistent-offsets": lambda e: (e["key"], e["offset"]),
    "duplicate": lambda e: (e["key"], e["value"]),
    "G1a": lambda e: (e["poll_index"], e["offset"], e["send_index"]),
    "lost-write": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "unseen": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "durability": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "nonmonotonic-send": lambda e: (e["index"], e["prev_index"]),
    "int-poll-skip": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "int-nonmonotonic-poll": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "poll-skip": lambda e: (e["index"], e["prev_index"]),
    "nonmonotonic-poll": lambda e: (e["index"], e["prev_index"]),
    "int-send-skip": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "int-nonmonotonic-send": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "precommitted-read": lambda e: (e["index"], e["value"]),
}
CYCLES = ("G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
for _name in CYCLES:  # shortest cycles first, then by their first operation
    ORDER[_name] = lambda e: (len(e["cycle"]), [s["index"] for s in e["cycle"]])


def _col(t: pa.Table, name: str, fill: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """A column as int64 numpy with nulls filled, and its not-null mask."""
    c = t[name]
    valid = pc.is_valid(c).to_numpy(zero_copy_only=False)
    return pc.fill_null(c, fill).to_numpy(zero_copy_only=False).astype(np.int64), valid


def _i(x) -> int:
    return int(x)


def _opt(x, ok) -> int | None:
    return int(x) if ok else None


class _Found:
    """Counts and the first examples per anomaly of one key."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.out: dict[str, tuple[int, list[dict]]] = {}

    def add(self, name: str, count: int, make, order) -> None:
        """``order``: the indexes of the ``count`` instances, sorted as ORDER sorts their
        examples (ties aside); ``make(j)`` builds the j-th example."""
        if count <= 0:
            return
        examples = sorted((make(j) for j in order[:4 * self.n]), key=ORDER[name])
        self.out[name] = (count, examples[:self.n])


def fold(t: pa.Table, key, has_final: bool, assigns: dict, n_examples: int = 5,
         edges: list | None = None, key_id: int = -1, ww_deps: bool = False, keep=None,
         anomalies: bool = True) -> dict:
    """Every anomaly of one key: ``{name: (count, first examples)}``.

    ``t``: the key's rows (KEY_ROWS without ``key``); ``assigns``: process ->
    sorted int64 array of the history indexes of its ok assigns. ``edges``: a list
    the key's dependency edges (``queue_cycles.key_edges``, key ``key_id``, those
    ``keep`` keeps) are appended to; ``anomalies=False``: only that.
    """
    found = _Found(n_examples)
    # Operations in history order, a transaction's micro-operations in their order.
    t = t.sort_by([("index", "ascending"), ("mop", "ascending")])
    kind = t["kind"].to_numpy(zero_copy_only=False)
    # Sends.
    st = t.filter(pa.array(kind == SEND))
    s_idx = st["index"].to_numpy(zero_copy_only=False).astype(np.int64)
    s_proc = st["process"].to_numpy(zero_copy_only=False).astype(np.int64)
    s_type, _ = _col(st, "type")
    s_val, s_val_ok = _col(st, "value")
    s_off, s_off_ok = _col(st, "offset")
    s_mop, _ = _col(st, "mop", 0)
    ok = (s_type == T_OK) & s_val_ok
    failed = (s_type == T_FAIL) & s_val_ok
    # Polls of this key: one row each, their messages flattened in read order.
    pt = t.filter(pa.array(kind != SEND))
    p_idx = pt["index"].to_numpy(zero_copy_only=False).astype(np.int64)
    p_proc = pt["process"].to_numpy(zero_copy_only=False).astype(np.int64)
    p_kind = pt["kind"].to_numpy(zero_copy_only=False)
    lists = pt["offsets"].combine_chunks() if pt.num_rows else pa.array([], pa.list_(pa.int64()))
    vlists = pt["values"].combine_chunks() if pt.num_rows else lists
    m_off = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    m_val = pc.list_flatten(vlists).to_numpy(zero_copy_only=False).astype(np.int64)
    m_row = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(m_off) != len(m_val):
        raise ValueError(f"key {key}: a poll's offsets and values differ in length")
    starts = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64) if pt.num_rows \
        else np.zeros(1, np.int64)

    # The observed log: (offset, value) pairs from reads and acknowledged sends.
    has_off = ok & s_off_ok
    o_off = np.concatenate([m_off, s_off[has_off]])
    o_val = np.concatenate([m_val, s_val[has_off]])
    order = np.lexsort((o_val, o_off))
    a, b = o_off[order], o_val[order]
    distinct = np.ones(len(a), bool)
    distinct[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    u_off, u_val = a[distinct], b[distinct]
    if edges is not None:
        writers = ((s_type == T_OK) | (s_type == T_INFO)) & s_val_ok
        edges.append(queue_cycles.key_edges(key_id, s_idx, s_val, writers, p_idx[m_row], m_val,
                                            u_off, u_val, ww_deps, keep))
        if not anomalies:
            return {}
    _groups(found, "inconsistent-offsets", key, u_off, u_val, "offset", "values")
    order = np.lexsort((u_off, u_val))
    _groups(found, "duplicate", key, u_val[order], u_off[order], "value", "offsets")

    # Reads of sends that failed.
    if failed.any() and len(m_val):
        fv_order = np.argsort(s_val[failed], kind="stable")
        fv, fi = s_val[failed][fv_order], s_idx[failed][fv_order]
        lo, hi = np.searchsorted(fv, m_val, "left"), np.searchsorted(fv, m_val, "right")
        hit = np.nonzero(hi > lo)[0]
        reads = np.repeat(hit, (hi - lo)[hit])
        sends = np.concatenate([np.arange(lo[j], hi[j]) for j in hit]) if len(hit) else hit
        order = np.lexsort((fi[sends], m_off[reads], p_idx[m_row[reads]]))
        found.add("G1a", len(reads), lambda j: {
            "key": key, "value": _i(m_val[reads[j]]), "offset": _i(m_off[reads[j]]),
            "send_index": _i(fi[sends[j]]), "poll_index": _i(p_idx[m_row[reads[j]]])},
            order)

    # Acknowledged sends never read.
    never = ok & ~np.isin(s_val, m_val)
    max_read = int(m_off.max()) if len(m_off) else None
    nv = np.nonzero(never)[0]
    if len(nv):
        lost = s_off_ok[nv] & (max_read is not None) & (s_off[nv] < (max_read or 0))
        _sends(found, "lost-write", key, nv[lost], s_val, s_off, s_off_ok, s_idx, max_read)
        _sends(found, "unseen", key, nv[~lost], s_val, s_off, s_off_ok, s_idx, max_read)
    if has_final:
        final_vals = m_val[p_kind[m_row] == FINAL]
        missing = np.nonzero(ok & ~np.isin(s_val, final_vals))[0]
        _sends(found, "durability", key, missing, s_val, s_off, s_off_ok, s_idx, None)

    # Order within a process's sends, from one operation to the next.
    sent = np.nonzero(ok & s_off_ok)[0]
    if len(sent) > 1:
        sent = sent[np.lexsort((s_mop[sent], s_idx[sent], s_proc[sent]))]
        same = (s_proc[sent[1:]] == s_proc[sent[:-1]]) & (s_idx[sent[1:]] != s_idx[sent[:-1]])
        bad = np.nonzero(same & (s_off[sent[1:]] <= s_off[sent[:-1]]))[0]
        prev, cur = sent[bad], sent[bad + 1]
        found.add("nonmonotonic-send", len(bad), lambda j: {
            "process": _i(s_proc[cur[j]]), "key": key, "prev_offset": _i(s_off[prev[j]]),
            "offset": _i(s_off[cur[j]]), "prev_index": _i(s_idx[prev[j]]),
            "index": _i(s_idx[cur[j]])}, np.argsort(s_idx[cur], kind="stable"))

    # Positions in the observed log (offsets nobody observed left out).
    positions = np.unique(o_off)
    _within_sends(found, key, positions, s_idx, s_proc, s_val, s_off, s_off_ok, s_val_ok,
                  u_off, u_val)
    if len(m_val) and len(s_idx):
        _precommitted(found, key, s_idx, s_proc, s_val, s_val_ok, p_idx[m_row], m_val, m_off)
    if not len(m_off):
        return found.out
    # Order within one operation's reads (all its polls of the key), then between polls.
    m_i = np.searchsorted(positions, m_off) + 1
    m_op = p_idx[m_row]
    same = m_op[1:] == m_op[:-1]
    delta = m_i[1:] - m_i[:-1]
    for name, cond in (("int-poll-skip", delta > 1), ("int-nonmonotonic-poll", delta < 1)):
        hit = np.nonzero(same & cond)[0]
        found.add(name, len(hit), lambda j, hit=hit: {
            "index": _i(p_idx[m_row[hit[j] + 1]]), "process": _i(p_proc[m_row[hit[j] + 1]]),
            "key": key, "prev_offset": _i(m_off[hit[j]]), "offset": _i(m_off[hit[j] + 1]),
            "delta": _i(delta[hit[j]])}, np.argsort(p_idx[m_row[hit + 1]], kind="stable"))

    # Successive polls (not final ones) of this key by one process within one assign epoch;
    # the rows of one operation (a transaction's polls) as one: its first and last message.
    counts = np.bincount(m_row, minlength=pt.num_rows)
    rows = np.nonzero((p_kind == POLL) & (counts > 0))[0]
    if len(rows) < 2:
        return found.out
    first = starts[rows] - starts[0]
    last = first + counts[rows] - 1
    head = np.concatenate([[True], p_idx[rows[1:]] != p_idx[rows[:-1]]])
    tail = np.concatenate([head[1:], [True]])
    rows, first, last = rows[head], first[head], last[tail]
    if len(rows) < 2:
        return found.out
    epoch = np.zeros(len(rows), np.int64)
    for proc in np.unique(p_proc[rows]):
        mine = p_proc[rows] == proc
        marks = assigns.get(int(proc))
        if marks is not None and len(marks):
            epoch[mine] = np.searchsorted(marks, p_idx[rows][mine])
    order = np.lexsort((p_idx[rows], epoch, p_proc[rows]))
    r, first, last, epoch = rows[order], first[order], last[order], epoch[order]
    same = (p_proc[r[1:]] == p_proc[r[:-1]]) & (epoch[1:] == epoch[:-1])
    delta = m_i[first[1:]] - m_i[last[:-1]]
    for name, cond in (("poll-skip", delta > 1), ("nonmonotonic-poll", delta < 1)):
        hit = np.nonzero(same & cond)[0]
        found.add(name, len(hit), lambda j, hit=hit: {
            "process": _i(p_proc[r[hit[j] + 1]]), "key": key,
            "prev_index": _i(p_idx[r[hit[j]]]), "index": _i(p_idx[r[hit[j] + 1]]),
            "prev_last_offset": _i(m_off[last[hit[j]]]),
            "first_offset": _i(m_off[first[hit[j] + 1]]), "delta": _i(delta[hit[j]])},
            np.argsort(p_idx[r[hit + 1]], kind="stable"))
    return found.out


def _within_sends(found: _Found, key, positions, s_idx, s_proc, s_val, s_off, s_off_ok,
                  s_val_ok, u_off, u_val) -> None:
    """int-send-skip / int-nonmonotonic-send: one operation's successive sends to the key
    land at log positions that skip over others' / go back (or stay). A send's position is
    that of its acknowledged offset, else of the offset its value was read at."""
    same = np.nonzero(s_idx[1:] == s_idx[:-1])[0]  # sends are in (index, mop) order
    if not len(same):
        return
    pos = np.full(len(s_idx), -1, np.int64)
    pos[s_off_ok] = np.searchsorted(positions, s_off[s_off_ok])
    off = np.where(s_off_ok, s_off, -1)
    todo = np.nonzero(~s_off_ok & s_val_ok)[0]
    if len(todo) and len(u_val):
        vo = np.argsort(u_val, kind="stable")
        j = np.minimum(np.searchsorted(u_val[vo], s_val[todo]), len(vo) - 1)
        hit = u_val[vo][j] == s_val[todo]
        off[todo[hit]] = u_off[vo][j[hit]]
        pos[todo[hit]] = np.searchsorted(positions, off[todo[hit]])
    a, b = same, same + 1
    both = (pos[a] >= 0) & (pos[b] >= 0)
    a, b = a[both], b[both]
    delta = pos[b] - pos[a]
    for name, cond in (("int-send-skip", delta > 1), ("int-nonmonotonic-send", delta < 1)):
        hit = np.nonzero(cond)[0]
        found.add(name, len(hit), lambda j, hit=hit: {
            "index": _i(s_idx[b[hit[j]]]), "process": _i(s_proc[b[hit[j]]]), "key": key,
            "prev_value": _i(s_val[a[hit[j]]]), "value": _i(s_val[b[hit[j]]]),
            "prev_offset": _i(off[a[hit[j]]]), "offset": _i(off[b[hit[j]]]),
            "delta": _i(delta[hit[j]])}, np.argsort(s_idx[b[hit]], kind="stable"))


def _precommitted(found: _Found, key, s_idx, s_proc, s_val, s_val_ok, r_idx, r_val,
                  r_off) -> None:
    """precommitted-read: an operation read a value it sent itself. Kafka's read_committed
    consumers see a transaction's records only once it committed, which is after the
    transaction's own polls."""
    both = np.intersect1d(s_idx[s_val_ok], r_idx)
    if not len(both):
        return
    mine = set(both.tolist())
    sends = {(int(i), int(v)): int(p) for i, v, p, ok in zip(s_idx, s_val, s_proc, s_val_ok)
             if ok and int(i) in mine}
    hits = [j for j in np.nonzero(np.isin(r_idx, both))[0]
            if (int(r_idx[j]), int(r_val[j])) in sends]
    found.add("precommitted-read", len(hits), lambda j: {
        "index": _i(r_idx[hits[j]]), "process": sends[(int(r_idx[hits[j]]), int(r_val[hits[j]]))],
        "key": key, "value": _i(r_val[hits[j]]), "offset": _i(r_off[hits[j]])},
        np.arange(len(hits)))


def _groups(found: _Found, name: str, key, g: np.ndarray, x: np.ndarray, gname: str,
            xname: str) -> None:
    """Groups of equal ``g`` (sorted) holding more than one distinct ``x`` (sorted within)."""
    if not len(g):
        return
    start = np.nonzero(np.concatenate([[True], g[1:] != g[:-1]]))[0]
    size = np.diff(np.concatenate([start, [len(g)]]))
    multi = np.nonzero(size > 1)[0]
    found.add(name, len(multi), lambda j: {
        "key": key, gname: _i(g[start[multi[j]]]),
        xname: [_i(v) for v in x[start[multi[j]]:start[multi[j]] + size[multi[j]]]]},
        np.arange(len(multi)))


def _sends(found: _Found, name: str, key, sel: np.ndarray, s_val, s_off, s_off_ok, s_idx,
           max_read) -> None:
    order = np.lexsort((s_idx[sel], np.where(s_off_ok[sel], s_off[sel], np.iinfo(np.int64).min)))

    def make(j):
        e = {"key": key, "value": _i(s_val[sel[j]]), "offset": _opt(s_off[sel[j]], s_off_ok[sel[j]]),
             "send_index": _i(s_idx[sel[j]])}
        if name != "durability":
            e["max_read_offset"] = max_read
        return e
    found.add(name, len(sel), make, order)


# --------------------------------------------------------------- the whole history

def _totals(t: pa.Table) -> dict:
    """Stats and the facts every key's fold needs, from the typed history in process."""
    done = t.filter(pc.and_(pc.is_valid(t["process"]), pc.not_equal(t["type"], "invoke")))
    f, typ = done["f"], done["type"]
    sends = {x: int(pc.sum(pc.and_(pc.equal(f, "send"), pc.equal(typ, x))).as_py() or 0)
             for x in ("ok", "fail", "info")}
    reads = pc.list_flatten(done.filter(pc.is_valid(done["reads"]))["reads"].combine_chunks())
    messages = int(pc.sum(pc.list_value_length(pc.struct_field(reads, "offsets"))).as_py() or 0) \
        if len(reads) else 0
    assigns_t = done.filter(pc.and_(pc.is_in(f, pa.array(REPOSITIONS)), pc.equal(typ, "ok")))
    return {
        "stats": {"sends": sends, "polls": int(pc.sum(pc.equal(f, "poll")).as_py() or 0),
                  "messages_read": messages,
                  "final_polls": bool(pc.any(pc.and_(pc.equal(f, "final-poll"),
                                                      pc.equal(typ, "ok"))).as_py())},
        "assigns": _assigns(zip(assigns_t["process"].to_pylist(),
                                assigns_t["index"].to_pylist())),
    }


def _assigns(pairs) -> dict:
    by: dict = {}
    for proc, idx in pairs:
        by.setdefault(int(proc), []).append(int(idx))
    return {p: np.array(sorted(v), np.int64) for p, v in by.items()}


def key_rows(t: pa.Table) -> pa.Table:
    """The typed history -> KEY_ROWS: one row per send and per (ok poll, key)."""
    t = t.filter(pc.and_(pc.is_valid(t["process"]), pc.not_equal(t["type"], "invoke")))
    s = t.filter(pc.and_(pc.equal(t["f"], "send"), pc.is_valid(t["key"])))
    n = s.num_rows
    typ = s["type"].to_numpy(zero_copy_only=False)
    empty = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.int64()))
    sends = pa.table({
        "key": s["key"], "kind": pa.array(np.zeros(n, np.int8)), "index": s["index"],
        "process": s["process"],
        "type": pa.array(np.where(typ == "ok", T_OK, np.where(typ == "fail", T_FAIL, T_INFO))
                         .astype(np.int8)),
        "value": s["value"], "offset": s["offset"], "offsets": empty, "values": empty,
        "mop": s["mop"]}, schema=KEY_ROWS)
    # What polls read (a failed or indeterminate transaction's polls read too: Kafka's
    # consumers are to serve safe data whatever becomes of the reader's transaction).
    p = t.filter(pc.and_(pc.is_in(t["f"], pa.array(["poll", "final-poll"])),
                         pc.is_valid(t["reads"])))
    reads = p["reads"].combine_chunks() if p.num_rows else pa.array([], queue_history.READS)
    parent = pc.list_parent_indices(reads)
    r = pc.list_flatten(reads)
    m = len(r)
    kinds = np.where(np.asarray(p["f"].to_numpy(zero_copy_only=False) == "final-poll"), FINAL,
                     POLL).astype(np.int8) if p.num_rows else np.zeros(0, np.int8)
    polls = pa.table({
        "key": pc.struct_field(r, "key"), "kind": pa.array(kinds).take(parent),
        "index": p["index"].take(parent), "process": p["process"].take(parent),
        "type": pa.nulls(m, pa.int8()), "value": pa.nulls(m, pa.int64()),
        "offset": pa.nulls(m, pa.int64()), "offsets": pc.struct_field(r, "offsets"),
        "values": pc.struct_field(r, "values"), "mop": p["mop"].take(parent)}, schema=KEY_ROWS)
    return pa.concat_tables([sends, polls])


def _result(per_key: list[dict], stats: dict, allowed, n_examples: int,
            require_final: bool = True, values=None) -> dict:
    """``values``: the file's ``ValueNames``, so examples show values as written."""
    merged: dict[str, list] = {}
    for out in per_key:
        for name, (count, examples) in out.items():
            m = merged.setdefault(name, [0, []])
            m[0] += count
            m[1].extend(examples)
    anomalies = {}
    for name in ANOMALIES:
        if name in merged:
            count, examples = merged[name]
            shown = sorted(examples, key=ORDER[name])[:n_examples]
            anomalies[name] = {"count": count,
                               "examples": values.named(shown) if values else shown}
    from .consistency_models import boundary
    bad = sorted(a for a in anomalies if a not in allowed)
    if bad:
        valid: object = False
    elif not stats["final_polls"] and require_final:
        valid = "unknown"  # durability could not be established
    else:
        valid = True
    return {"valid": valid, "anomalies": anomalies, "bad_anomalies": bad,
            "allowed": sorted(allowed), "stats": stats,
            # the consistency models the anomalies found rule out, as Elle says it
            "consistency": boundary(anomalies)}


def check_local(path: str | Path, allowed=(), examples: int = 5, ww_deps: bool = False,
                require_final: bool = True) -> dict:
    """The whole check in this process (pyarrow and numpy; no Spark)."""
    path = queue_history.typed_path(path)
    names = queue_history.key_names(path)
    t = queue_history.read_table(path, ["index", "process", "type", "f", "key", "value",
                                        "offset", "reads", "mop", "invoke"])
    facts = _totals(t)
    kr = key_rows(t)
    kr = kr.sort_by([("key", "ascending"), ("index", "ascending"), ("mop", "ascending")])
    keys = kr["key"].to_numpy(zero_copy_only=False)
    starts = np.nonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))[0] if len(keys) else []
    ends = list(starts[1:]) + [len(keys)]
    # Cycles in two passes: the folds keep only backward edges, which make the intervals;
    # only if there are any, the edges inside them (most of a large history's are in none).
    back: list = [queue_cycles.EDGES.empty_table()]
    per_key = [fold(kr.slice(a, b - a), names.name(int(keys[a])), facts["stats"]["final_polls"],
                    facts["assigns"], examples, back, int(keys[a]), ww_deps,
                    queue_cycles.backward) for a, b in zip(starts, ends)]
    lo, hi = queue_cycles.merge_spans(*queue_cycles.backward_spans(pa.concat_tables(back)))
    if len(lo):
        inside: list = [queue_cycles.EDGES.empty_table()]
        if not ww_deps:  # a wr edge inside an interval joins two rows inside it
            kr = kr.filter(pa.array(queue_cycles.interval_of(
                kr["index"].to_numpy(zero_copy_only=False), lo, hi) >= 0))
            keys = kr["key"].to_numpy(zero_copy_only=False)
            starts = np.nonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))[0] \
                if len(keys) else []
            ends = list(starts[1:]) + [len(keys)]
        for a, b in zip(starts, ends):
            fold(kr.slice(a, b - a), None, False, facts["assigns"], 0, inside, int(keys[a]),
                 ww_deps, queue_cycles.within(lo, hi), anomalies=False)
        found = queue_cycles.cycles(queue_cycles.ops_table(t), pa.concat_tables(inside),
                                    examples)
        per_key.append({name: (count, queue_cycles.key_names_in(ex, names.names))
                        for name, (count, ex) in found.items()})
    return _result(per_key, facts["stats"], allowed, examples, require_final, names.values)


def _fold_partition(has_final: bool, assigns: dict, names: list, n_examples: int,
                    ww_deps: bool, keep=queue_cycles.backward, anomalies: bool = True):
    """For ``mapInArrow`` over rows partitioned by key: a partition's batches, gathered per
    key, then each key folded (no sort by key before the Python worker, which
    ``groupBy().applyInArrow`` would do and which costs more than the fold)."""
    def run(batches):
        parts: dict = {}
        for b in batches:
            if not b.num_rows:
                continue
            t = pa.Table.from_batches([b]).sort_by("key")
            keys = t["key"].to_numpy(zero_copy_only=False)
            edges = np.nonzero(np.concatenate([[True], keys[1:] != keys[:-1], [True]]))[0]
            for lo, hi in zip(edges[:-1], edges[1:]):
                parts.setdefault(int(keys[lo]), []).append(t.slice(lo, hi - lo))
        out_names, counts, examples = [], [], []
        edges: list = []
        for k, tables in parts.items():
            table = pa.concat_tables(tables)
            del tables[:]
            out = fold(table, names[k], has_final, assigns, n_examples, edges, k, ww_deps, keep,
                       anomalies)
            if anomalies:
                out[MESSAGES] = (int(pc.sum(pc.list_value_length(table["offsets"])).as_py()
                                     or 0), [])
            for name, (count, ex) in out.items():
                out_names.append(name)
                counts.append(count)
                examples.append(json.dumps(ex))
        n = len(out_names)
        yield pa.RecordBatch.from_arrays(
            [pa.array(out_names, pa.string()), pa.array(counts, pa.int64()),
             pa.array(examples, pa.string())]
            + [pa.nulls(n, f.type) for f in queue_cycles.EDGES],
            names=["anomaly", "count", "examples"] + queue_cycles.EDGES.names)
        for e in edges:
            if e.num_rows:
                yield pa.RecordBatch.from_arrays(
                    [pa.nulls(e.num_rows, pa.string()), pa.nulls(e.num_rows, pa.int64()),
                     pa.nulls(e.num_rows, pa.string())] + [c.combine_chunks() for c in e.columns],
                    names=["anomaly", "count", "examples"] + queue_cycles.EDGES.names)
    return run


def _merge_partition(batches):
    """``mapInArrow``: a range partition's backward spans merged (the driver merges the
    partitions' results)."""
    t = pa.Table.from_batches(list(batches), schema=pa.schema([("lo", pa.int64()),
                                                                ("hi", pa.int64())]))
    lo, hi = queue_cycles.merge_spans(t["lo"].to_numpy(zero_copy_only=False),
                                      t["hi"].to_numpy(zero_copy_only=False))
    yield pa.RecordBatch.from_arrays([pa.array(lo, pa.int64()), pa.array(hi, pa.int64())],
                                     names=["lo", "hi"])


def _rows_within(lo: np.ndarray, hi: np.ndarray):
    """``mapInArrow``: the key rows whose operation lies in an interval."""
    def run(batches):
        for b in batches:
            keep = queue_cycles.interval_of(b.column("index").to_numpy(zero_copy_only=False),
                                            lo, hi) >= 0
            if keep.any():
                yield b.filter(pa.array(keep))
    return run


def _tag_partition(lo: np.ndarray, hi: np.ndarray):
    """``mapInArrow`` over operations and edges (GRAPH rows): each tagged with its interval,
    those in none (or edges across two) dropped."""
    def run(batches):
        for b in batches:
            kind = b.column("kind").to_numpy(zero_copy_only=False)
            a = queue_cycles.interval_of(b.column("a").to_numpy(zero_copy_only=False), lo, hi)
            bb = b.column("b").fill_null(-1).to_numpy(zero_copy_only=False)
            iv = np.where(kind == 1, np.where(queue_cycles.interval_of(bb, lo, hi) == a, a, -1),
                          a)
            keep = iv >= 0
            if keep.any():
                t = pa.Table.from_batches([b]).filter(pa.array(keep))
                yield from t.append_column("iv", pa.array(iv[keep], pa.int64())).to_batches()
    return run


def _cycles_group(n_examples: int, names: list):
    """``applyInArrow`` per interval: its operations and edges -> the cycles found."""
    def run(t: pa.Table) -> pa.Table:
        kind = t["kind"].to_numpy(zero_copy_only=False)
        o, e = t.filter(pa.array(kind == 0)), t.filter(pa.array(kind == 1))
        ops = pa.table({"index": o["a"], "invoke": o["b"], "process": o["c"],
                        "ok": pc.equal(o["d"], 1)}, schema=queue_cycles.OPS)
        edges = pa.table({"src": e["a"], "dst": e["b"], "rel": pc.cast(e["d"], pa.int8()),
                          "key": e["c"], "value": e["e"]}, schema=queue_cycles.EDGES)
        found = queue_cycles.cycles(ops, edges, n_examples)
        rows = [(name, count, json.dumps(queue_cycles.key_names_in(ex, names)))
                for name, (count, ex) in found.items()]
        return pa.table({"anomaly": pa.array([r[0] for r in rows], pa.string()),
                         "count": pa.array([r[1] for r in rows], pa.int64()),
                         "examples": pa.array([r[2] for r in rows], pa.string())})
    return run


def _spark_cycles(spark, done, folded, refold, names: list, n_examples: int) -> list[dict]:
    """The cycle search in Spark (``queue_cycles``): the backward edges the folds emitted
    (``folded``) merged into intervals per range partition and then in the driver
    (intervals only, never the graph); if there are any, the key rows folded again for
    the edges inside them (``refold(lo, hi)``: those folds' output); operations and
    edges tagged with their interval, each interval searched in one ``applyInArrow``
    group."""
    from pyspark.sql import functions as F
    spans = folded.where(F.col("anomaly").isNull()).select(F.col("dst").alias("lo"),
                                                           F.col("src").alias("hi"))
    parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    merged = (spans.repartitionByRange(parts, "lo").sortWithinPartitions("lo")
              .mapInArrow(_merge_partition, "lo long, hi long").collect())
    if not merged:
        return []
    lo, hi = queue_cycles.merge_spans(np.array([r["lo"] for r in merged], np.int64),
                                      np.array([r["hi"] for r in merged], np.int64))
    edges = (refold(lo, hi).where(F.col("anomaly").isNull())
             .select(*queue_cycles.EDGES.names))
    ops = (done.where(F.col("type").isin("ok", "info") & F.col("f").isin("send", "poll",
                                                                         "final-poll"))
           .select("index", "invoke", "process", "type").dropDuplicates(["index"])
           .select(F.lit(0).cast("byte").alias("kind"), F.col("index").alias("a"),
                   F.col("invoke").alias("b"), F.col("process").alias("c"),
                   F.when(F.col("type") == "ok", 1).otherwise(0).cast("int").alias("d"),
                   F.lit(None).cast("bigint").alias("e")))
    graph = ops.unionByName(edges.select(
        F.lit(1).cast("byte").alias("kind"), F.col("src").alias("a"), F.col("dst").alias("b"),
        F.col("key").alias("c"), F.col("rel").cast("int").alias("d"),
        F.col("value").alias("e")))
    schema = ("kind byte, a long, b long, c int, d int, e long, iv long")
    rows = (graph.mapInArrow(_tag_partition(lo, hi), schema=schema).groupBy("iv")
            .applyInArrow(_cycles_group(n_examples, names), schema=RESULT_SCHEMA).collect())
    return [{r["anomaly"]: (r["count"], json.loads(r["examples"]))} for r in rows]


def check_spark(spark, path: str | Path, allowed=(), examples: int = 5,
                ww_deps: bool = False, require_final: bool = True) -> dict:
    """The same check through Spark: totals and assigns in one job, the folds (anomalies
    and dependency edges) in one, then the cycle search (``_spark_cycles``)."""
    from pyspark.sql import functions as F
    path = queue_history.typed_path(path)
    file_names = queue_history.key_names(path)
    names = file_names.names
    size = sum(p.stat().st_size for p in ([Path(path)] if Path(path).is_file()
                                          else Path(path).glob("*.parquet")))
    # Shuffle partitions sized to the input: about 64 MB of Parquet each, at least 2.
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, min(400, size // (64 << 20) + 1))))
    h = spark.read.parquet(str(path))
    for c in ("mop", "invoke"):  # a typed file written before transactions were grouped
        if c not in h.columns:
            h = h.withColumn(c, F.lit(None).cast("smallint" if c == "mop" else "bigint"))
    done = h.where(F.col("process").isNotNull() & (F.col("type") != "invoke"))
    is_read = F.col("f").isin("poll", "final-poll") & F.col("reads").isNotNull()
    # One job over four narrow columns: the totals, and the assigns the folds need.
    t = done.select("index", "process", "type", "f").agg(
        *[F.count_if((F.col("f") == "send") & (F.col("type") == x)).alias(x)
          for x in ("ok", "fail", "info")],
        F.count_if(F.col("f") == "poll").alias("polls"),
        F.count_if((F.col("f") == "final-poll") & (F.col("type") == "ok")).alias("finals"),
        F.collect_list(F.when(F.col("f").isin(*REPOSITIONS) & (F.col("type") == "ok"),
                              F.struct("process", "index"))).alias("assigns"),
    ).collect()[0]
    stats = {"sends": {x: int(t[x]) for x in ("ok", "fail", "info")}, "polls": int(t["polls"]),
             "messages_read": 0, "final_polls": t["finals"] > 0}
    assigns = _assigns((a["process"], a["index"]) for a in t["assigns"])
    empty = F.array().cast("array<bigint>")
    sends = done.where((F.col("f") == "send") & F.col("key").isNotNull()).select(
        "key", F.lit(SEND).cast("byte").alias("kind"), "index", "process",
        F.when(F.col("type") == "ok", T_OK).when(F.col("type") == "fail", T_FAIL)
        .otherwise(T_INFO).cast("byte").alias("type"), "value", "offset",
        empty.alias("offsets"), empty.alias("values"), "mop")
    polls = (done.where(is_read)
             .select("index", "process", "mop",
                     F.when(F.col("f") == "final-poll", F.lit(FINAL)).otherwise(F.lit(POLL))
                     .cast("byte").alias("kind"), F.explode("reads").alias("r"))
             .select(F.col("r.key").alias("key"), "kind", "index", "process",
                     F.lit(None).cast("byte").alias("type"),
                     F.lit(None).cast("bigint").alias("value"),
                     F.lit(None).cast("bigint").alias("offset"),
                     F.col("r.offsets").alias("offsets"), F.col("r.values").alias("values"),
                     "mop"))
    rows = sends.unionByName(polls)

    def refold(lo, hi):
        """The second pass: the edges inside the intervals, from the rows inside them
        (all rows with ww edges, whose version order needs every send)."""
        inside = rows if ww_deps else rows.mapInArrow(_rows_within(lo, hi), rows.schema)
        return inside.repartition("key").mapInArrow(_fold_partition(
            stats["final_polls"], assigns, names, 0, ww_deps, queue_cycles.within(lo, hi),
            anomalies=False), schema=FOLD_SCHEMA)
    folded = (rows.repartition("key").mapInArrow(_fold_partition(stats["final_polls"], assigns, names, examples,
                                              ww_deps), schema=FOLD_SCHEMA)
              .persist())
    try:
        found = folded.where(F.col("anomaly").isNotNull()).select("anomaly", "count",
                                                                  "examples").collect()
        per_key = []
        for r in found:
            if r["anomaly"] == MESSAGES:
                stats["messages_read"] += r["count"]
            else:
                per_key.append({r["anomaly"]: (r["count"], json.loads(r["examples"]))})
        per_key += _spark_cycles(spark, done, folded, refold, names, examples)
    finally:
        folded.unpersist()
    return _result(per_key, stats, allowed, examples, require_final, file_names.values)


def history_rows(path: str | Path) -> int:
    return pq.ParquetFile(str(path)).metadata.num_rows


def check_queue(spark, parquet_path: str, allowed=(), examples: int = 5,
                engine: str = "auto", ww_deps: bool = False, require_final: bool = True) -> dict:
    """Check a queue history (typed, or an older history.parquet).

    ``require_final``: without a successful final poll (``f: final-poll``) the
    verdict is unknown (durability could not be established); False for
    histories that have none (Jepsen's final polls are ordinary polls).

    ``engine``: ``local`` (this process), ``spark`` (``spark`` is a session,
    or None for the default one), ``auto``: Spark when a session is given or
    the history has more than AUTO_SPARK_ROWS rows, else local.
    """
    if engine not in ("auto", "local", "spark"):
        raise ValueError(f"engine must be auto, local or spark, not {engine!r}")
    if engine == "auto":
        engine = "spark" if spark is not None or history_rows(parquet_path) > AUTO_SPARK_ROWS \
            else "local"
    if engine == "local":
        return check_local(parquet_path, allowed, examples, ww_deps, require_final)
    if spark is None:
        from .spark import spark_session
        spark = spark_session()
    return check_spark(spark, parquet_path, allowed, examples, ww_deps, require_final)


# --------------------------------------------------------------- examples in words

def sentence(anomaly: str, ex, at, sent) -> str | None:
    """One plain sentence saying what an example of ``anomaly`` shows; None for an example of
    another shape. ``at(index)``: how to name an operation (" at 41.2 s (op 123)");
    ``sent(key, value)``: how to name the send of a value named by its value alone (the
    duplicate and inconsistent-offsets examples)."""
    if isinstance(ex, dict) and anomaly in CYCLES:
        return cycle_sentence(ex, at)
    if not isinstance(ex, dict) or "key" not in ex:
        return None
    g = ex.get
    key = g("key")
    key = f"key {key}" if isinstance(key, int) else key  # Jepsen's keys are integers
    if anomaly in ("lost-write", "unseen", "durability"):
        where = f"offset {g('offset')} of {key}" if g("offset") is not None else key
        head = f"send of {g('value')} acknowledged at {where}{at(g('send_index'))}"
        if anomaly == "lost-write":
            return f"{head} was never read; polls read {key} up to offset {g('max_read_offset')}"
        if anomaly == "unseen":
            return f"{head} was never read by any poll, the final ones included"
        return f"{head} is missing from the final reads, made after every node restarted"
    if anomaly == "duplicate":
        return (f"value {g('value')} of {key}{sent(key, g('value'))} was read at offsets "
                f"{', '.join(map(str, g('offsets') or []))}")
    if anomaly == "inconsistent-offsets":
        return (f"offset {g('offset')} of {key} was read holding different values: "
                + "; ".join(f"{v}{sent(key, v)}" for v in g("values") or []))
    if anomaly == "G1a":
        return (f"a poll{at(g('poll_index'))} read {g('value')} at offset {g('offset')} of "
                f"{key}, from a send that failed{at(g('send_index'))}")
    if anomaly == "nonmonotonic-send":
        return (f"process {g('process')}'s acknowledged sends to {key} went from offset "
                f"{g('prev_offset')}{at(g('prev_index'))} back to {g('offset')}"
                f"{at(g('index'))}")
    skip = f"skipping {(g('delta') or 2) - 1} offsets others read"
    if anomaly in ("int-poll-skip", "int-nonmonotonic-poll"):
        how = skip if anomaly == "int-poll-skip" else "going back"
        return (f"one poll by process {g('process')}{at(g('index'))} read {key} at offset "
                f"{g('prev_offset')} and next at {g('offset')}, {how}")
    if anomaly in ("poll-skip", "nonmonotonic-poll"):
        how = skip if anomaly == "poll-skip" else "going back"
        return (f"process {g('process')}'s poll of {key}{at(g('index'))} began at offset "
                f"{g('first_offset')} where its previous one{at(g('prev_index'))} ended at "
                f"{g('prev_last_offset')}, {how}")
    if anomaly in ("int-send-skip", "int-nonmonotonic-send"):
        how = skip if anomaly == "int-send-skip" else "going back"
        return (f"one transaction by process {g('process')}{at(g('index'))} sent {g('prev_value')} "
                f"to {key} at offset {g('prev_offset')} and next {g('value')} at offset "
                f"{g('offset')}, {how}")
    if anomaly == "precommitted-read":
        return (f"a transaction by process {g('process')}{at(g('index'))} read {g('value')} at "
                f"offset {g('offset')} of {key}, which it sent itself before it committed")
    return None


def _step_key(s) -> str:
    """A cycle step's key as the sentences name it (Jepsen's keys are integers)."""
    return f"key {s['key']}" if isinstance(s["key"], int) else s["key"]


def cycle_proof(ex) -> str | None:
    """A dependency cycle as Elle proves one: each operation named, each step's reason,
    and the contradiction that closes it."""
    steps = ex.get("cycle") if isinstance(ex, dict) else None
    if not steps:
        return None
    n = len(steps)
    k = _step_key

    def why(j: int) -> str:
        s, a, b = steps[j], f"T{j + 1}", f"T{(j + 1) % n + 1}"
        return {"wr": lambda: f"{a} sent {s['value']} to {k(s)}, which {b} read",
                "ww": lambda: f"{a} sent to {k(s)} just before {b} sent {s['value']}",
                "process": lambda: f"{a} came before {b} in process {s['process']}",
                "realtime": lambda: f"{a} completed before {b} was invoked"}[s["rel"]]()
    let = ", ".join(f"T{j + 1} = process {s['process']}'s operation {s['index']}"
                    for j, s in enumerate(steps))
    then = "; ".join(f"T{j + 1} < T{j + 2}, because {why(j)}" for j in range(n - 1))
    return (f"Let {let}. Then {then}. However, T{n} < T1, because {why(n - 1)}: "
            f"a contradiction.")


def cycle_sentence(ex, at) -> str | None:
    """A dependency cycle in words: each operation and why it precedes the next."""
    steps = ex.get("cycle") if isinstance(ex, dict) else None
    if not steps:
        return None
    k = _step_key
    why = {"wr": lambda s: f"sent {s['value']} to {k(s)}, which was read by",
           "ww": lambda s: f"sent to {k(s)} just before {s['value']} was sent by",
           "process": lambda s: "came before, in the same process,",
           "realtime": lambda s: "completed before the invocation of"}
    def op(st) -> str:
        return f"process {st['process']}'s operation{at(st['index'])}"
    parts = [op(steps[0])]
    for j, st in enumerate(steps):
        nxt = steps[(j + 1) % len(steps)]
        parts.append(f"{why[st['rel']](st)} " + (op(nxt) if j + 1 < len(steps)
                                                   else f"the first (op {nxt['index']})"))
    return " ".join(parts) + ": a cycle"
