"""The reference queue checker: one Spark SQL query per anomaly over one row per message.

This was chaoskraft's queue checker before ``checkers/queue/``; it is kept,
unchanged in what it computes, as the reference the differential tests
(tests/checkers/test_queue_differential.py) hold the fold to. The anomalies and their
definitions are ``checkers/queue/``'s. Input: the ``history.parquet`` of
``checkers.parquet`` (value as JSON text): ``send`` ops whose value is
``{"value": v, "offset": o}`` (the offset on ``ok``), ``poll`` and
``final-poll`` ops whose ``ok`` value maps keys to ``[[offset, value], ...]``
in read order, and ``assign`` ops (a process's consumer starts over).
"""
from __future__ import annotations

from .classes import ANOMALIES
SEND_SCHEMA = "struct<value:long,offset:long>"
POLL_SCHEMA = "map<string,array<array<long>>>"


def _rows(df, n: int) -> list[dict]:
    return [r.asDict(recursive=True) for r in df.limit(n).collect()]


def check_queue(spark, parquet_path: str, allowed=(), examples: int = 5) -> dict:
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    h = spark.read.parquet(str(parquet_path)).where(F.col("process") != "nemesis")
    done = h.where(F.col("type") != "invoke")
    sends = (done.where(F.col("f") == "send")
             .select("index", "process", "type", "key",
                     F.from_json("value", SEND_SCHEMA).alias("v"))
             .select("index", "process", "type", "key", F.col("v.value").alias("value"),
                     F.col("v.offset").alias("offset"))
             .persist(StorageLevel.MEMORY_AND_DISK))
    polls = (done.where(F.col("f").isin("poll", "final-poll") & (F.col("type") == "ok"))
             .select("index", "process", "f",
                     F.explode(F.from_json("value", POLL_SCHEMA)).alias("key", "msgs"))
             .select("index", "process", "f", "key", F.posexplode("msgs").alias("pos", "m"))
             .select("index", "process", "f", "key", "pos", F.col("m")[0].alias("offset"),
                     F.col("m")[1].alias("value"))
             .persist(StorageLevel.MEMORY_AND_DISK))
    ok_sends = sends.where(F.col("type") == "ok")
    observed = (polls.select("key", "offset", "value")
                .unionByName(ok_sends.where(F.col("offset").isNotNull())
                             .select("key", "offset", "value")))
    read_values = polls.select("key", "value").distinct()
    found: dict[str, object] = {}

    # Log structure.
    found["inconsistent-offsets"] = (
        observed.groupBy("key", "offset").agg(F.array_sort(F.collect_set("value")).alias("values"))
        .where(F.size("values") > 1).orderBy("key", "offset"))
    found["duplicate"] = (
        observed.groupBy("key", "value").agg(F.array_sort(F.collect_set("offset")).alias("offsets"))
        .where(F.size("offsets") > 1).orderBy("key", "value"))

    # Reads of writes that failed.
    failed = sends.where(F.col("type") == "fail").select(
        "key", "value", F.col("index").alias("send_index"))
    found["G1a"] = (polls.join(failed, ["key", "value"])
                    .select("key", "value", "offset", "send_index",
                            F.col("index").alias("poll_index"))
                    .orderBy("poll_index"))

    # Acknowledged sends never read.
    max_read = polls.groupBy("key").agg(F.max("offset").alias("max_read_offset"))
    never_read = (ok_sends.join(read_values, ["key", "value"], "left_anti")
                  .join(max_read, ["key"], "left")
                  .select("key", "value", "offset", F.col("index").alias("send_index"),
                          "max_read_offset"))
    found["lost-write"] = never_read.where(
        F.col("offset") < F.col("max_read_offset")).orderBy("key", "offset")
    found["unseen"] = never_read.where(
        F.col("max_read_offset").isNull() | F.col("offset").isNull()
        | (F.col("offset") >= F.col("max_read_offset"))).orderBy("key", "offset")
    final = polls.where(F.col("f") == "final-poll")
    has_final = done.where((F.col("f") == "final-poll") & (F.col("type") == "ok")).limit(1).count() > 0
    if has_final:
        found["durability"] = (ok_sends.join(final.select("key", "value").distinct(),
                                             ["key", "value"], "left_anti")
                               .select("key", "value", "offset",
                                       F.col("index").alias("send_index"))
                               .orderBy("key", "offset"))

    # Order within a process's sends.
    w_send = Window.partitionBy("process", "key").orderBy("index")
    found["nonmonotonic-send"] = (
        ok_sends.where(F.col("offset").isNotNull())
        .withColumn("prev_offset", F.lag("offset").over(w_send))
        .withColumn("prev_index", F.lag("index").over(w_send))
        .where(F.col("offset") <= F.col("prev_offset"))
        .select("process", "key", "prev_offset", "offset", "prev_index", "index").orderBy("index"))

    # Positions in the observed log, then order within and between polls.
    positions = (observed.select("key", "offset").distinct()
                 .withColumn("i", F.dense_rank().over(Window.partitionBy("key").orderBy("offset"))))
    reads = polls.join(positions, ["key", "offset"]).persist(StorageLevel.MEMORY_AND_DISK)
    w_int = Window.partitionBy("index", "key").orderBy("pos")
    inside = (reads.withColumn("prev_i", F.lag("i").over(w_int))
              .withColumn("prev_offset", F.lag("offset").over(w_int))
              .where(F.col("prev_i").isNotNull())
              .withColumn("delta", F.col("i") - F.col("prev_i"))
              .select("index", "process", "key", "prev_offset", "offset", "delta"))
    found["int-poll-skip"] = inside.where(F.col("delta") > 1).orderBy("index")
    found["int-nonmonotonic-poll"] = inside.where(F.col("delta") < 1).orderBy("index")

    per_op = (reads.where(F.col("f") == "poll").groupBy("index", "process", "key")
              .agg(F.min(F.struct("pos", "i", "offset")).alias("first"),
                   F.max(F.struct("pos", "i", "offset")).alias("last")))
    assigns = (done.where(F.col("f").isin("assign", "subscribe") & (F.col("type") == "ok"))
               .select("index", "process"))
    # A process's assign epoch: how many assigns it did before this poll.
    marks = (per_op.select("index", "process").distinct().withColumn("is_assign", F.lit(0))
             .unionByName(assigns.withColumn("is_assign", F.lit(1))))
    epochs = (marks.withColumn("epoch", F.sum("is_assign").over(
        Window.partitionBy("process").orderBy("index")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .where(F.col("is_assign") == 0).select("index", "epoch"))
    w_poll = Window.partitionBy("process", "epoch", "key").orderBy("index")
    between = (per_op.join(epochs, ["index"])
               .withColumn("prev", F.lag("last").over(w_poll))
               .withColumn("prev_index", F.lag("index").over(w_poll))
               .where(F.col("prev").isNotNull())
               .withColumn("delta", F.col("first.i") - F.col("prev.i"))
               .select("process", "key", "prev_index", "index",
                       F.col("prev.offset").alias("prev_last_offset"),
                       F.col("first.offset").alias("first_offset"), "delta"))
    found["poll-skip"] = between.where(F.col("delta") > 1).orderBy("index")
    found["nonmonotonic-poll"] = between.where(F.col("delta") < 1).orderBy("index")

    anomalies = {}
    for name in ANOMALIES:
        df = found.get(name)
        if df is None:
            continue
        n = df.count()
        if n:
            anomalies[name] = {"count": n, "examples": _rows(df, examples)}
    stats = {
        "sends": {t: sends.where(F.col("type") == t).count() for t in ("ok", "fail", "info")},
        "polls": done.where(F.col("f") == "poll").count(),
        "messages_read": polls.count(),
        "final_polls": has_final,
    }
    for df in (sends, polls, reads):
        df.unpersist()
    bad = sorted(a for a in anomalies if a not in allowed)
    if bad:
        valid: object = False
    elif not has_final:
        valid = "unknown"  # durability could not be established
    else:
        valid = True
    return {"valid": valid, "anomalies": anomalies, "bad_anomalies": bad,
            "allowed": sorted(allowed), "stats": stats}
