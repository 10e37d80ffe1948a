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

Keys are written as int32 ids, in the order the history first names them;
the names themselves (``k3`` in chaoskraft's runs, integers or any string in
others) are in the file's metadata (``chaoskraft.keys``, a JSON list), so
reports name keys as the history did. The older ``history.parquet`` (value
as JSON text) converts to this schema in bounded memory, one row group at a
time (``convert``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .history import HistoryError

READS = pa.list_(pa.struct([("key", pa.int32()), ("offsets", pa.list_(pa.int64())),
                            ("values", pa.list_(pa.int64()))]))
SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.int32()),
    ("type", pa.string()), ("f", pa.string()), ("key", pa.int32()), ("value", pa.int64()),
    ("offset", pa.int64()), ("reads", READS), ("extra", pa.string()),
])
KEYS = b"chaoskraft.keys"
ROWS_PER_GROUP = 1_000_000


class KeyNames:
    """Key name <-> int32 id, ids in the order names are first seen."""

    def __init__(self, names: list | None = None) -> None:
        self.names: list = list(names or [])
        self.ids: dict = {n: i for i, n in enumerate(self.names)}

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


def typed_row(r: dict, i: int, keys: KeyNames) -> dict:
    """One history row (as ``checkers.history`` reads it) -> one row of SCHEMA."""
    where = _where(r, i)
    proc = r.get("process")
    f, typ, v = r.get("f"), r.get("type"), r.get("value")
    out = {"index": _int(r.get("index", i), where, "index"), "time": None, "process": None,
           "type": typ, "f": None if f is None else str(f), "key": None, "value": None,
           "offset": None, "reads": None, "extra": None}
    t = r.get("time")
    out["time"] = int(t) if isinstance(t, (int, float)) and t == t and abs(t) != float("inf") \
        else None
    extra = {k: r[k] for k in ("node", "error") if r.get(k) is not None}
    if proc == "nemesis" or proc is None:
        extra["value"] = v
    else:
        out["process"] = _int(int(proc) if isinstance(proc, str) and proc.lstrip("-").isdigit()
                              else proc, where, "process")
        if f == "send":
            if r.get("key") is not None:
                out["key"] = keys.encode(r["key"], where)
            if isinstance(v, dict):
                out["value"] = _int(v.get("value"), where, "value.value")
                out["offset"] = _int(v.get("offset"), where, "value.offset")
            elif v is not None:
                raise HistoryError(f"{where}: a send's value must be "
                                   f"{{\"value\": v, \"offset\": o}}, got {v!r:.80}")
        elif f in ("poll", "final-poll") and typ == "ok":
            if not isinstance(v, dict):
                raise HistoryError(f"{where}: an ok {f}'s value must map keys to "
                                   f"[[offset, value], ...], got {v!r:.80}")
            reads = []
            for k, msgs in v.items():
                if not isinstance(msgs, list) or any(
                        not isinstance(m, (list, tuple)) or len(m) != 2 for m in msgs):
                    raise HistoryError(f"{where}: {f} of key {k!r}: messages must be "
                                       f"[[offset, value], ...], got {msgs!r:.80}")
                reads.append({"key": keys.encode(k, where),
                              "offsets": [_int(m[0], where, f"{k} offset") for m in msgs],
                              "values": [_int(m[1], where, f"{k} value") for m in msgs]})
            out["reads"] = reads
        elif v is not None:
            extra["value"] = v
    if extra:
        out["extra"] = json.dumps(extra, default=str)
    return out


def untyped_row(r: dict, keys: KeyNames) -> dict:
    """One row of SCHEMA -> the history row it came from (``typed_row`` undone)."""
    out = {"index": r["index"], "time": r["time"], "type": r["type"], "f": r["f"],
           "process": "nemesis" if r["process"] is None else r["process"],
           "key": None if r["key"] is None else keys.name(r["key"]), "value": None}
    if r["value"] is not None:
        out["value"] = {"value": r["value"]}
        if r["offset"] is not None:
            out["value"]["offset"] = r["offset"]
    if r["reads"] is not None:
        out["value"] = {keys.name(e["key"]): [[o, v] for o, v in zip(e["offsets"], e["values"])]
                        for e in r["reads"]}
    if r["extra"]:
        out.update(json.loads(r["extra"]))
    return out


class Writer:
    """The typed file written a chunk of rows at a time, aside, and renamed on ``close``;
    ``abort`` removes it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.keys = KeyNames()
        self.n = 0
        self.writer = pq.ParquetWriter(str(self.tmp), SCHEMA)

    def write(self, chunk: list[dict]) -> None:
        typed = [typed_row(r, self.n + i, self.keys) for i, r in enumerate(chunk)]
        self.n += len(chunk)
        if typed:
            self.writer.write_table(pa.Table.from_pylist(typed, schema=SCHEMA))

    def close(self) -> None:
        if not self.n:
            self.writer.write_table(pa.Table.from_pylist([], schema=SCHEMA))
        self.writer.add_key_value_metadata({KEYS: json.dumps(self.keys.names).encode()})
        self.writer.close()
        self.tmp.replace(self.path)

    def abort(self) -> None:
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def write(rows: Iterable[dict], path: str | Path, rows_per_group: int = ROWS_PER_GROUP) -> None:
    """Rows -> the typed file, one row group at a time (written aside, then renamed)."""
    from .parquet import write_chunks
    write_chunks(rows, Writer(path), rows_per_group)


def is_typed(path: str | Path) -> bool:
    return pq.read_schema(str(path)).names == SCHEMA.names


def convert(src: str | Path, dst: str | Path) -> None:
    """An older ``history.parquet`` (value as JSON text) -> the typed file, in bounded memory."""
    from .history import decode_parquet_row

    def rows() -> Iterator[dict]:
        for batch in pq.ParquetFile(str(src)).iter_batches(batch_size=65536):
            for r in batch.to_pylist():
                yield decode_parquet_row(r)
    return write(rows(), dst)


def key_names(path: str | Path) -> KeyNames:
    meta = pq.ParquetFile(str(path)).metadata.metadata or {}
    return KeyNames(json.loads(meta[KEYS]) if KEYS in meta else None)


def typed_path(path: str | Path, workdir: str | Path | None = None) -> Path:
    """``path`` itself if it is typed, else its conversion beside it (or in ``workdir``)."""
    path = Path(path)
    if is_typed(path):
        return path
    dst = Path(workdir or path.parent) / (path.stem + ".queue.parquet")
    if not dst.exists() or dst.stat().st_mtime < path.stat().st_mtime:
        convert(path, dst)
    return dst
