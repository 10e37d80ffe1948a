"""chaoskraft histories and their conversion to operations for the checkers.

A history row (JSON lines on disk; Parquet for Spark) is one invoke or one
completion:

    index    int     position in the history
    time     int     monotonic time (ms in simulation, ns in real runs)
    process  int|str the client process (``"nemesis"`` for faults)
    type     str     invoke | ok | fail | info
    f        str     read | write | cas | ... (fault names for the nemesis)
    key      str     the key (register) or partition (queue)
    value    any     write value, [expected, new] for cas, value read on ok
    node     any     the node the client talked to
    error    str     why a fail or info happened (optional)

Pairing follows Knossos: a ``fail`` did not happen and is dropped; an
``info`` (or an invoke never completed) may or may not have happened and
becomes an operation without a return; nemesis rows are ignored.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from .linearizability import INF, UNKNOWN, Operation


class HistoryError(ValueError):
    """A history row that breaks the format; the message names the row and field."""


def register_operations(rows: Iterable[dict]) -> dict[str, list[Operation]]:
    """Per key, the register operations of a chaoskraft history."""
    pending: dict = {}
    by_key: dict[str, list[Operation]] = defaultdict(list)
    for row in rows:
        if row.get("process") == "nemesis":
            continue
        for fld in ("process", "type", "f", "time"):
            if fld not in row:
                raise HistoryError(f"history row {row.get('index', '?')}: missing field {fld!r}")
        proc, typ = row["process"], row["type"]
        if typ == "invoke":
            if proc in pending:
                raise HistoryError(f"history row {row.get('index')}: process {proc} invoked "
                                   f"while its previous operation is still open")
            pending[proc] = row
            continue
        if typ not in ("ok", "fail", "info"):
            raise HistoryError(f"history row {row.get('index')}: unknown type {typ!r}")
        inv = pending.pop(proc, None)
        if inv is None:
            raise HistoryError(f"history row {row.get('index')}: {typ} without an invoke "
                               f"for process {proc}")
        op = _to_op(inv, row)
        if op is not None:
            by_key[inv.get("key")].append(op)
    for proc, inv in pending.items():
        op = _to_op(inv, {"type": "info", "time": INF, "value": inv.get("value")})
        if op is not None:
            by_key[inv.get("key")].append(op)
    return dict(by_key)


def _to_op(inv: dict, done: dict) -> Operation | None:
    f = inv["f"]
    typ = done["type"]
    if typ == "fail":
        return None
    if f == "read":
        if typ == "info":
            return None  # a read without an answer constrains nothing
        return Operation(inv["process"], ("read", None), done.get("value"), inv["time"],
                         done["time"], inv.get("index", -1))
    if f == "write":
        inp = ("write", inv.get("value"))
    elif f == "cas":
        value = inv.get("value")
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise HistoryError(f"history row {inv.get('index')}: cas value must be "
                               f"[expected, new], got {value!r}")
        inp = ("cas", (value[0], value[1]))
    else:
        raise HistoryError(f"history row {inv.get('index')}: unknown register op {f!r}")
    if typ == "info":
        return Operation(inv["process"], inp, UNKNOWN, inv["time"], INF, inv.get("index", -1))
    return Operation(inv["process"], inp, None, inv["time"], done["time"], inv.get("index", -1))
