"""The Spark check's key rows without Spark's shuffle, where the executors share a
directory with the driver (local mode, or a cluster given one): Spark runs the tasks, but
the rows never pass through the JVM.

Split: a task per row group or so of the typed history reads it with pyarrow, takes its totals
and assigns, makes its key rows (``local.key_rows``) and writes them to a bucket per
``key % buckets`` (an Arrow file per task and bucket). Fold: a task per bucket reads its
files (memory-mapped) and folds every key in them as ``spark._fold_partition`` does.
Measured at 10M operations: Spark's own shuffle of the exploded reads and their hand-over
to Python took 3 of every 4 seconds of the check (docs/queue.md).
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import cycles as queue_cycles, history as queue_history
from .classes import KEY_ROWS
from .local import _Rows, _totals, key_rows

COLUMNS = ["index", "process", "type", "f", "key", "value", "offset", "reads", "mop", "invoke"]


def files(path: str | Path) -> list[Path]:
    p = Path(path)
    return [p] if p.is_file() else sorted(p.glob("*.parquet"))


def tasks(path: str | Path, rows: int = queue_history.ROWS_PER_GROUP) -> list[tuple]:
    """Tasks of about ``rows`` rows: (file, row groups), a file's row groups in order (a
    history written in chunks ends in many small ones)."""
    out: list = []
    for f in files(path):
        meta = pq.ParquetFile(str(f)).metadata
        groups: list = []
        held = 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            if groups and held + n > rows:
                out.append((str(f), groups))
                groups, held = [], 0
            groups.append(g)
            held += n
        if groups:
            out.append((str(f), groups))
    return out


def read_groups(file: str, groups: list[int]) -> pa.Table:
    """Row groups' columns the check reads; ``mop`` and ``invoke`` as nulls in a file
    written before them."""
    pf = pq.ParquetFile(file)
    have = pf.schema_arrow.names
    t = pf.read_row_groups(groups, columns=[c for c in COLUMNS if c in have])
    for c in COLUMNS:
        if c not in have:
            f = queue_history.SCHEMA.field(c)
            t = t.append_column(f, pa.nulls(t.num_rows, f.type))
    return t.select(COLUMNS)


def bucket_dir(scratch: str | Path, b: int) -> Path:
    return Path(scratch) / f"b{b:05d}"


def write_buckets(kr: pa.Table, scratch: str | Path, buckets: int, task: int) -> None:
    """``kr``'s rows, each to its key's bucket, in (key, index, mop) order (``fold`` and
    ``spark._fold_partition`` then find them in order and sort nothing): one Arrow file
    per bucket this task holds."""
    if not kr.num_rows:
        return
    key = kr["key"].to_numpy(zero_copy_only=False).astype(np.int64)
    which = key % buckets
    index = kr["index"].to_numpy(zero_copy_only=False)
    mop = pc.fill_null(kr["mop"], np.iinfo(np.int16).max).to_numpy(zero_copy_only=False)
    order = np.lexsort((mop, index, key, which))
    bounds = np.searchsorted(which[order], np.arange(buckets + 1))
    kr = kr.take(pa.array(order))
    for b in range(buckets):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        if hi == lo:
            continue
        out = bucket_dir(scratch, b)
        out.mkdir(exist_ok=True)
        with pa.OSFile(str(out / f"t{task:06d}.arrow"), "wb") as sink, \
                pa.ipc.new_file(sink, KEY_ROWS) as w:
            w.write_table(kr.slice(lo, hi - lo))


def write_ops(t: pa.Table, rows: _Rows, scratch: str | Path, task: int) -> None:
    """The task's operations for the cycle search (``queue_cycles.OPS``): ok and info
    completions of sends, polls and transactions, a transaction once (its first
    micro-operation stands for it)."""
    mop = t["mop"]
    first = (~pc.is_valid(mop).to_numpy(zero_copy_only=False)
             | (pc.fill_null(mop, 0).to_numpy(zero_copy_only=False) == 0))
    mask = rows.done & ((rows.type == 1) | (rows.type == 3)) & (rows.f >= 0) & (rows.f <= 2) \
        & first
    o = rows.where(mask, ["index", "invoke", "process"])
    ops = pa.table({"index": o["index"], "invoke": o["invoke"], "process": o["process"],
                    "ok": pa.array(rows.type[mask] == 1)}, schema=queue_cycles.OPS)
    out = Path(scratch) / "ops"
    out.mkdir(exist_ok=True)
    with pa.OSFile(str(out / f"t{task:06d}.arrow"), "wb") as sink, \
            pa.ipc.new_file(sink, queue_cycles.OPS) as w:
        w.write_table(ops)


def split_task(task_list: list, scratch: str, buckets: int):
    """``mapInArrow`` over task numbers: each task's row groups split into the buckets;
    yields their facts (totals and assigns) as JSON."""
    def run(batches):
        for batch in batches:
            for task in batch.column(0).to_pylist():
                t = read_groups(*task_list[task])
                rows = _Rows(t)
                facts = _totals(t, rows, messages=False)  # the folds count the messages
                write_buckets(key_rows(t, rows), scratch, buckets, task)
                write_ops(t, rows, scratch, task)
                facts["assigns"] = {str(p): v.tolist() for p, v in facts["assigns"].items()}
                yield pa.RecordBatch.from_arrays([pa.array([json.dumps(facts)])],
                                                 names=["facts"])
    return run


def merge_facts(rows: list[str]) -> dict:
    """The split tasks' facts -> one ``_totals`` (messages_read 0: the folds count them)."""
    stats = {"sends": {"ok": 0, "fail": 0, "info": 0}, "polls": 0, "messages_read": 0,
             "final_polls": False}
    assigns: dict = {}
    for text in rows:
        f = json.loads(text)
        for x in ("ok", "fail", "info"):
            stats["sends"][x] += f["stats"]["sends"][x]
        stats["polls"] += f["stats"]["polls"]
        stats["final_polls"] |= f["stats"]["final_polls"]
        for p, v in f["assigns"].items():
            assigns.setdefault(int(p), []).extend(v)
    return {"stats": stats,
            "assigns": {p: np.array(sorted(v), np.int64) for p, v in assigns.items()}}


