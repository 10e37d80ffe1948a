"""History files: chaoskraft's own rows, Jepsen EDN, Jepsen text logs; pairing into operations.

A history row (JSON lines on disk, Parquet for Spark; see docs/history.md)
is one invoke or one completion:

    index    int     position in the history
    time     int     monotonic time (ns for real runs, ms in simulation,
                     the line number for files without times)
    process  int|str the client process ("nemesis" for faults)
    type     str     invoke | ok | fail | info
    f        str     read | write | cas | get | put | append | fault names
    key      str     the key (register, kv) or partition (queue); may be null
    value    any     write value, [expected, new] for cas, value read on ok
    node     any     the node the client talked to
    error    str     why a fail or info happened (optional)

Pairing follows Knossos: a process has at most one open operation; an
``ok``, ``fail`` or ``info`` row completes it. Nemesis rows are skipped.
What a ``fail`` or ``info`` means is the model's business (checkers.models).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator


class HistoryError(ValueError):
    """A history that breaks the format; the message names the file, row and field."""


REQUIRED = ("process", "type", "f")
TYPES = ("invoke", "ok", "fail", "info")


def pair(rows: Iterable[dict]) -> Iterator[tuple[dict, dict | None]]:
    """(invoke, completion) per client operation, in completion order; open ones last with None."""
    pending: dict = {}
    for row in rows:
        if row.get("process") == "nemesis":
            continue
        for fld in REQUIRED:
            if row.get(fld) is None:
                raise HistoryError(f"history row {row.get('index', '?')}: missing field {fld!r}")
        proc, typ = row["process"], row["type"]
        if typ not in TYPES:
            raise HistoryError(f"history row {row.get('index')}: unknown type {typ!r}")
        if typ == "invoke":
            if proc in pending:
                raise HistoryError(f"history row {row.get('index')}: process {proc} invoked "
                                   f"while its operation at row {pending[proc].get('index')} is open")
            pending[proc] = row
            continue
        inv = pending.pop(proc, None)
        if inv is None:
            raise HistoryError(f"history row {row.get('index')}: {typ} without an invoke "
                               f"for process {proc}")
        yield inv, row
    for inv in pending.values():
        yield inv, None


# ----------------------------------------------------------------- readers

_TEXT_LINE = re.compile(r"^\S+\s+jepsen\.util\s+-\s+(\S+)\s+:(\w+)\s+:([\w-]+)\s*(.*)$")


def _edn_value(v):
    import edn_format
    if isinstance(v, edn_format.Keyword):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_edn_value(x) for x in v]
    if isinstance(v, edn_format.immutable_dict.ImmutableDict) or isinstance(v, dict):
        return {(_edn_value(k)): _edn_value(x) for k, x in v.items()}
    return v


def _edn_row(d: dict, index: int, where: str) -> dict:
    row = {k: _edn_value(v) for k, v in _edn_value(d).items()}
    row["index"] = row.get("index", index)
    row.setdefault("time", index)
    for fld in REQUIRED:
        if fld not in row:
            raise HistoryError(f"{where}: operation {index} has no :{fld}")
    return row


def read_edn(path: Path) -> list[dict]:
    import edn_format
    text = path.read_text()
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            items = edn_format.loads(stripped)
            return [_edn_row(d, i, f"{path}") for i, d in enumerate(items)]
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                rows.append(_edn_row(edn_format.loads(line), len(rows), f"{path}:{lineno}"))
        return rows
    except edn_format.EDNDecodeError as exc:
        raise HistoryError(f"{path}: not valid EDN: {exc}") from None


def _text_value(s: str):
    s = s.strip()
    if s in ("", "nil"):
        return None
    if s.startswith("[") and s.endswith("]"):
        return [_text_value(x) for x in s[1:-1].split()]
    if s.startswith(":"):
        return s[1:]
    try:
        return int(s)
    except ValueError:
        return s


def read_jepsen_log(path: Path) -> list[dict]:
    """Jepsen's text log (``INFO jepsen.util - 3 :invoke :read nil``); time is the line order."""
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        m = _TEXT_LINE.match(line.strip())
        if m is None:
            continue
        proc, typ, f, rest = m.groups()
        value = _text_value(rest)
        row = {"index": len(rows), "time": lineno, "process": int(proc) if proc.isdigit() else proc,
               "type": typ, "f": f, "key": None, "value": value}
        if typ in ("fail", "info") and isinstance(value, str):
            row["error"], row["value"] = value, None
        rows.append(row)
    return rows


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise HistoryError(f"{path}:{lineno}: not JSON: {exc}") from None
    return rows


def read_history(path: str | Path) -> list[dict]:
    """Rows of any supported history file, detected from its name and first line."""
    path = Path(path)
    if not path.exists():
        raise HistoryError(f"{path}: no such file")
    if path.suffix == ".parquet" or path.is_dir():
        import pandas as pd
        df = pd.read_parquet(path)
        return [decode_parquet_row(r) for r in df.to_dict("records")]
    with open(path, errors="replace") as f:
        head = ""
        for line in f:
            if line.strip():
                head = line.strip()
                break
    if not head:
        return []
    if "jepsen.util" in head:
        return read_jepsen_log(path)
    if head.startswith("{:") or head.startswith("["):
        return read_edn(path)
    if head.startswith("{"):
        return read_jsonl(path)
    raise HistoryError(f"{path}: not a chaoskraft, Jepsen EDN or Jepsen log history "
                       f"(first line {head[:60]!r})")


def decode_parquet_row(r: dict) -> dict:
    """Parquet stores value as JSON text (it varies in type); decode it back."""
    row = dict(r)
    v = row.get("value")
    if isinstance(v, str):
        row["value"] = json.loads(v)
    p = row.get("process")
    if isinstance(p, str) and p.lstrip("-").isdigit():
        row["process"] = int(p)
    for k, x in list(row.items()):
        if x is not None and not isinstance(x, (str, int, float, list, dict, bool)):
            try:
                row[k] = x.item()  # numpy scalar
            except AttributeError:
                pass
        if isinstance(x, float) and x != x:  # NaN from pandas for a missing value
            row[k] = None
    return row
