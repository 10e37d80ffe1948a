"""A run's history in bounded memory, for the report and the timeline, whichever file holds it.

A run directory holds its history as ``history.parquet`` (value as JSON
text), as the typed ``queue.parquet`` alone (``checkers.queue.history``:
a queue run written straight to Parquet), or only as ``history.jsonl``
(not yet analysed). ``batches`` yields it as pandas frames of at most
``BATCH`` rows with the same columns whatever the source:

    index int64, time int64, process str ("nemesis" or the client's
    number), type, f, key (str or None), value (JSON text or None), error

A typed file's process, type, f and key come as pandas Categoricals (the
same values, compared and taken as integer codes), and of its rows only
invokes carry a value (a poll's reads are not turned back into JSON here:
the pages need only invoke values); ``rows_at`` returns whole rows,
decoded, for the few operations a page shows.

``pairs`` turns batches into operations (invoke and completion of one
process), carrying a process's open invoke from one batch to the next.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import pandas as pd

from checkers.history import HistoryError, iter_history

BATCH = 100_000
COLUMNS = ["index", "time", "process", "type", "f", "key", "value", "error"]
SOURCES = ("history.parquet", "queue.parquet", "history.jsonl")


def source(run_dir: Path) -> Path:
    """The file the run's history is read from: the first of ``SOURCES`` that exists."""
    for name in SOURCES:
        if (Path(run_dir) / name).exists():
            return Path(run_dir) / name
    raise HistoryError(f"{run_dir}: no history ({', '.join(SOURCES)}) in this run directory")


def _typed(path: Path) -> bool:
    from checkers.queue import history as qh
    return path.suffix == ".parquet" and qh.is_typed(path)


def _text(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), None)


def _from_generic(t) -> pd.DataFrame:
    df = t.to_pandas()
    for c in COLUMNS:
        if c not in df:
            df[c] = None
    df["process"] = df["process"].astype(str)
    return df[COLUMNS]


def _category(a) -> pd.Categorical:
    """An Arrow string column as a pandas Categorical: comparing, mapping and taking its rows
    then works on small integer codes, not Python strings."""
    import pyarrow.compute as pc
    d = pc.dictionary_encode(a.combine_chunks() if hasattr(a, "chunks") else a)
    return pd.Categorical.from_codes(
        d.indices.fill_null(-1).to_numpy(zero_copy_only=False),
        pd.Index(d.dictionary.to_numpy(zero_copy_only=False), dtype=object))


def _from_typed(t, names, values=None) -> pd.DataFrame:
    """Typed rows -> the common columns. Only invokes get a value (the pages show no other;
    a send's as the JSON a run writes, a value that is not an integer as the history wrote
    it: ``values``, the file's ValueNames); process, type, f and key are Categorical."""
    import pyarrow as pa
    import pyarrow.compute as pc
    process = pc.fill_null(pc.cast(t.column("process"), pa.string()), "nemesis")
    key = pc.take(names, t.column("key"))
    invoke = pc.equal(t.column("type"), "invoke")
    raw = pc.if_else(invoke, t.column("value"), pa.scalar(None, pa.int64()))
    v = pc.cast(raw, pa.string())
    if values is not None and values.names:
        v = pa.array([None if x is None else json.dumps(values.name(x))
                      for x in raw.to_pylist()], pa.string())
    value = pc.binary_join_element_wise('{"value": ', v, "}", "")
    df = pd.DataFrame({"index": t.column("index").to_numpy(), "time": t.column("time").to_numpy(),
                       "process": _category(process), "type": _category(t.column("type")),
                       "f": _category(t.column("f")), "key": _category(key),
                       "value": value.to_numpy(zero_copy_only=False),
                       "error": None}, columns=COLUMNS)
    extra = t.column("extra")
    rows = np.nonzero(extra.is_valid().to_numpy(zero_copy_only=False))[0]
    if len(rows):
        texts = extra.to_numpy(zero_copy_only=False)
        errors, values = df["error"].to_numpy().copy(), df["value"].to_numpy().copy()
        for i in rows:
            e = json.loads(texts[i])
            errors[i] = e.get("error")
            if "value" in e:
                values[i] = json.dumps(e["value"])
        df["error"], df["value"] = errors, values
    return df


def _from_rows(rows: list[dict], start: int) -> pd.DataFrame:
    return pd.DataFrame({
        "index": [int(r.get("index", start + i)) for i, r in enumerate(rows)],
        "time": [r.get("time") for r in rows],
        "process": [str(r.get("process")) for r in rows],
        "type": [r.get("type") for r in rows], "f": [r.get("f") for r in rows],
        "key": [None if r.get("key") is None else str(r["key"]) for r in rows],
        "value": [json.dumps(r.get("value"), default=str) for r in rows],
        "error": [None if r.get("error") is None else str(r["error"]) for r in rows]},
        columns=COLUMNS)


