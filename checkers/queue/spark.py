"""The same check through Spark: rows repartitioned by key, the fold in ``mapInArrow``, then
the cycle search over the intervals the edges make."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import cycles as queue_cycles, history as queue_history
from .classes import (AUTO_SPARK_ROWS, FINAL, FOLD_SCHEMA, MESSAGES, POLL, REPOSITIONS,
                      RESULT_SCHEMA, SEND, T_FAIL, T_INFO, T_OK)
from .fold import fold
from .local import _assigns, _result, check_local


def _fold_partition(has_final: bool, assigns: dict, names: list, n_examples: int,
                    ww_deps: bool, keep=queue_cycles.backward, anomalies: bool = True):
    """For ``mapInArrow`` over rows partitioned by key: a partition's batches, gathered per
    key, then each key folded (no sort by key before the Python worker, which
    ``groupBy().applyInArrow`` would do and which costs more than the fold)."""
    def run(batches):
        parts: dict = {}
        for b in batches:
            if not b.num_rows:
                continue
            t = pa.Table.from_batches([b]).sort_by("key")
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


def _merge_partition(batches):
    """``mapInArrow``: a range partition's backward spans merged (the driver merges the
    partitions' results)."""
    t = pa.Table.from_batches(list(batches), schema=pa.schema([("lo", pa.int64()),
                                                                ("hi", pa.int64())]))
    lo, hi = queue_cycles.merge_spans(t["lo"].to_numpy(zero_copy_only=False),
                                      t["hi"].to_numpy(zero_copy_only=False))
    yield pa.RecordBatch.from_arrays([pa.array(lo, pa.int64()), pa.array(hi, pa.int64())],
                                     names=["lo", "hi"])


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


def _spark_cycles(spark, done, folded, refold, names: list, n_examples: int,
                  phase=lambda name: None) -> list[dict]:
    """The cycle search in Spark (``queue_cycles``): the backward edges the folds emitted
    (``folded``) merged into intervals per range partition and then in the driver
    (intervals only, never the graph); if there are any, the key rows folded again for
    the edges inside them (``refold(lo, hi)``: those folds' output); operations and
    edges tagged with their interval, each interval searched in one ``applyInArrow``
    group."""
    from pyspark.sql import functions as F
    spans = folded.where(F.col("anomaly").isNull()).select(F.col("dst").alias("lo"),
                                                           F.col("src").alias("hi"))
    parts = max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))
    merged = (spans.repartitionByRange(parts, "lo").sortWithinPartitions("lo")
              .mapInArrow(_merge_partition, "lo long, hi long").collect())
    lo, hi = queue_cycles.merge_spans(np.array([r["lo"] for r in merged], np.int64),
                                      np.array([r["hi"] for r in merged], np.int64))
    phase(f"backward spans merged: {len(lo):,} intervals")
    if not merged:
        return []
    edges = (refold(lo, hi).where(F.col("anomaly").isNull())
             .select(*queue_cycles.EDGES.names))
    ops = (done.where(F.col("type").isin("ok", "info") & F.col("f").isin("send", "poll",
                                                                         "final-poll"))
           # one row per operation: a transaction's first micro-operation stands for it
           # (a filter: dropping duplicate indexes cost a shuffle, 10 s of 63 at 10M ops)
           .where(F.col("mop").isNull() | (F.col("mop") == 0))
           .select("index", "invoke", "process", "type")
           .select(F.lit(0).cast("byte").alias("kind"), F.col("index").alias("a"),
                   F.col("invoke").alias("b"), F.col("process").alias("c"),
                   F.when(F.col("type") == "ok", 1).otherwise(0).cast("int").alias("d"),
                   F.lit(None).cast("bigint").alias("e")))
    graph = ops.unionByName(edges.select(
        F.lit(1).cast("byte").alias("kind"), F.col("src").alias("a"), F.col("dst").alias("b"),
        F.col("key").alias("c"), F.col("rel").cast("int").alias("d"),
        F.col("value").alias("e")))
    # each tagged with its interval in the JVM; those in none (or edges across two) dropped
    tagged = with_interval(with_interval(graph, "a", "iv", lo, hi), "b", "iv_b", lo, hi)
    tagged = (tagged.where((F.col("iv") >= 0) & ((F.col("kind") == 0)
                                                 | (F.col("iv") == F.col("iv_b"))))
              .drop("iv_b"))
    rows = (tagged.groupBy("iv")
            .applyInArrow(_cycles_group(n_examples, names), schema=RESULT_SCHEMA).collect())
    phase("the intervals' rows folded again and searched for cycles")
    return [{r["anomaly"]: (r["count"], json.loads(r["examples"]))} for r in rows]


def check_spark(spark, path: str | Path, allowed=(), examples: int = 5,
                ww_deps: bool = False, require_final: bool = True, progress=None) -> dict:
    """The same check through Spark: totals and assigns in one job, the folds (anomalies
    and dependency edges) in one, then the cycle search (``_spark_cycles``).
    ``progress(line)``, if given, hears each phase's end and time."""
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
    folded = (rows.repartition("key").mapInArrow(_fold_partition(stats["final_polls"], assigns, names, examples,
                                              ww_deps), schema=FOLD_SCHEMA)
              .persist())
    try:
        found = folded.where(F.col("anomaly").isNotNull()).select("anomaly", "count",
                                                                  "examples").collect()
        per_key = []
        for r in found:
            if r["anomaly"] == MESSAGES:
                stats["messages_read"] += r["count"]
            else:
                per_key.append({r["anomaly"]: (r["count"], json.loads(r["examples"]))})
        phase("polls exploded and every key folded")
        per_key += _spark_cycles(spark, done, folded, refold, names, examples, phase)
    finally:
        folded.unpersist()
    return _result(per_key, stats, allowed, examples, require_final, file_names.values)


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
