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
    """(invoke, completion) per client operation, in completion order; open ones last with None.

    As Knossos pairs: an ``info`` with no open invoke is a lone info (a crash
    report) and is skipped; an ``ok`` or ``fail`` with none is an error.
    """
    pending: dict = {}
    get = dict.get
    for row in rows:
        proc, typ = get(row, "process"), get(row, "type")
        if proc == "nemesis":
            continue
        if typ == "invoke":
            if proc in pending:
                raise HistoryError(f"{_where(row)}: process {proc} invoked while its operation "
                                   f"at {_where(pending[proc])} is open")
            if proc is None or get(row, "f") is None:
                _missing(row)
            pending[proc] = row
            continue
        if proc is None or typ is None or get(row, "f") is None:
            _missing(row)
        if typ not in TYPES:
            raise HistoryError(f"{_where(row)}: unknown type {typ!r} (one of {', '.join(TYPES)})")
        inv = pending.pop(proc, None)
        if inv is None:
            if typ == "info":
                continue
            raise HistoryError(f"{_where(row)}: {typ} without an invoke for process {proc}")
        yield inv, row
    for inv in pending.values():
        yield inv, None


def _missing(row: dict):
    for fld in REQUIRED:
        if row.get(fld) is None:
            raise HistoryError(f"{_where(row)}: missing field {fld!r}")


def _where(row: dict) -> str:
    src = row.get("_src")
    return src if src else f"history row {row.get('index', '?')}"


# ----------------------------------------------------------------- readers

# Jepsen's text history: an optional log prefix ("INFO  jepsen.util - "), then
# process, :type, :f and the value, separated by tabs or spaces.
_TEXT_LINE = re.compile(r"^(?:.*?jepsen\.util\s+-\s+)?(\S+)\s+:(invoke|ok|fail|info)\s+"
                        r":?([^\s]+)\s*(.*)$")


def _op_row(form, position: int, where: str) -> dict:
    """One EDN operation (a map, a record or a Knossos tuple) -> a history row."""
    from .edn import IndependentTuple
    if isinstance(form, list) and len(form) == 4:
        form = {"process": form[0], "type": form[1], "f": form[2], "value": form[3]}
    if not isinstance(form, dict):
        raise HistoryError(f"{where}: an operation must be a map or [process type f value], "
                           f"got {form!r:.80}")
    row = {}
    for k, v in form.items():
        if not isinstance(k, str):
            raise HistoryError(f"{where}: operation key {k!r} is not a keyword")
        row[k] = v
    for fld in REQUIRED:
        if row.get(fld) is None:
            raise HistoryError(f"{where}: operation has no :{fld}")
    if row["type"] not in TYPES:
        raise HistoryError(f"{where}: :type {row['type']!r} is not one of "
                           f":{', :'.join(TYPES)}")
    v = row.get("value")
    if isinstance(v, IndependentTuple):
        row["key"], row["value"] = v.key, v.value
    row.setdefault("index", position)
    if row.get("time") is None:
        row["time"] = row["index"]
    row["_src"] = where
    return row


def iter_edn(path: Path) -> Iterator[dict]:
    """Rows of an EDN history: any shape ``checkers.edn`` reads."""
    from .edn import EDNError, forms
    try:
        for i, (form, line) in enumerate(forms(path)):
            yield _op_row(form, i, f"{path}:{line}")
    except EDNError as exc:
        raise HistoryError(str(exc)) from None


def _text_value(s: str):
    s = s.strip()
    if not s:
        return None
    from .edn import EDNError, loads
    try:
        return loads(s)
    except EDNError:
        return s


def iter_jepsen_log(path: Path) -> Iterator[dict]:
    """Jepsen's text history (``INFO jepsen.util - 3 :invoke :read nil``); time is the line order.

    A ``fail`` or ``info`` whose value is a bare keyword (``:timed-out``)
    carries the error in place of a value.
    """
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = _TEXT_LINE.match(line.strip())
            if m is None:
                continue
            proc, typ, fn, rest = m.groups()
            parts = rest.split("\t") if "\t" in rest else [rest]
            value = _text_value(parts[0])
            row = {"index": n, "time": lineno,
                   "process": int(proc) if proc.lstrip("-").isdigit() else proc.lstrip(":"),
                   "type": typ, "f": fn.lstrip(":"), "key": None, "value": value,
                   "_src": f"{path}:{lineno}"}
            if len(parts) > 1 and parts[1].strip():
                row["error"] = str(_text_value(parts[1]))
            elif typ in ("fail", "info") and isinstance(value, str) and parts[0].strip().startswith(":"):
                row["error"], row["value"] = value, None
            n += 1
            yield row


def iter_jsonl(path: Path) -> Iterator[dict]:
    """Rows of a JSON-lines history. A last line that is not JSON and has no newline was cut
    short as it was written (the machine lost power, the disk filled): it is left out, with a
    warning on stderr. Anything else that is not JSON is an error naming the line."""
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):  # only the file's last line can lack one
                    import sys
                    print(f"{path}:{lineno}: the last line is cut short (written when the "
                          f"harness stopped); left out", file=sys.stderr)
                    return
                raise HistoryError(f"{path}:{lineno}: not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise HistoryError(f"{path}:{lineno}: a history row must be a JSON object")
            yield row


def _sniff(path: Path) -> str:
    """The first significant text of a file: skips blank lines and ``;`` comments."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            s = line.strip()
            if s and not s.startswith(";"):
                return s
    return ""


def iter_history(path: str | Path) -> Iterator[dict]:
    """Rows of any supported history file, detected from its name and first form."""
    path = Path(path)
    if not path.exists():
        raise HistoryError(f"{path}: no such file")
    if path.suffix == ".parquet" or path.is_dir():
        import pyarrow.parquet as pq
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65536):
            for r in batch.to_pylist():
                yield decode_parquet_row(r)
        return
    head = _sniff(path)
    if not head:
        return
    if "jepsen.util" in head or re.match(r"^:?[\w-]+\s+:(invoke|ok|fail|info)\s", head):
        yield from iter_jepsen_log(path)
    elif head.startswith(("{:", "[", "(", "#")):
        yield from iter_edn(path)
    elif head.startswith("{"):
        yield from iter_jsonl(path)
    else:
        raise HistoryError(f"{path}:1: not a chaoskraft (JSON lines), Jepsen EDN or Jepsen text "
                           f"history (it begins {head[:60]!r})")


def read_history(path: str | Path) -> list[dict]:
    """Every row of a history file (see ``iter_history``)."""
    return list(iter_history(path))


def split_independent(rows: list[dict], independent: bool | None = None) -> list[dict]:
    """Jepsen's ``jepsen.independent`` histories hold ``[key value]`` as each value.

    ``independent=None`` detects them: every read invocation's value is a
    two-element vector (a plain register read invokes with nil). Rows of the
    nemesis are left alone.
    """
    if independent is None:
        reads = [r for r in rows if r.get("f") == "read" and r.get("type") == "invoke"
                 and r.get("process") != "nemesis"]
        independent = bool(reads) and all(isinstance(r.get("value"), list)
                                          and len(r["value"]) == 2 for r in reads)
    if not independent:
        return rows
    out = []
    for r in rows:
        v = r.get("value")
        if r.get("process") != "nemesis" and isinstance(v, list) and len(v) == 2 \
                and r.get("key") is None:
            r = {**r, "key": v[0], "value": v[1]}
        out.append(r)
    return out


def decode_parquet_row(r: dict) -> dict:
    """Parquet stores value as JSON text (it varies in type); decode it back."""
    row = dict(r)
    row.pop("_src", None)
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
