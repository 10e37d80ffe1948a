"""The same check through Spark: rows repartitioned by key, the fold in ``mapInArrow``, then
the cycle search over the intervals the edges make."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import buckets, cycles as queue_cycles, history as queue_history
from .classes import (AUTO_SPARK_ROWS, FINAL, FOLD_SCHEMA, MESSAGES, POLL, REPOSITIONS,
                      RESULT_SCHEMA, SEND, T_FAIL, T_INFO, T_OK)
from .fold import fold
from .local import _assigns, _result, check_local


def _fold_partition(has_final: bool, assigns: dict, names: list, n_examples: int,
                    ww_deps: bool, keep=queue_cycles.backward, anomalies: bool = True):
    """For ``mapInArrow`` over rows partitioned by key: a partition's batches, gathered per
    key, then each key folded (no sort by key before the Python worker, which
    ``groupBy().applyInArrow`` would do and which costs more than the fold). Yields the
    anomalies, then (``anomalies``: the first pass) the spans of the backward edges,
    merged, as edges from ``hi`` to ``lo``, or (the second) the edges ``keep`` keeps."""
    def run(batches):
        parts: dict = {}
        for b in batches:
            if not b.num_rows:
                continue
            t = pa.Table.from_batches([b])
            keys = t["key"].to_numpy(zero_copy_only=False)
            if (np.diff(keys) < 0).any():  # rows from buckets come in key order
                t = t.sort_by("key")
                keys = t["key"].to_numpy(zero_copy_only=False)
            edges = np.nonzero(np.concatenate([[True], keys[1:] != keys[:-1], [True]]))[0]
            for lo, hi in zip(edges[:-1], edges[1:]):
                parts.setdefault(int(keys[lo]), []).append(t.slice(lo, hi - lo))
        out_names, counts, examples = [], [], []
        edges: list = []
        for k, tables in parts.items():
            table = pa.concat_tables(tables)
            del tables[:]
            out = fold(table, names[k], has_final, assigns, n_examples, edges, k, ww_deps, keep,
                       anomalies)
            if anomalies:
                out[MESSAGES] = (int(pc.sum(pc.list_value_length(table["offsets"])).as_py()
                                     or 0), [])
            for name, (count, ex) in out.items():
                out_names.append(name)
                counts.append(count)
                examples.append(json.dumps(ex))
        if anomalies:  # the first pass: of its backward edges, only the spans, merged
            lo, hi = queue_cycles.merge_spans(*queue_cycles.backward_spans(
                pa.concat_tables([queue_cycles.EDGES.empty_table()] + edges)))
            edges = [pa.table({"src": hi, "dst": lo, "rel": pa.nulls(len(lo), pa.int8()),
                               "key": pa.nulls(len(lo), pa.int32()),
                               "value": pa.nulls(len(lo), pa.int64())},
                              schema=queue_cycles.EDGES)]
        n = len(out_names)
        yield pa.RecordBatch.from_arrays(
            [pa.array(out_names, pa.string()), pa.array(counts, pa.int64()),
             pa.array(examples, pa.string())]
            + [pa.nulls(n, f.type) for f in queue_cycles.EDGES],
            names=["anomaly", "count", "examples"] + queue_cycles.EDGES.names)
        for e in edges:
            if e.num_rows:
                yield pa.RecordBatch.from_arrays(
                    [pa.nulls(e.num_rows, pa.string()), pa.nulls(e.num_rows, pa.int64()),
                     pa.nulls(e.num_rows, pa.string())] + [c.combine_chunks() for c in e.columns],
                    names=["anomaly", "count", "examples"] + queue_cycles.EDGES.names)
    return run


def with_interval(df, col: str, out: str, lo: np.ndarray, hi: np.ndarray):
    """``df`` with a column ``out``: the interval (of the sorted, disjoint, closed
    ``[lo, hi]``) that ``col`` lies in, -1 for none or null; ``cycles.interval_of`` as a
    binary search in the JVM (Spark's Bucketizer), so rows outside every interval never
    reach a Python worker. Splits -inf, lo, hi + 0.5, ..., +inf: bucket 2k + 1 is
    interval k."""
    from pyspark.ml.feature import Bucketizer
    from pyspark.sql import functions as F
    splits = np.empty(2 * len(lo) + 2, np.float64)
    splits[0], splits[-1] = -np.inf, np.inf
    splits[1:-1:2], splits[2:-1:2] = lo, np.asarray(hi, np.float64) + 0.5
    tmp, bucket = f"_{out}_x", f"_{out}_b"
    df = df.withColumn(tmp, F.col(col).cast("double"))
    df = Bucketizer(splits=splits.tolist(), inputCol=tmp, outputCol=bucket,
                    handleInvalid="keep").transform(df)
    b = F.col(bucket).cast("long")
    return df.withColumn(out, F.when(F.col(tmp).isNotNull() & (b % 2 == 1), (b - 1) / 2)
                         .otherwise(-1).cast("long")).drop(tmp, bucket)


def _cycles_group(n_examples: int, names: list):
    """``applyInArrow`` per interval: its operations and edges -> the cycles found."""
    def run(t: pa.Table) -> pa.Table:
        kind = t["kind"].to_numpy(zero_copy_only=False)
        o, e = t.filter(pa.array(kind == 0)), t.filter(pa.array(kind == 1))
        ops = pa.table({"index": o["a"], "invoke": o["b"], "process": o["c"],
                        "ok": pc.equal(o["d"], 1)}, schema=queue_cycles.OPS)
        edges = pa.table({"src": e["a"], "dst": e["b"], "rel": pc.cast(e["d"], pa.int8()),
                          "key": e["c"], "value": e["e"]}, schema=queue_cycles.EDGES)
        found = queue_cycles.cycles(ops, edges, n_examples)
        rows = [(name, count, json.dumps(queue_cycles.key_names_in(ex, names)))
                for name, (count, ex) in found.items()]
        return pa.table({"anomaly": pa.array([r[0] for r in rows], pa.string()),
                         "count": pa.array([r[1] for r in rows], pa.int64()),
                         "examples": pa.array([r[2] for r in rows], pa.string())})
    return run


GRAPH = "kind byte, a long, b long, c int, d int, e long, iv long"  # _cycles_group's rows


def _spark_cycles(spark, lo: np.ndarray, hi: np.ndarray, graph, names: list,
                  n_examples: int, phase=lambda name: None) -> list[dict]:
    """The cycle search in Spark (``queue_cycles``): the spans of backward edges that each
    fold task merged (``lo``, ``hi``) merged again here (intervals only, never the
    graph); if there are any, the operations and the edges inside them (``graph(lo,
    hi)``: GRAPH rows, each tagged with its interval ``iv``), each interval searched in
    one ``applyInArrow`` group."""
    lo, hi = queue_cycles.merge_spans(lo, hi)
    phase(f"backward spans merged: {len(lo):,} intervals")
    if not len(lo):
        return []
    rows = (graph(lo, hi).groupBy("iv")
            .applyInArrow(_cycles_group(n_examples, names), schema=RESULT_SCHEMA).collect())
    phase("the intervals' rows folded again and searched for cycles")
    return [{r["anomaly"]: (r["count"], json.loads(r["examples"]))} for r in rows]


def _shuffled_graph(done, refold):
    """GRAPH rows from the history read by Spark (``done``) and the refolds' edges
    (``refold(lo, hi)``), tagged in the JVM (``with_interval``)."""
    from pyspark.sql import functions as F

    def graph(lo, hi):
        edges = (refold(lo, hi).where(F.col("anomaly").isNull())
                 .select(*queue_cycles.EDGES.names))
        ops = (done.where(F.col("type").isin("ok", "info")
                          & F.col("f").isin("send", "poll", "final-poll"))
               # one row per operation: a transaction's first micro-operation stands for it
               # (a filter: dropping duplicate indexes cost a shuffle, 10 s of 63 at 10M ops)
               .where(F.col("mop").isNull() | (F.col("mop") == 0))
               .select(F.lit(0).cast("byte").alias("kind"), F.col("index").alias("a"),
                       F.col("invoke").alias("b"), F.col("process").alias("c"),
                       F.when(F.col("type") == "ok", 1).otherwise(0).cast("int").alias("d"),
                       F.lit(None).cast("bigint").alias("e")))
        both = ops.unionByName(edges.select(
            F.lit(1).cast("byte").alias("kind"), F.col("src").alias("a"),
            F.col("dst").alias("b"), F.col("key").alias("c"), F.col("rel").cast("int").alias("d"),
            F.col("value").alias("e")))
        # each tagged with its interval in the JVM; those in none (or edges across two) dropped
        tagged = with_interval(with_interval(both, "a", "iv", lo, hi), "b", "iv_b", lo, hi)
        return (tagged.where((F.col("iv") >= 0) & ((F.col("kind") == 0)
                                                   | (F.col("iv") == F.col("iv_b"))))
                .drop("iv_b"))
    return graph


def shared_scratch(spark) -> tuple[bool, str | None]:
    """Whether the executors share a directory with the driver, and its parent (None: the
    system's temporary directory): in local mode, or where ``chaoskraft.queue.scratch``
    names one (a directory every executor sees at the same path); not over Spark
    Connect."""
    try:
        master = spark.sparkContext.master
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return False, None
    named = spark.conf.get("chaoskraft.queue.scratch", None)
    if named:
        return True, named
    return master.startswith("local"), None


def check_spark(spark, path: str | Path, allowed=(), examples: int = 5,
                ww_deps: bool = False, require_final: bool = True, progress=None,
                shuffle: bool | None = None) -> dict:
    """The same check through Spark: totals and assigns, the folds (anomalies and
    dependency edges) in one job, then the cycle search (``_spark_cycles``). The key rows
    reach the folds through a directory the executors share (``buckets``) where there is
    one (``shared_scratch``), else through Spark's shuffle; ``shuffle`` True or False
    chooses. ``progress(line)``, if given, hears each phase's end and time, and during a
    long phase how many of its tasks are done (``TaskProgress``)."""
    from ..spark import TaskProgress
    with TaskProgress(spark, progress, "running"):
        return _check_spark(spark, path, allowed, examples, ww_deps, require_final, progress,
                            shuffle)


def _check_spark(spark, path, allowed, examples, ww_deps, require_final, progress,
                 shuffle) -> dict:
    import time

    from pyspark.sql import functions as F
    started = [time.monotonic()]

    def phase(name: str) -> None:
        if progress is not None:
            now = time.monotonic()
            progress(f"{name}: {now - started[0]:.1f} s")
            started[0] = now
    path = queue_history.typed_path(path)
    file_names = queue_history.key_names(path)
    names = file_names.names
    size = sum(p.stat().st_size for p in ([Path(path)] if Path(path).is_file()
                                          else Path(path).glob("*.parquet")))
    # Shuffle partitions sized to the input: about 64 MB of Parquet each, at least 2.
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, min(400, size // (64 << 20) + 1))))
    shared, parent = shared_scratch(spark)
    if shared if shuffle is None else not shuffle:
        with buckets.Scratch(parent) as scratch:
            return _bucketed(spark, path, scratch, names, file_names.values, allowed,
                             examples, ww_deps, require_final, phase)
    h = spark.read.parquet(str(path))
    for c in ("mop", "invoke"):  # a typed file written before transactions were grouped
        if c not in h.columns:
            h = h.withColumn(c, F.lit(None).cast("smallint" if c == "mop" else "bigint"))
    done = h.where(F.col("process").isNotNull() & (F.col("type") != "invoke"))
    is_read = F.col("f").isin("poll", "final-poll") & F.col("reads").isNotNull()
    # One job over four narrow columns: the totals, and the assigns the folds need.
    t = done.select("index", "process", "type", "f").agg(
        *[F.count_if((F.col("f") == "send") & (F.col("type") == x)).alias(x)
          for x in ("ok", "fail", "info")],
        F.count_if(F.col("f") == "poll").alias("polls"),
        F.count_if((F.col("f") == "final-poll") & (F.col("type") == "ok")).alias("finals"),
        F.collect_list(F.when(F.col("f").isin(*REPOSITIONS) & (F.col("type") == "ok"),
                              F.struct("process", "index"))).alias("assigns"),
    ).collect()[0]
    stats = {"sends": {x: int(t[x]) for x in ("ok", "fail", "info")}, "polls": int(t["polls"]),
             "messages_read": 0, "final_polls": t["finals"] > 0}
    assigns = _assigns((a["process"], a["index"]) for a in t["assigns"])
    phase("totals and assigns")
    empty = F.array().cast("array<bigint>")
    sends = done.where((F.col("f") == "send") & F.col("key").isNotNull()).select(
        "key", F.lit(SEND).cast("byte").alias("kind"), "index", "process",
        F.when(F.col("type") == "ok", T_OK).when(F.col("type") == "fail", T_FAIL)
        .otherwise(T_INFO).cast("byte").alias("type"), "value", "offset",
        empty.alias("offsets"), empty.alias("values"), "mop")
    polls = (done.where(is_read)
             .select("index", "process", "mop",
                     F.when(F.col("f") == "final-poll", F.lit(FINAL)).otherwise(F.lit(POLL))
                     .cast("byte").alias("kind"), F.explode("reads").alias("r"))
             .select(F.col("r.key").alias("key"), "kind", "index", "process",
                     F.lit(None).cast("byte").alias("type"),
                     F.lit(None).cast("bigint").alias("value"),
                     F.lit(None).cast("bigint").alias("offset"),
                     F.col("r.offsets").alias("offsets"), F.col("r.values").alias("values"),
                     "mop"))
    rows = sends.unionByName(polls)

    def refold(lo, hi):
        """The second pass: the edges inside the intervals, from the rows inside them
        (all rows with ww edges, whose version order needs every send)."""
        inside = rows if ww_deps else (with_interval(rows, "index", "_iv", lo, hi)
                                       .where(F.col("_iv") >= 0).drop("_iv"))
        return inside.repartition("key").mapInArrow(_fold_partition(
            stats["final_polls"], assigns, names, 0, ww_deps, queue_cycles.within(lo, hi),
            anomalies=False), schema=FOLD_SCHEMA)
    folded = rows.repartition("key").mapInArrow(
        _fold_partition(stats["final_polls"], assigns, names, examples, ww_deps),
        schema=FOLD_SCHEMA)
    return _finish(spark, folded, _shuffled_graph(done, refold), stats, names,
                   file_names.values, allowed, examples, require_final, phase)


def _finish(spark, folded, graph, stats: dict, names: list, values, allowed,
            examples: int, require_final: bool, phase) -> dict:
    """The folds' anomalies, message counts and merged spans collected in one job (they
    are few: rows per anomaly class and key, spans per task), then the cycle search."""
    per_key, lo, hi = [], [], []
    for r in folded.collect():
        if r["anomaly"] is None:
            lo.append(r["dst"])
            hi.append(r["src"])
        elif r["anomaly"] == MESSAGES:
            stats["messages_read"] += r["count"]
        else:
            per_key.append({r["anomaly"]: (r["count"], json.loads(r["examples"]))})
    phase("every key folded (through Spark's shuffle or the buckets)")
    per_key += _spark_cycles(spark, np.array(lo, np.int64), np.array(hi, np.int64), graph,
                             names, examples, phase)
    return _result(per_key, stats, allowed, examples, require_final, values)


def _bucketed(spark, path: Path, scratch: str, names: list, values, allowed,
              examples: int, ww_deps: bool, require_final: bool, phase) -> dict:
    """check_spark through a shared directory (``buckets``): a task per row group or so
    splits its key rows into buckets (and its operations, for the cycle search) and
    returns its totals and assigns; a task per bucket folds."""
    task_list = buckets.tasks(path)
    n = int(spark.conf.get("spark.sql.shuffle.partitions"))
    rows = (spark.range(0, len(task_list), numPartitions=max(1, len(task_list)))
            .mapInArrow(buckets.split_task(task_list, scratch, n), "facts string").collect())
    facts = buckets.merge_facts([r["facts"] for r in rows])
    stats, assigns = facts["stats"], facts["assigns"]
    phase(f"totals and assigns, key rows split into {n} buckets")
    folded = (spark.range(0, n, numPartitions=n).mapInArrow(buckets.fold_task(
        scratch, _fold_partition(stats["final_polls"], assigns, names, examples, ww_deps)),
        schema=FOLD_SCHEMA))

    def graph(lo, hi):
        refold = _fold_partition(stats["final_polls"], assigns, names, 0, ww_deps,
                                 queue_cycles.within(lo, hi), anomalies=False)
        jobs = n + len(task_list)
        return spark.range(0, jobs, numPartitions=jobs).mapInArrow(
            buckets.graph_task(scratch, n, refold, lo, hi, ww_deps), schema=GRAPH)
    return _finish(spark, folded, graph, stats, names, values, allowed, examples,
                   require_final, phase)


def history_rows(path: str | Path) -> int:
    return pq.ParquetFile(str(path)).metadata.num_rows


def check_queue(spark, parquet_path: str, allowed=(), examples: int = 5,
                engine: str = "auto", ww_deps: bool = False, require_final: bool = True,
                progress=None) -> dict:
    """Check a queue history (typed, or an older history.parquet).

    ``require_final``: without a successful final poll (``f: final-poll``) the
    verdict is unknown (durability could not be established); False for
    histories that have none (Jepsen's final polls are ordinary polls).

    ``progress``: a callable given a line per phase of a Spark check.

    ``engine``: ``local`` (this process), ``spark`` (``spark`` is a session,
    or None for the default one), ``auto``: Spark when a session is given or
    the history has more than AUTO_SPARK_ROWS rows, else local.
    """
    if engine not in ("auto", "local", "spark"):
        raise ValueError(f"engine must be auto, local or spark, not {engine!r}")
    if engine == "auto":
        engine = "spark" if spark is not None or history_rows(parquet_path) > AUTO_SPARK_ROWS \
            else "local"
    if engine == "local":
        return check_local(parquet_path, allowed, examples, ww_deps, require_final)
    if spark is None:
        from ..spark import spark_session
        spark = spark_session()
    return check_spark(spark, parquet_path, allowed, examples, ww_deps, require_final, progress)
