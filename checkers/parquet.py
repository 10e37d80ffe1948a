"""History rows to Parquet and back.

Columns: index int64, time int64, process string, type string, f string,
key string (null), value string (JSON text: its type varies by operation),
node string (null), error string (null). ``process`` is written as text so
that the nemesis and numbered clients share a column; reading turns numeric
processes back into integers.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.string()),
    ("type", pa.string()), ("f", pa.string()), ("key", pa.string()),
    ("value", pa.string()), ("node", pa.string()), ("error", pa.string()),
])


def _text(v):
    return None if v is None else str(v)


def to_columns(rows: Iterable[dict]) -> dict[str, list]:
    cols = {name: [] for name in SCHEMA.names}
    for i, r in enumerate(rows):
        t = r.get("time", i)
        cols["index"].append(int(r.get("index", i)))
        cols["time"].append(int(t) if t == t and t not in (float("inf"),) else None)
        cols["process"].append(_text(r.get("process")))
        cols["type"].append(r.get("type"))
        cols["f"].append(_text(r.get("f")))
        cols["key"].append(_text(r.get("key")))
        cols["value"].append(json.dumps(r.get("value")))
        cols["node"].append(_text(r.get("node")))
        cols["error"].append(_text(r.get("error")))
    return cols


class HistoryWriter:
    """history.parquet written a chunk of rows at a time (``write``), so a history larger than
    memory is never held whole."""

    def __init__(self, path: str | Path) -> None:
        self.writer = pq.ParquetWriter(str(path), SCHEMA)
        self.rows = 0

    def write(self, chunk: list[dict]) -> None:
        if chunk:
            self.writer.write_table(pa.table(to_columns(chunk), schema=SCHEMA))
        self.rows += len(chunk)

    def close(self) -> None:
        if not self.rows:
            self.writer.write_table(pa.table(to_columns([]), schema=SCHEMA))
        self.writer.close()

    abort = close  # what was written stays readable


def write_chunks(rows: Iterable[dict], writer, rows_per_group: int) -> None:
    """Feed ``writer`` (``write(chunk)``, ``close()``, ``abort()``) ``rows_per_group`` rows at
    a time; ``abort`` if anything fails."""
    try:
        chunk: list[dict] = []
        for r in rows:
            chunk.append(r)
            if len(chunk) >= rows_per_group:
                writer.write(chunk)
                chunk = []
        writer.write(chunk)
    except BaseException:
        writer.abort()
        raise
    writer.close()


def write_parquet(rows: Iterable[dict], path: str | Path, rows_per_group: int = 1_000_000) -> None:
    """Write rows in row groups, so a history larger than memory can be streamed in chunks."""
    write_chunks(rows, HistoryWriter(path), rows_per_group)


def decode_process(p):
    if isinstance(p, str) and p.lstrip("-").isdigit():
        return int(p)
    return p