def batches(run_dir: Path, batch_rows: int | None = None) -> Iterator[pd.DataFrame]:
    """The run's history, ``batch_rows`` (default ``BATCH``) rows at a time, in the file's
    order."""
    batch_rows = batch_rows or BATCH
    path = source(run_dir)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        f = pq.ParquetFile(str(path))
        if _typed(path):
            from checkers.queue import history as qh
            file_names = qh.key_names(path)
            names = pa.array([str(n) for n in file_names.names], pa.string())
            need = [c for c in qh.SCHEMA.names  # the pages need no reads
                    if c != "reads" and c in f.schema_arrow.names]
            for b in f.iter_batches(batch_size=batch_rows, columns=need):
                yield _from_typed(pa.Table.from_batches([b]), names, file_names.values)
        else:
            have = [c for c in COLUMNS if c in f.schema_arrow.names]
            for b in f.iter_batches(batch_size=batch_rows, columns=have):
                yield _from_generic(pa.Table.from_batches([b]))
        return
    chunk: list[dict] = []
    n = 0
    for r in iter_history(path):
        chunk.append(r)
        if len(chunk) >= batch_rows:
            yield _from_rows(chunk, n)
            n += len(chunk)
            chunk = []
    if chunk or not n:
        yield _from_rows(chunk, n)


class Span:
    """What the pages must know before they stream: the time axis's end, how many rows, and
    every process (a lane each)."""

    def __init__(self, run_dir: Path) -> None:
        self.end_ns = 0
        self.rows = 0
        procs: set[str] = set()
        path = source(run_dir)
        if path.suffix == ".parquet":
            import pyarrow.compute as pc
            import pyarrow.parquet as pq
            for b in pq.ParquetFile(str(path)).iter_batches(batch_size=1_000_000,
                                                           columns=["time", "process"]):
                self.rows += b.num_rows
                t = pc.max(b.column(0)).as_py()
                self.end_ns = max(self.end_ns, t or 0)
                procs.update(str(p) for p in pc.unique(b.column(1)).to_pylist()
                             if p is not None)
        else:
            for b in batches(run_dir):
                self.rows += len(b)
                if len(b):
                    t = b["time"].max()
                    if t == t:
                        self.end_ns = max(self.end_ns, int(t))
                    procs.update(b["process"].unique())
        procs.discard("nemesis")
        self.processes = sorted(procs, key=lambda p: (not p.lstrip("-").isdigit(),
                                                      int(p) if p.lstrip("-").isdigit() else 0, p))

    @property
    def end_s(self) -> float:
        return self.end_ns / 1e9


OP_COLUMNS = ["index", "process", "f", "key", "value", "start", "end", "type", "error"]


