"""Jepsen's Kafka checker semantics, for the histories Jepsen writes.

chaoskraft's own queue checker (``checkers/queue/``, a vectorised fold per
key) judges chaoskraft's runs, whose clients behave in ways of their own (an
assign seeks each partition to the group's committed offset; an ``info``
send's offset is never reported). A Jepsen history is judged here, the way
``jepsen.tests.kafka`` judges it, rule by rule:

- **What was committed.** An ``ok`` operation took effect; an ``info`` one did
  if some value it sent was read by an ``ok`` operation. Only then do its
  sends' offsets count.
- **The version order of a key**: every offset any poll (whatever the poll's
  outcome: Kafka's consumers serve committed data only) or any committed send
  saw, with its values. An offset holding two values is
  ``inconsistent-offsets``; a value at two offsets a ``duplicate``. Positions
  are the offsets that hold something, holes left out.
- **Lost writes.** The highest position read by an ``ok`` operation bounds
  what every reader should have seen: a committed send whose value lies at or
  below it (its last appearance) and that no ``ok`` operation read is lost.
  ``unseen``: values sent ``ok`` that no ``ok`` operation ever read.
- **Aborted and own reads.** ``G1a``: an ``ok`` read of a value whose send
  failed. ``precommitted-read``: an operation read a value it sent itself.
- **Order within an operation**: two successive reads (sends) of one key by
  one operation skip positions (``int-poll-skip``, ``int-send-skip``) or go
  back (``int-nonmonotonic-*``); keys in the operation's ``rebalance-log``
  are left alone.
- **Order between a process's operations.** A poll of a key is compared with
  the last ``ok`` operation of the process that read it: an aborted or
  indeterminate poll does not move the position (the consumer is expected to
  rewind to its committed offsets). A successful or indeterminate assign or
  subscribe keeps the positions of the keys it names and forgets the others;
  a failed one changes nothing. Sends (``ok`` and ``info``) are tracked the
  same way for ``nonmonotonic-send``.
- **Cycles**, as Elle finds them (``checkers/queue_cycles``): wr edges from
  a value's writer to every operation that read it, ww edges (``ww_deps``)
  from a value's writer to the writer of the next value in the key's order.

Examples come out in the shapes ``checkers/queue/``'s do, so reports and
``check`` say them the same way.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from . import cycles as queue_cycles, history as queue_history
from . import local


@dataclass
class Op:
    index: int
    process: int
    type: str
    kind: str  # send | poll | txn | assign | subscribe | other
    writes: dict = field(default_factory=dict)  # key -> [(offset or None, value)] in order
    reads: dict = field(default_factory=dict)  # key -> [(offset, value)] in order
    keys: list = field(default_factory=list)  # an assign's or subscribe's keys
    rebalanced: frozenset = frozenset()  # keys of the operation's rebalance-log


def _ops(t: pa.Table, names: queue_history.KeyNames) -> list[Op]:
    """The completions of client operations, in history order, from the typed table."""
    rows = [r for r in t.to_pylist() if r["process"] is not None and r["type"] != "invoke"]
    ops: dict[int, Op] = {}
    for r in rows:
        o = ops.get(r["index"])
        f = r["f"]
        if o is None:
            kind = "txn" if r["mop"] is not None else \
                {"final-poll": "poll"}.get(f, f if f in ("send", "poll", "assign", "subscribe")
                                       else "other")
            o = ops[r["index"]] = Op(r["index"], r["process"], r["type"], kind)
            extra = json.loads(r["extra"]) if r["extra"] else {}
            if kind in ("assign", "subscribe") and isinstance(extra.get("value"), list):
                o.keys = [names.ids[k] for k in extra["value"] if k in names.ids]
            log = extra.get("rebalance-log")
            if isinstance(log, list):
                o.rebalanced = frozenset(names.ids[k] for e in log if isinstance(e, dict)
                                         for k in e.get("keys") or [] if k in names.ids)
        if f == "send" and r["key"] is not None and r["value"] is not None:
            o.writes.setdefault(r["key"], []).append((r["offset"], r["value"]))
        elif r["reads"] is not None:
            for e in r["reads"]:
                o.reads.setdefault(e["key"], []).extend(zip(e["offsets"], e["values"]))
    return sorted(ops.values(), key=lambda o: o.index)


def _order_key(v):
    return (0, v, "") if isinstance(v, int) else (1, 0, str(v))


class _Found:
    def __init__(self) -> None:
        self.out: dict[str, list] = {}

    def add(self, name: str, example: dict) -> None:
        self.out.setdefault(name, []).append(example)


def check(path, allowed=(), examples: int = 5, ww_deps: bool = False) -> dict:
    """The queue verdict of a history, with Jepsen's semantics; the result has the shape of
    ``checkers.queue.check_queue``'s."""
    typed = queue_history.typed_path(path)
    names = queue_history.key_names(typed)
    t = queue_history.read_table(typed)
    stats = local._totals(t)["stats"]
    ops = _ops(t, names)
    found = _Found()
    name = names.name

    ok_reads: dict = {}
    failed_writes: dict = {}
    ok_writes: dict = {}
    writer: dict = {}  # (key, value) -> the last completion that sent it
    for o in ops:
        for k, pairs in o.writes.items():
            for _, v in pairs:
                writer[(k, v)] = o
                if o.type == "fail":
                    failed_writes.setdefault(k, set()).add(v)
                if o.type == "ok":
                    ok_writes.setdefault(k, {})[v] = o
        if o.type == "ok":
            for k, pairs in o.reads.items():
                ok_reads.setdefault(k, set()).update(v for _, v in pairs)

    def committed(o: Op) -> bool:
        return o.type == "ok" or (o.type == "info" and any(
            v in ok_reads.get(k, ()) for k, pairs in o.writes.items() for _, v in pairs))

    # The version order of each key: offset -> values, from committed sends and every poll.
    logs: dict = {}
    for o in ops:
        sources = [o.reads] + ([o.writes] if committed(o) else [])
        for src in sources:
            for k, pairs in src.items():
                for off, v in pairs:
                    if off is not None:
                        logs.setdefault(k, {}).setdefault(off, set()).add(v)
    orders = {}
    for k, log in logs.items():
        offsets = sorted(log)
        by_index = [min(log[off], key=_order_key) for off in offsets]
        orders[k] = {"offsets": offsets, "by_index": by_index,
                     "by_value": {v: i for i, v in enumerate(by_index)}}
        for off in offsets:
            if len(log[off]) > 1:
                found.add("inconsistent-offsets", {"key": name(k), "offset": off,
                                                   "values": sorted(log[off], key=_order_key)})
        seen: dict = {}
        for off in offsets:
            for v in log[off]:
                seen.setdefault(v, []).append(off)
        for v, at in sorted(seen.items(), key=lambda x: _order_key(x[0])):
            if len(at) > 1:
                found.add("duplicate", {"key": name(k), "value": v, "offsets": at})

    def delta(k, v1, v2) -> int:
        by_value = orders.get(k, {}).get("by_value", {})
        i1, i2 = by_value.get(v1), by_value.get(v2)
        return i2 - i1 if i1 is not None and i2 is not None else 1

    # G1a and precommitted reads.
    for o in ops:
        if o.type == "ok" and o.kind in ("poll", "txn"):
            for k, pairs in o.reads.items():
                for off, v in pairs:
                    if v in failed_writes.get(k, ()):
                        found.add("G1a", {"key": name(k), "value": v, "offset": off,
                                          "send_index": writer[(k, v)].index,
                                          "poll_index": o.index})
        for k, pairs in o.writes.items():
            mine = {v for _, v in pairs}
            hit = next(((off, v) for off, v in o.reads.get(k, ()) if v in mine), None)
            if hit is not None:
                found.add("precommitted-read", {"index": o.index, "process": o.process,
                                                "key": name(k), "value": hit[1],
                                                "offset": hit[0]})
                break

    # Lost writes: below the highest position an ok operation read, every committed value
    # (at its last appearance) should have been read by one.
    for k, vs in ok_reads.items():
        log = logs.get(k)
        if not log:
            continue
        offsets = orders[k]["offsets"]
        first, last = {}, {}
        for i, off in enumerate(offsets):
            for v in log[off]:
                first.setdefault(v, i)
                last[v] = i
        bound = max((first[v] for v in vs if v in first), default=-1)
        must = sorted((v for v, i in last.items() if i <= bound),
                      key=lambda v: (last[v], _order_key(v)))
        for v in must:
            w = writer.get((k, v))
            if v in vs or w is None or not committed(w):
                continue
            found.add("lost-write", {"key": name(k), "value": v,
                                     "offset": offsets[first[v]], "send_index": w.index,
                                     "max_read_offset": offsets[bound]})
    for k, sent in ok_writes.items():
        for v, o in sent.items():
            if v not in ok_reads.get(k, ()):
                off = next((x for x, y in o.writes[k] if y == v), None)
                found.add("unseen", {"key": name(k), "value": v, "offset": off,
                                     "send_index": o.index, "max_read_offset": None})

    # Order within one operation.
    for o in ops:
        for k, pairs in o.reads.items():
            if k in o.rebalanced:
                continue
            for (o1, v1), (o2, v2) in zip(pairs, pairs[1:]):
                d = delta(k, v1, v2)
                if d != 1:
                    found.add("int-poll-skip" if d > 1 else "int-nonmonotonic-poll", {
                        "index": o.index, "process": o.process, "key": name(k),
                        "prev_offset": o1, "offset": o2, "delta": d})
        for k, pairs in o.writes.items():
            for (o1, v1), (o2, v2) in zip(pairs, pairs[1:]):
                d = delta(k, v1, v2)
                if d != 1:
                    found.add("int-send-skip" if d > 1 else "int-nonmonotonic-send", {
                        "index": o.index, "process": o.process, "key": name(k),
                        "prev_value": v1, "value": v2, "prev_offset": o1, "offset": o2,
                        "delta": d})

    # Order between a process's operations.
    last_read: dict = {}  # process -> key -> the last ok operation that read it
    last_sent: dict = {}  # process -> key -> the last ok or info operation that sent to it
    for o in ops:
        reads, sends = last_read.setdefault(o.process, {}), last_sent.setdefault(o.process, {})
        if o.kind in ("assign", "subscribe"):
            if o.type != "fail":
                keep = set(o.keys)
                for d in (reads, sends):
                    for k in [k for k in d if k not in keep]:
                        del d[k]
            continue
        if o.kind in ("poll", "txn"):
            for k, pairs in o.reads.items():
                prev = reads.get(k)
                if prev is None or not prev.reads.get(k) or not pairs:
                    continue
                p_off, p_v = prev.reads[k][-1]
                d = delta(k, p_v, pairs[0][1])
                if d != 1:
                    found.add("poll-skip" if d > 1 else "nonmonotonic-poll", {
                        "process": o.process, "key": name(k), "prev_index": prev.index,
                        "index": o.index, "prev_last_offset": p_off,
                        "first_offset": pairs[0][0], "delta": d})
            if o.type == "ok":
                for k in o.reads:
                    reads[k] = o
        if o.kind in ("send", "txn") and o.type in ("ok", "info"):
            for k, pairs in o.writes.items():
                prev = sends.get(k)
                if prev is not None:
                    p_off, p_v = prev.writes[k][-1]
                    if delta(k, p_v, pairs[0][1]) < 1:
                        found.add("nonmonotonic-send", {
                            "process": o.process, "key": name(k), "prev_offset": p_off,
                            "offset": pairs[0][0], "prev_index": prev.index, "index": o.index})
                sends[k] = o

    per_key = [{n: (len(ex), ex) for n, ex in found.out.items()}]
    cyc = queue_cycles.cycles(queue_cycles.ops_table(t), _edges(ops, writer, orders, ww_deps),
                              examples)
    per_key.append({n: (count, queue_cycles.key_names_in(ex, names.names))
                    for n, (count, ex) in cyc.items()})
    return local._result(per_key, stats, allowed, examples, require_final=False,
                         values=names.values)


def _edges(ops: list[Op], writer: dict, orders: dict, ww_deps: bool) -> pa.Table:
    """wr: a value's writer -> each other operation that read it; ww (``ww_deps``): the
    writer of a value -> the writer of the next value in the key's order."""
    src, dst, rel, key, val = [], [], [], [], []
    for o in ops:
        for k, pairs in o.reads.items():
            for _, v in pairs:
                w = writer.get((k, v))
                if w is not None and w is not o:
                    src.append(w.index), dst.append(o.index), rel.append(queue_cycles.WR)
                    key.append(k), val.append(v)
    if ww_deps:
        for k, order in orders.items():
            by_index = order["by_index"]
            for v1, v2 in zip(by_index, by_index[1:]):
                w1, w2 = writer.get((k, v1)), writer.get((k, v2))
                if w1 is not None and w2 is not None and w1 is not w2:
                    src.append(w1.index), dst.append(w2.index), rel.append(queue_cycles.WW)
                    key.append(k), val.append(v2)
    return pa.table({"src": np.array(src, np.int64), "dst": np.array(dst, np.int64),
                     "rel": np.array(rel, np.int8), "key": np.array(key, np.int32),
                     "value": np.array(val, np.int64)}, schema=queue_cycles.EDGES)
