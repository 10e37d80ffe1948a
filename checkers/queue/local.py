"""The whole history in this process: its totals and assigns, the keys folded one after
the other, the cycle search, and the result."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import cycles as queue_cycles, history as queue_history
from .classes import ANOMALIES, FINAL, KEY_ROWS, ORDER, POLL, REPOSITIONS, T_FAIL, T_INFO, T_OK
from .fold import fold


TYPES = ("invoke", "ok", "fail", "info")
FS = ("send", "poll", "final-poll") + REPOSITIONS


def _codes(col, names: tuple) -> np.ndarray:
    """Each row's position in ``names``; -1 for another value, -2 for null. One hash lookup
    a row, where comparing the strings once per question cost a whole pass each."""
    got = pc.index_in(col, value_set=pa.array(names, pa.string()))
    codes = pc.fill_null(got, -1).to_numpy(zero_copy_only=False).astype(np.int8)
    codes[~pc.is_valid(col).to_numpy(zero_copy_only=False)] = -2
    return codes


class _Rows:
    """The masks the totals and the key rows share, computed once: completions of client
    operations (``done``: a process, a type other than invoke), their type and f codes."""

    def __init__(self, t: pa.Table) -> None:
        self.t = t
        self.type = _codes(t["type"], TYPES)
        self.f = _codes(t["f"], FS)
        self.done = (pc.is_valid(t["process"]).to_numpy(zero_copy_only=False)
                     & (self.type != 0) & (self.type != -2))

    def where(self, mask: np.ndarray, columns: list[str]) -> pa.Table:
        """Those columns of the rows of ``mask`` (taken, not filtered: the other columns,
        the reads among them, are not copied)."""
        return self.t.select(columns).take(pa.array(np.nonzero(mask)[0]))


def _totals(t: pa.Table, rows: _Rows | None = None, messages: bool = True) -> dict:
    """Stats and the facts every key's fold needs, from the typed history in process
    (``messages``: the messages read counted too, else left at 0)."""
    r = rows or _Rows(t)
    done, f, typ = r.done, r.f, r.type
    sends = {x: int(np.count_nonzero(done & (f == 0) & (typ == TYPES.index(x))))
             for x in ("ok", "fail", "info")}
    read = r.where(done & pc.is_valid(t["reads"]).to_numpy(zero_copy_only=False), ["reads"]) \
        if messages else None
    reads = pc.list_flatten(read["reads"].combine_chunks()) if read and read.num_rows else []
    n_read = int(pc.sum(pc.list_value_length(pc.struct_field(reads, "offsets"))).as_py() or 0) \
        if len(reads) else 0
    assigns_t = r.where(done & (f >= FS.index(REPOSITIONS[0])) & (typ == 1),
                        ["process", "index"])
    return {
        "stats": {"sends": sends, "polls": int(np.count_nonzero(done & (f == 1))),
                  "messages_read": n_read,
                  "final_polls": bool(np.any(done & (f == 2) & (typ == 1)))},
        "assigns": _assigns(zip(assigns_t["process"].to_pylist(),
                                assigns_t["index"].to_pylist())),
    }


def _assigns(pairs) -> dict:
    by: dict = {}
    for proc, idx in pairs:
        by.setdefault(int(proc), []).append(int(idx))
    return {p: np.array(sorted(v), np.int64) for p, v in by.items()}


def key_rows(t: pa.Table, rows: _Rows | None = None) -> pa.Table:
    """The typed history -> KEY_ROWS: one row per send and per (ok poll, key)."""
    r = rows or _Rows(t)
    is_send = r.done & (r.f == 0) & pc.is_valid(t["key"]).to_numpy(zero_copy_only=False)
    s = r.where(is_send, ["key", "index", "process", "value", "offset", "mop"])
    n = s.num_rows
    typ = r.type[is_send]
    empty = pa.ListArray.from_arrays(pa.array(np.zeros(n + 1, np.int32)), pa.array([], pa.int64()))
    sends = pa.table({
        "key": s["key"], "kind": pa.array(np.zeros(n, np.int8)), "index": s["index"],
        "process": s["process"],
        "type": pa.array(np.where(typ == 1, T_OK, np.where(typ == 2, T_FAIL, T_INFO))
                         .astype(np.int8)),
        "value": s["value"], "offset": s["offset"], "offsets": empty, "values": empty,
        "mop": s["mop"]}, schema=KEY_ROWS)
    # What polls read (a failed or indeterminate transaction's polls read too: Kafka's
    # consumers are to serve safe data whatever becomes of the reader's transaction).
    is_poll = r.done & ((r.f == 1) | (r.f == 2)) & pc.is_valid(t["reads"]).to_numpy(
        zero_copy_only=False)
    p = r.where(is_poll, ["index", "process", "mop", "reads"])
    reads = p["reads"].combine_chunks() if p.num_rows else pa.array([], queue_history.READS)
    parent = pc.list_parent_indices(reads)
    flat = pc.list_flatten(reads)
    m = len(flat)
    kinds = np.where(r.f[is_poll] == 2, FINAL, POLL).astype(np.int8)
    polls = pa.table({
        "key": pc.struct_field(flat, "key"), "kind": pa.array(kinds).take(parent),
        "index": p["index"].take(parent), "process": p["process"].take(parent),
        "type": pa.nulls(m, pa.int8()), "value": pa.nulls(m, pa.int64()),
        "offset": pa.nulls(m, pa.int64()), "offsets": pc.struct_field(flat, "offsets"),
        "values": pc.struct_field(flat, "values"), "mop": p["mop"].take(parent)},
        schema=KEY_ROWS)
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
    from ..consistency_models import boundary
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
    rows = _Rows(t)
    facts = _totals(t, rows)
    kr = key_rows(t, rows)
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
