"""The typed queue history: one Parquet schema that the queue checker reads without parsing.

Columns (one row per invoke or completion, as ``history.jsonl``):

    index    int64    position in the history
    time     int64    monotonic time (ns)
    process  int32    the client process; null for the nemesis
    type     string   invoke | ok | fail | info
    f        string   send | poll | final-poll | assign | a fault's name
    key      int32    the partition a send went to (``k3`` is 3); null otherwise
    value    int64    the value sent; null otherwise
    offset   int64    the offset an ok send got; null otherwise
    reads    list<struct<key int32, offsets list<int64>, values list<int64>>>
                      what an ok poll read: one entry per partition, its
                      messages in read order; null otherwise
    extra    string   JSON of anything else (a fault's value, an assign's keys,
                      the node, the error)
    mop      int16    a transaction's micro-operation: its position in the
                      transaction; null for an operation that is not one
    invoke   int64    on a completion, the index of its invocation (the
                      realtime order of operations); null when unknown

A transaction (Jepsen's ``{:f :txn :value [[:send k v] [:poll] ...]}``, or
any operation whose value is such a list) becomes one row per
micro-operation on its completion, each with the operation's index, type
and process, ``f`` send or poll, and its position in ``mop``; its
invocation stays one row.

Keys are written as int32 ids, in the order the history first names them;
the names themselves (``k3`` in chaoskraft's runs, integers or any string in
others) are in the file's metadata (``chaoskraft.keys``, a JSON list), so
reports name keys as the history did. Values are int64: an integer value is
itself; any other (Jepsen's keywords ``:a``, strings, floats) gets an id
counted down from ``VALUE_BASE`` (-2**62), its written form kept in the
metadata (``chaoskraft.values``), so the checkers compare values as integers
and reports show them as the history wrote them. The older ``history.parquet`` (value
as JSON text) converts to this schema in bounded memory, one row group at a
time (``convert``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ..history import HistoryError

READS = pa.list_(pa.struct([("key", pa.int32()), ("offsets", pa.list_(pa.int64())),
                            ("values", pa.list_(pa.int64()))]))
SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.int32()),
    ("type", pa.string()), ("f", pa.string()), ("key", pa.int32()), ("value", pa.int64()),
    ("offset", pa.int64()), ("reads", READS), ("extra", pa.string()), ("mop", pa.int16()),
    ("invoke", pa.int64()),
])
# Typed files written before transactions were grouped lack the last two columns.
OLD_NAMES = SCHEMA.names[:-2]
KEYS = b"chaoskraft.keys"
VALUES = b"chaoskraft.values"
# Ids of values that are not integers: VALUE_BASE, VALUE_BASE - 1, ... An integer value in
# the range they may take is refused (no history seen holds one).
VALUE_BASE = -(2**62)
VALUE_SPAN = 2**40
ROWS_PER_GROUP = 1_000_000


def written(v) -> str:
    """A value that is not an integer as the history wrote it: ``:a`` for an EDN keyword,
    the text of a string, JSON for anything else."""
    from ..edn import Keyword
    if isinstance(v, Keyword):
        return repr(v)
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


class ValueNames:
    """Message values -> int64: integers are themselves, any other value an id from
    VALUE_BASE down, in the order first seen (``names``: their written forms)."""

    def __init__(self, names: list | None = None) -> None:
        self.names: list = list(names or [])
        self.ids: dict = {n: VALUE_BASE - i for i, n in enumerate(self.names)}

    def encode(self, v, where: str, field: str):
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63:
            if VALUE_BASE - VALUE_SPAN < v <= VALUE_BASE:
                raise HistoryError(f"{where}: {field} {v} is in the range chaoskraft gives "
                                   f"values that are not integers ({VALUE_BASE} and below)")
            return v
        w = written(v)
        i = self.ids.get(w)
        if i is None:
            if len(self.names) >= VALUE_SPAN:
                raise HistoryError(f"{where}: more than 2**40 values that are not integers")
            i = self.ids[w] = VALUE_BASE - len(self.names)
            self.names.append(w)
        return i

    def name(self, i):
        """The value as the history wrote it: an integer, or the written form of another."""
        if i is not None and VALUE_BASE - len(self.names) < i <= VALUE_BASE:
            return self.names[VALUE_BASE - i]
        return i

    def named(self, x):
        """``x`` (an anomaly's example: dicts, lists, integers) with every value id in it
        replaced by its written form; ``x`` itself when the file has only integers."""
        if not self.names:
            return x
        if isinstance(x, dict):
            return {k: self.named(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [self.named(v) for v in x]
        if isinstance(x, int) and not isinstance(x, bool):
            return self.name(x)
        return x


class KeyNames:
    """Key name <-> int32 id, ids in the order names are first seen; ``values``: the file's
    values that are not integers (``ValueNames``)."""

    def __init__(self, names: list | None = None, values: list | None = None) -> None:
        self.names: list = list(names or [])
        self.ids: dict = {n: i for i, n in enumerate(self.names)}
        self.values = ValueNames(values)

    def encode(self, key, where: str) -> int:
        i = self.ids.get(key) if isinstance(key, (str, int)) else None
        if i is None:
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise HistoryError(f"{where}: queue key {key!r} must be a string or an integer")
            if len(self.names) >= 2**31 - 1:
                raise HistoryError(f"{where}: more than 2**31 - 1 keys")
            i = self.ids[key] = len(self.names)
            self.names.append(key)
        return i

    def name(self, i: int):
        return self.names[i]


def _int(v, where: str, field: str):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise HistoryError(f"{where}: {field} must be an integer, got {v!r}")
    return v


def _where(r: dict, i: int) -> str:
    return r.get("_src") or f"history row {r.get('index', i)}"


MOPS = ("send", "poll")


def _mops(v, where: str, typ) -> list | None:
    """A Jepsen-style value (a list of micro-operations, ``[["send", k, v] | ["poll", ...]]``)
    as (f, key, value, offset, reads) tuples; None for any other value."""
    if not (isinstance(v, list) and v and all(isinstance(m, list) and m and m[0] in MOPS
                                              for m in v)):
        return None
    out = []
    for j, m in enumerate(v):
        if m[0] == "send":
            if len(m) != 3:
                raise HistoryError(f"{where}: micro-operation {j} must be [send key value], "
                                   f"got {m!r:.80}")
            x, off = m[2], None
            if isinstance(x, list):  # completed: [offset value], offset nil when unknown
                if len(x) != 2:
                    raise HistoryError(f"{where}: micro-operation {j}: a completed send's "
                                       f"value must be [offset value], got {x!r:.80}")
                off, x = x
            out.append(("send", m[1], x, off, None))
        else:
            if len(m) > 2 or (len(m) == 2 and m[1] is not None and not isinstance(m[1], dict)):
                raise HistoryError(f"{where}: micro-operation {j} must be [poll] or "
                                   f"[poll {{key [[offset value] ...]}}], got {m!r:.80}")
            out.append(("poll", None, None, None, m[1] if len(m) == 2 and typ != "invoke"
                        else None))
    return out


def _reads(v: dict, where: str, f: str, keys: KeyNames) -> list:
    reads = []
    for k, msgs in v.items():
        if not isinstance(msgs, list) or any(
                not isinstance(m, (list, tuple)) or len(m) != 2 for m in msgs):
            raise HistoryError(f"{where}: {f} of key {k!r}: messages must be "
                               f"[[offset, value], ...], got {msgs!r:.80}")
        reads.append({"key": keys.encode(k, where),
                      "offsets": [_int(m[0], where, f"{k} offset") for m in msgs],
                      "values": [keys.values.encode(m[1], where, f"{k} value") for m in msgs]})
    return reads


def typed_rows(r: dict, i: int, keys: KeyNames, invokes: dict | None = None) -> list[dict]:
    """One history row (as ``checkers.history`` reads it) -> its rows of SCHEMA: one, or one
    per micro-operation of a transaction (Jepsen's ``[[send k v] [poll {...}] ...]`` values,
    under any ``f``), each with the operation's index and its position in ``mop``.

    ``invokes``: process -> index of its open invocation, kept across calls, so completions
    carry the index of their invocation (``invoke``: the realtime order of operations)."""
    where = _where(r, i)
    proc = r.get("process")
    f, typ, v = r.get("f"), r.get("type"), r.get("value")
    out = {"index": _int(r.get("index", i), where, "index"), "time": None, "process": None,
           "type": typ, "f": None if f is None else str(f), "key": None, "value": None,
           "offset": None, "reads": None, "extra": None, "mop": None, "invoke": None}
    t = r.get("time")
    out["time"] = int(t) if isinstance(t, (int, float)) and t == t and abs(t) != float("inf") \
        else None
    extra = {k: r[k] for k in ("node", "error", "rebalance-log") if r.get(k) is not None}
    if proc == "nemesis" or proc is None:
        extra["value"] = v
        if extra:
            out["extra"] = json.dumps(extra, default=str)
        return [out]
    out["process"] = _int(int(proc) if isinstance(proc, str) and proc.lstrip("-").isdigit()
                          else proc, where, "process")
    if invokes is not None:
        if typ == "invoke":
            invokes[out["process"]] = out["index"]
        else:
            out["invoke"] = invokes.pop(out["process"], None)
    mops = _mops(v, where, typ) if f not in ("assign", "subscribe") else None
    if mops is not None:
        if extra:
            out["extra"] = json.dumps(extra, default=str)
        if typ == "invoke":  # one row: what the transaction will do is in history.jsonl
            return [out]
        rows = []
        for j, (mf, k, x, off, reads) in enumerate(mops):
            row = {**out, "f": mf, "mop": j}
            if mf == "send":
                row["key"] = keys.encode(k, where)
                row["value"] = keys.values.encode(x, where, f"micro-operation {j} value")
                row["offset"] = _int(off, where, f"micro-operation {j} offset")
            elif reads is not None:
                row["reads"] = _reads(reads, where, f"micro-operation {j} poll", keys)
            rows.append(row)
        return rows
    if f == "send":
        if r.get("key") is not None:
            out["key"] = keys.encode(r["key"], where)
        if isinstance(v, dict):
            out["value"] = keys.values.encode(v.get("value"), where, "value.value")
            out["offset"] = _int(v.get("offset"), where, "value.offset")
        elif v is not None:
            raise HistoryError(f"{where}: a send's value must be "
                               f"{{\"value\": v, \"offset\": o}}, got {v!r:.80}")
    elif f in ("poll", "final-poll") and typ == "ok":
        if not isinstance(v, dict):
            raise HistoryError(f"{where}: an ok {f}'s value must map keys to "
                               f"[[offset, value], ...], got {v!r:.80}")
        out["reads"] = _reads(v, where, f, keys)
    elif v is not None:
        extra["value"] = v
    if extra:
        out["extra"] = json.dumps(extra, default=str)
    return [out]


def untyped_row(r: dict, keys: KeyNames) -> dict:
    """One row of SCHEMA -> the history row it came from (``typed_rows`` undone); the rows
    of a transaction's micro-operations -> ``untyped_op``."""
    out = {"index": r["index"], "time": r["time"], "type": r["type"], "f": r["f"],
           "process": "nemesis" if r["process"] is None else r["process"],
           "key": None if r["key"] is None else keys.name(r["key"]), "value": None}
    if r["value"] is not None:
        out["value"] = {"value": keys.values.name(r["value"])}
        if r["offset"] is not None:
            out["value"]["offset"] = r["offset"]
    if r["reads"] is not None:
        out["value"] = {keys.name(e["key"]): [[o, keys.values.name(v)]
                                              for o, v in zip(e["offsets"], e["values"])]
                        for e in r["reads"]}
    if r["extra"]:
        out.update(json.loads(r["extra"]))
    return out


def untyped_op(rows: list[dict], keys: KeyNames) -> dict:
    """The typed rows of one operation -> its history row: a transaction (rows with ``mop``)
    as ``f: txn`` with its micro-operations, as Jepsen writes them."""
    if len(rows) == 1 and rows[0].get("mop") is None:
        return untyped_row(rows[0], keys)
    rows = sorted(rows, key=lambda r: r["mop"])
    mops = []
    for r in rows:
        if r["f"] == "send":
            mops.append(["send", keys.name(r["key"]), [r["offset"], keys.values.name(r["value"])]])
        else:
            mops.append(["poll", {keys.name(e["key"]): [[o, keys.values.name(v)] for o, v in
                                                        zip(e["offsets"], e["values"])]
                                  for e in r["reads"] or []}])
    out = untyped_row({**rows[0], "value": None, "offset": None, "reads": None, "key": None},
                      keys)
    out["f"], out["value"] = "txn", mops
    return out


class Writer:
    """The typed file written a chunk of rows at a time, aside, and renamed on ``close``;
    ``abort`` removes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.keys = KeyNames()
        self.invokes: dict = {}
        self.n = 0
        self.writer = pq.ParquetWriter(str(self.tmp), SCHEMA)

    def write(self, chunk: list[dict]) -> None:
        typed = [t for i, r in enumerate(chunk)
                 for t in typed_rows(r, self.n + i, self.keys, self.invokes)]
        self.n += len(chunk)
        if typed:
            self.writer.write_table(pa.Table.from_pylist(typed, schema=SCHEMA))

    def close(self) -> None:
        if not self.n:
            self.writer.write_table(pa.Table.from_pylist([], schema=SCHEMA))
        self.writer.add_key_value_metadata({KEYS: json.dumps(self.keys.names).encode(),
                                            VALUES: json.dumps(self.keys.values.names).encode()})
        self.writer.close()
        self.tmp.replace(self.path)

    def abort(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def write(rows: Iterable[dict], path: str | Path, rows_per_group: int = ROWS_PER_GROUP) -> None:
    """Rows -> the typed file, one row group at a time (written aside, then renamed)."""
    from ..parquet import write_chunks
    write_chunks(rows, Writer(path), rows_per_group)


def is_typed(path: str | Path) -> bool:
    return pq.read_schema(str(path)).names in (SCHEMA.names, OLD_NAMES)


def read_table(path: str | Path, columns: list[str] | None = None, **kw) -> pa.Table:
    """A typed file's columns; ``mop`` and ``invoke`` as nulls in a file written before them."""
    have = pq.read_schema(str(path)).names
    cols = columns or SCHEMA.names
    t = pq.read_table(str(path), columns=[c for c in cols if c in have], **kw)
    for c in cols:
        if c not in have:
            t = t.append_column(SCHEMA.field(c), pa.nulls(t.num_rows, SCHEMA.field(c).type))
    return t.select(cols)


def convert(src: str | Path, dst: str | Path) -> None:
    """An older ``history.parquet`` (value as JSON text) -> the typed file, in bounded memory."""
    from ..history import decode_parquet_row

    def rows() -> Iterator[dict]:
        for batch in pq.ParquetFile(str(src)).iter_batches(batch_size=65536):
            for r in batch.to_pylist():
                yield decode_parquet_row(r)
    return write(rows(), dst)


def key_names(path: str | Path) -> KeyNames:
    """The file's key names, and its value names (``.values``)."""
    meta = pq.ParquetFile(str(path)).metadata.metadata or {}
    return KeyNames(json.loads(meta[KEYS]) if KEYS in meta else None,
                    json.loads(meta[VALUES]) if VALUES in meta else None)


def typed_path(path: str | Path, workdir: str | Path | None = None) -> Path:
    """``path`` itself if it is typed, else its conversion beside it (or in ``workdir``)."""
    path = Path(path)
    if is_typed(path):
        return path
    dst = Path(workdir or path.parent) / (path.stem + ".queue.parquet")
    if not dst.exists() or dst.stat().st_mtime < path.stat().st_mtime:
        convert(path, dst)
    return dst