def pairs(frames: Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """Operations, batch by batch: the invoke's index, process, f, key and value, ``start`` and
    ``end`` (ns), the completion's type and error. An invoke that never completes (its process
    invoked again, or the history ended) comes last, with type ``open`` and no end.

    Each batch's rows are ordered by process and index (numpy, on the processes' codes): an
    invoke followed by a row of its process that is not an invoke is an operation; one followed
    by another invoke never completed; one last of its process is carried to the next batch."""
    carry = pd.DataFrame(columns=COLUMNS)
    opens = []
    for b in frames:
        c = b[(b["process"] != "nemesis").to_numpy()]
        if len(carry):
            if not len(c):
                continue
            c = pd.concat([carry, c], ignore_index=True)
        if not len(c):
            continue
        codes = pd.factorize(c["process"])[0]
        order = np.lexsort((c["index"].to_numpy(), codes))
        proc = codes[order]
        inv = (c["type"] == "invoke").to_numpy()[order]
        same = np.zeros(len(order), bool)
        same[:-1] = proc[:-1] == proc[1:]
        then_invoke = np.ones(len(order), bool)
        then_invoke[:-1] = inv[1:]
        done = np.nonzero(inv & same & ~then_invoke)[0]
        carry = c.iloc[order[inv & ~same]]  # its completion may be in a later batch
        stuck = order[inv & same & then_invoke]
        if len(stuck):
            opens.append(c.iloc[stuck])
        if len(done):
            i, j = order[done], order[done + 1]
            yield pd.DataFrame({"index": _take(c["index"], i).astype("int64"),
                                "process": _take(c["process"], i), "f": _take(c["f"], i),
                                "key": _take(c["key"], i), "value": _take(c["value"], i),
                                "start": _take(c["time"], i), "end": _take(c["time"], j),
                                "type": _take(c["type"], j), "error": _take(c["error"], j)},
                               columns=OP_COLUMNS)
    opens.append(carry)
    last = pd.concat(opens, ignore_index=True) if any(len(o) for o in opens) else None
    if last is not None and len(last):
        yield pd.DataFrame({"index": last["index"].astype("int64"), "process": last["process"],
                            "f": last["f"], "key": last["key"], "value": last["value"],
                            "start": last["time"], "end": np.nan, "type": "open",
                            "error": None}, columns=OP_COLUMNS)


def _take(s: pd.Series, rows: np.ndarray):
    """``s``'s values at ``rows`` (a Categorical stays one)."""
    a = s.array
    return a.take(rows) if isinstance(a, pd.Categorical) else s.to_numpy()[rows]


PROGRESS_ROWS = 1_000_000  # a history this long is streamed with progress lines


class Stream:
    """The run's operations (``pairs``, iterating the object), keeping the nemesis rows met on
    the way (``nemesis``, after the iteration: few, one per fault step's invoke and info).
    ``progress(line)``, given the history's ``rows`` (``PROGRESS_ROWS`` or more: long work),
    hears each further tenth of them read, named ``what``."""

    def __init__(self, run_dir: Path, progress=None, rows: int = 0, what: str = "") -> None:
        self.run_dir = run_dir
        self._nemesis: list[pd.DataFrame] = []
        self._progress = progress if rows >= PROGRESS_ROWS else None
        self._rows, self._what = rows, what

    def __iter__(self) -> Iterator[pd.DataFrame]:
        def watched():
            done, told = 0, 0
            for b in batches(self.run_dir):
                self._nemesis.append(b[b["process"] == "nemesis"])
                done += len(b)
                if self._progress is not None and done * 10 // self._rows > told:
                    told = done * 10 // self._rows
                    self._progress(f"{self._what}: {done:,} of {self._rows:,} history rows "
                                   f"read ({100 * done // self._rows}%)")
                yield b
        return pairs(watched())

    @property
    def nemesis(self) -> pd.DataFrame:
        parts = [p for p in self._nemesis if len(p)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def one_pass(run_dir: Path, consumers: list, progress=None, what: str = "") -> list:
    """Stream the run's operations once to every consumer: ``start(span)``, ``add(ops)`` for
    each batch of ``pairs``, then ``finish(nemesis)``, whose answers are returned in order
    (the report and the timeline share one read of the history)."""
    span = Span(run_dir)
    for c in consumers:
        c.start(span)
    stream = Stream(run_dir, progress, span.rows, what)
    for ops in stream:
        for c in consumers:
            c.add(ops)
    return [c.finish(stream.nemesis) for c in consumers]


def rows_at(run_dir: Path, indexes: Iterable[int]) -> dict[int, dict]:
    """index -> the whole row (value decoded), for the few operations a page shows."""
    wanted = set(int(i) for i in indexes)
    if not wanted:
        return {}
    path = source(run_dir)
    out: dict[int, dict] = {}
    if path.suffix == ".parquet":
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
        t = pq.read_table(str(path), filters=ds.field("index").isin(sorted(wanted)))
        if _typed(path):
            from checkers.queue import history as qh
            names = qh.key_names(path)
            ops: dict[int, list] = {}
            for r in t.to_pylist():  # a transaction's micro-operations share its index
                ops.setdefault(r["index"], []).append(r)
            for i, rows in ops.items():
                out[i] = qh.untyped_op(rows, names)
        else:
            from checkers.history import decode_parquet_row
            for r in t.to_pylist():
                out[r["index"]] = decode_parquet_row(r)
        return out
    for i, r in enumerate(iter_history(path)):
        if int(r.get("index", i)) in wanted:
            out[int(r.get("index", i))] = r
    return out


def send_indexes(run_dir: Path, wanted: set[tuple[str, object]]) -> dict[tuple[str, object], int]:
    """(key, value) -> the index of the send that invoked it, for the (key as text, value)
    pairs ``wanted`` (an anomaly that names values only: duplicate, inconsistent-offsets)."""
    if not wanted:
        return {}
    keys = {k for k, _ in wanted}
    out = {}
    path = source(run_dir)
    if _typed(path):  # filtered in Arrow, a batch at a time, not streamed through pandas
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq
        from checkers.queue import history as qh
        names = qh.key_names(path)
        ids = pa.array([i for i, n in enumerate(names.names) if str(n) in keys], pa.int32())
        for b in pq.ParquetFile(str(path)).iter_batches(
                batch_size=BATCH, columns=["index", "type", "f", "key", "value"]):
            hit = b.filter(pc.and_(pc.and_(pc.equal(b.column(2), "send"),
                                           pc.equal(b.column(1), "invoke")),
                                   pc.is_in(b.column(3), ids)))
            for i, k, v in zip(*(hit.column(c).to_pylist() for c in ("index", "key", "value"))):
                pair = (str(names.names[k]), names.values.name(v))
                if pair in wanted:
                    out[pair] = int(i)
        return out
    for b in batches(run_dir):
        s = b[(b["f"] == "send") & (b["type"] == "invoke") & b["key"].isin(keys)]
        for i, key, v in zip(s["index"], s["key"], s["value"]):
            v = json.loads(v) if isinstance(v, str) else v
            if isinstance(v, dict) and (key, v.get("value")) in wanted:
                out[(key, v["value"])] = int(i)
    return out
