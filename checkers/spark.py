"""Running checkers in Apache Spark (PySpark).

The history goes to Spark as Parquet (``checkers.parquet``). The
linearizability job groups the rows by key (one Spark task per key:
P-compositionality), sorts each group by index, pairs invokes with
completions and runs the Wing-Gong-Lowe search in the task; the driver
combines the per-key verdicts. A key whose search runs out of its budget is
"unknown", never valid.

Spark runs in local mode (``local[2]``) unless a master URL is given. The
settings that matter on these machines: the workers' Python is this
interpreter, the driver binds 127.0.0.1, Arrow is on, shuffle partitions
are few, the UI is off. The ``checkers`` package is shipped to the workers
as a zip, so a real cluster needs only the same Python dependencies.
"""
from __future__ import annotations

import io
import os
import sys
import zipfile
from pathlib import Path

from .linearizability import CheckResult, KeyResult, check_single, combine

_SESSION = None


def _package_zip() -> str:
    root = Path(__file__).resolve().parent
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted(root.glob("*.py")):
            z.write(f, f"checkers/{f.name}")
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"chaoskraft-checkers-{os.getpid()}.zip"
    out.write_bytes(buf.getvalue())
    return str(out)


def spark_session(master: str | None = None):
    """One Spark session per process, created on first use."""
    global _SESSION
    if _SESSION is not None:
        return _SESSION
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.appName("chaoskraft")
               .master(master or "local[2]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.python.worker.reuse", "true")
               # Local mode runs everything in the driver's JVM; 1 GB (Spark's default) is too
               # little to read the row groups of a history of millions of operations.
               .config("spark.driver.memory",
                       os.environ.get("CHAOSKRAFT_SPARK_DRIVER_MEMORY", "4g")))
    _SESSION = builder.getOrCreate()
    _SESSION.sparkContext.setLogLevel("ERROR")
    _SESSION.sparkContext.addPyFile(_package_zip())
    return _SESSION


def stop_session() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


def _check_group(args):
    """Runs on a worker: one key's rows -> KeyResult as a dict."""
    import time as _time

    from checkers.history import decode_parquet_row
    from checkers.models import get_model

    (key, rows), model_name, initial, partition, budget_s = args
    rows = sorted((decode_parquet_row(r) for r in rows), key=lambda r: r["index"])
    hm = get_model(model_name, initial)
    parts = hm.operations(rows, partition)
    ops = parts[0][1] if parts else []
    r = check_single(hm.model(partition), ops, _time.monotonic() + budget_s, key)
    return r.__dict__


def check_linearizability(parquet_path: str, model_name: str, *, initial=None, partition=True,
                          budget_s: float = 300.0, master: str | None = None) -> CheckResult:
    spark = spark_session(master)
    df = spark.read.parquet(str(parquet_path))
    df = df.filter(df.process != "nemesis")
    if not partition:
        from pyspark.sql import functions as F
        df = df.withColumn("key", F.lit(None).cast("string"))
    grouped = (df.rdd.map(lambda r: (r["key"], r.asDict()))
               .groupByKey().mapValues(list)).cache()
    # Iterative deepening: every key gets a short budget first; only if none is found
    # invalid do the undecided keys get a longer one. One invalid key decides the
    # verdict, so an expensive valid key never delays reporting a violation.
    decided: dict = {}
    round_budget = min(1.0, budget_s)
    spent = 0.0
    while True:
        todo = grouped.filter(lambda kv, done=frozenset(map(repr, decided)): repr(kv[0]) not in done)
        b = round_budget
        results = todo.map(lambda kv: _check_group((kv, model_name, initial, partition, b))).collect()
        for r in results:
            decided[r["key"]] = KeyResult(**r)
        spent += round_budget
        undecided = [k for k, r in decided.items() if r.valid == "unknown"]
        if any(r.valid is False for r in decided.values()) or not undecided or spent >= budget_s:
            break
        for k in undecided:
            del decided[k]
        round_budget = min(round_budget * 4, budget_s - spent)
    grouped.unpersist()
    keys = sorted(decided.values(), key=lambda k: repr(k.key))
    return CheckResult(combine(k.valid for k in keys), keys)
