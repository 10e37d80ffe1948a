"""One key's fold: every anomaly of the key found in numpy, one pass per concern."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import cycles as queue_cycles
from .classes import FINAL, ORDER, POLL, SEND, T_FAIL, T_INFO, T_OK


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


def in_order(t: pa.Table) -> pa.Table:
    """``t`` in (index, mop) order, a null mop last: sorted only if it is not so already
    (rows from ``buckets`` are; sorting them again was a tenth of a fold)."""
    if t.num_rows < 2:
        return t
    idx = t["index"].to_numpy(zero_copy_only=False)
    step = np.diff(idx)
    if (step >= 0).all():
        tie = np.nonzero(step == 0)[0]
        if not len(tie):
            return t
        mop = pc.fill_null(t["mop"], np.iinfo(np.int16).max).to_numpy(zero_copy_only=False)
        if (mop[tie + 1] >= mop[tie]).all():
            return t
    return t.sort_by([("index", "ascending"), ("mop", "ascending")])


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
    t = in_order(t)
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
    # Polls of this key: one row each, their messages flattened in read order. The lists
    # are flattened where they lie, not filtered first (a send's are empty): the messages
    # read are most of a large key's memory, and a filter would copy them.
    is_poll = kind != SEND
    pt = t.select(["index", "process", "kind"]).filter(pa.array(is_poll))
    p_idx = pt["index"].to_numpy(zero_copy_only=False).astype(np.int64)
    p_proc = pt["process"].to_numpy(zero_copy_only=False).astype(np.int64)
    p_kind = pt["kind"].to_numpy(zero_copy_only=False)
    lists = t["offsets"].combine_chunks()
    vlists = t["values"].combine_chunks()
    if pc.any(pc.and_(pa.array(~is_poll), pc.greater(pc.list_value_length(lists), 0))).as_py():
        raise ValueError(f"key {key}: a send's row holds messages read")
    m_off = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    m_val = pc.list_flatten(vlists).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    del vlists
    # each message's poll row (its row among the polls): a row's rank among them
    rank = (np.cumsum(is_poll) - 1).astype(np.int32)
    m_row = rank[pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)]
    if len(m_off) != len(m_val):
        raise ValueError(f"key {key}: a poll's offsets and values differ in length")
    starts = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)[np.nonzero(is_poll)[0]] \
        if pt.num_rows else np.zeros(1, np.int64)
    del lists, rank

    # The observed log: (offset, value) pairs from reads and acknowledged sends.
    has_off = ok & s_off_ok
    o_off = np.concatenate([m_off, s_off[has_off]])
    o_val = np.concatenate([m_val, s_val[has_off]])
    order = np.lexsort((o_val, o_off))
    del o_val
    a = o_off[order]
    del o_off
    b = np.concatenate([m_val, s_val[has_off]])[order]
    del order
    distinct = np.ones(len(a), bool)
    distinct[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    u_off, u_val = a[distinct], b[distinct]
    del b, distinct
    # Positions in the observed log (offsets nobody observed left out).
    positions = a[np.concatenate([[True], a[1:] != a[:-1]])] if len(a) else a  # np.unique
    del a  # the arrays of every message read are the fold's memory: each goes once used
    m_op = p_idx[m_row]  # each message's operation
    if edges is not None:
        writers = ((s_type == T_OK) | (s_type == T_INFO)) & s_val_ok
        edges.append(queue_cycles.key_edges(key_id, s_idx, s_val, writers, m_op, m_val,
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
        order = np.lexsort((fi[sends], m_off[reads], m_op[reads]))
        found.add("G1a", len(reads), lambda j: {
            "key": key, "value": _i(m_val[reads[j]]), "offset": _i(m_off[reads[j]]),
            "send_index": _i(fi[sends[j]]), "poll_index": _i(m_op[reads[j]])},
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

    _within_sends(found, key, positions, s_idx, s_proc, s_val, s_off, s_off_ok, s_val_ok,
                  u_off, u_val)
    if len(m_val) and len(s_idx):
        _precommitted(found, key, s_idx, s_proc, s_val, s_val_ok, p_idx, m_op, m_val, m_off)
    if not len(m_off):
        return found.out
    # Order within one operation's reads (all its polls of the key), then between polls.
    m_i = np.searchsorted(positions, m_off) + 1
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


def _precommitted(found: _Found, key, s_idx, s_proc, s_val, s_val_ok, p_idx, r_idx, r_val,
                  r_off) -> None:
    """precommitted-read: an operation read a value it sent itself. Kafka's read_committed
    consumers see a transaction's records only once it committed, which is after the
    transaction's own polls. ``p_idx``: the polls' indexes, ascending (rows are in index
    order); ``r_idx``: each message's."""
    sent = s_idx[s_val_ok]
    if not len(sent) or not len(p_idx):
        return
    j = np.minimum(np.searchsorted(p_idx, sent), len(p_idx) - 1)
    both = np.unique(sent[p_idx[j] == sent])  # a binary search: intersect1d sorted both
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