def read_bucket(scratch: str | Path, b: int) -> list[pa.RecordBatch]:
    out: list = []
    d = bucket_dir(scratch, b)
    for p in sorted(d.glob("*.arrow")) if d.exists() else ():
        with pa.memory_map(str(p)) as src:
            out.extend(pa.ipc.open_file(src).read_all().to_batches())
    return out


def _fold_bucket(scratch: str, b: int, fold_partition, lo=None, hi=None):
    """A bucket's rows (those inside the intervals ``[lo, hi]`` if given) to
    ``fold_partition`` (``spark._fold_partition(...)``): its output batches."""
    rows = read_bucket(scratch, b)
    if lo is not None:
        at = KEY_ROWS.get_field_index("index")
        rows = [r.filter(pa.array(queue_cycles.interval_of(
            r.column(at).to_numpy(zero_copy_only=False), lo, hi) >= 0)) for r in rows]
    yield from fold_partition(rows)


def fold_task(scratch: str, fold_partition):
    """``mapInArrow`` over bucket numbers: each bucket folded."""
    def run(batches):
        for batch in batches:
            for b in batch.column(0).to_pylist():
                yield from _fold_bucket(scratch, b, fold_partition)
    return run


def graph_task(scratch: str, n_buckets: int, refold, lo, hi, every_row: bool):
    """``mapInArrow`` over bucket numbers, then split tasks' numbers from ``n_buckets``
    on: the cycle search's rows (``spark.GRAPH``) inside the intervals ``[lo, hi]``, each
    with its interval: the edges of each bucket's rows folded again (``refold``; of its
    rows inside the intervals, or of all of them if ``every_row``: ww edges need every
    send), then each split task's operations."""
    def run(batches):
        for batch in batches:
            for i in batch.column(0).to_pylist():
                if i < n_buckets:
                    parts = _fold_bucket(scratch, i, refold, *((None, None) if every_row
                                                              else (lo, hi)))
                    for e in parts:
                        e = e.filter(pc.is_null(e.column(0)))  # edges, not anomalies
                        if e.num_rows:
                            yield _graph_rows(1, e["src"], e["dst"], e["key"],
                                              pc.cast(e["rel"], pa.int32()), e["value"], lo, hi)
                    continue
                p = Path(scratch) / "ops" / f"t{i - n_buckets:06d}.arrow"
                with pa.memory_map(str(p)) as src:
                    o = pa.ipc.open_file(src).read_all()
                if o.num_rows:
                    yield _graph_rows(0, o["index"], o["invoke"], o["process"],
                                      pc.cast(o["ok"], pa.int32()), pa.nulls(o.num_rows,
                                                                             pa.int64()), lo, hi)
    return run


def _graph_rows(kind: int, a, b, c, d, e, lo, hi) -> pa.RecordBatch:
    """Rows of kind ``kind`` (0 an operation, 1 an edge) inside the intervals, with theirs."""
    iv = queue_cycles.interval_of(pc.fill_null(a, -1).to_numpy(zero_copy_only=False), lo, hi)
    keep = pa.array(iv >= 0)
    cols = [pa.array(np.full(len(iv), kind, np.int8)), a, b, pc.cast(c, pa.int32()), d, e,
            pa.array(iv, pa.int64())]
    t = pa.table(cols, names=["kind", "a", "b", "c", "d", "e", "iv"]).filter(keep)
    return t.combine_chunks().to_batches()[0] if t.num_rows else \
        pa.RecordBatch.from_pylist([], schema=t.schema)


class Scratch:
    """A directory the executors share for one check, removed after it."""

    def __init__(self, parent: str | None = None) -> None:
        self.path = tempfile.mkdtemp(prefix="chaoskraft-queue-", dir=parent)

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
