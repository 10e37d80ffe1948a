"""Running checkers in Apache Spark (PySpark).

The history goes to Spark as Parquet (``checkers.parquet``). The
linearizability job groups the rows by key (P-compositionality) and hands
each group to a Python worker as an Arrow batch (``applyInPandas``), which
sorts it by index, pairs invokes with completions and runs the native
Wing-Gong-Lowe kernel; the driver combines the per-key verdicts. A key
whose search runs out of its budget is "unknown", never valid.

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
import threading
import time
import zipfile
from pathlib import Path

from .lin_model import CheckResult, KeyResult
from .linearizability import combine

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
    """One Spark session per process, created on first use.

    ``master``: None or ``local[N]`` (in this process's JVM), ``spark://HOST:PORT``
    (a standalone cluster; so are ``yarn`` and ``k8s://...``), or ``sc://HOST:PORT``
    (a Spark Connect server). Off this machine the checkers travel with the job
    as a zip of their Python files, so a cluster needs only the same Python
    dependencies.
    """
    global _SESSION
    if _SESSION is not None:
        return _SESSION
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    if master and master.startswith("sc://"):
        _SESSION = SparkSession.builder.remote(master).getOrCreate()
        _SESSION.addArtifacts(_package_zip(), pyfile=True)
        return _SESSION
    local = (master or "local").startswith("local")
    # On loopback (local mode, or a cluster whose master is on 127.0.0.1) the driver binds
    # 127.0.0.1; otherwise where the cluster can reach it (CHAOSKRAFT_SPARK_DRIVER_HOST, else
    # Spark's choice).
    loopback = local or any(h in master for h in ("//127.0.0.1:", "//localhost:"))
    if loopback:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.appName("chaoskraft")
               .master(master or "local[2]")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               # Local mode runs everything in the driver's JVM; 1 GB (Spark's default) is too
               # little to read the row groups of a history of millions of operations.
               .config("spark.driver.memory",
                       os.environ.get("CHAOSKRAFT_SPARK_DRIVER_MEMORY", "4g")))
    scratch = os.environ.get("CHAOSKRAFT_QUEUE_SCRATCH")
    if scratch:  # a directory every executor sees at this path: the queue check's key rows
        builder = builder.config("chaoskraft.queue.scratch", scratch)
    host = os.environ.get("CHAOSKRAFT_SPARK_DRIVER_HOST") or ("127.0.0.1" if loopback else None)
    if host:
        builder = (builder.config("spark.driver.host", host)
                   .config("spark.driver.bindAddress", "127.0.0.1" if loopback else "0.0.0.0"))
    _SESSION = builder.getOrCreate()
    _SESSION.sparkContext.setLogLevel("ERROR")
    if not local:
        # A real cluster's workers get the checkers as Python files (the Python search serves
        # where the native kernel is not built); local mode imports the installed package.
        _SESSION.sparkContext.addPyFile(_package_zip())
    return _SESSION


def stop_session() -> None:
    global _SESSION
    if _SESSION is not None:
        _SESSION.stop()
        _SESSION = None


class TaskProgress:
    """While a long Spark job runs, every ``every_s`` seconds one line to ``progress``: the
    time so far and how many tasks of the running stages are done (Spark's status tracker).
    A job done sooner says nothing; nor does a Spark Connect session (it has no tracker)."""

    def __init__(self, spark, progress, what: str, every_s: float = 15.0) -> None:
        self.spark, self.progress, self.what, self.every_s = spark, progress, what, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "TaskProgress":
        try:
            tracker = self.spark.sparkContext.statusTracker() if self.progress else None
        except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext in this process
            tracker = None
        if tracker is not None:
            self._thread = threading.Thread(target=self._tell, args=(tracker,), daemon=True,
                                            name="spark-progress")
            self._thread.start()
        return self

    def _tell(self, tracker) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every_s):
            try:
                stages = [s for s in (tracker.getStageInfo(i)
                                      for i in tracker.getActiveStageIds()) if s is not None]
            except Exception as exc:  # noqa: BLE001 - the job's own errors are raised by it
                self.progress(f"{self.what}: no more progress lines ({type(exc).__name__}: "
                              f"{exc})")
                return
            total = sum(s.numTasks for s in stages)
            if total:
                done = sum(s.numCompletedTasks for s in stages)
                self.progress(f"{self.what}: {time.monotonic() - started:.0f} s so far; {done} "
                              f"of {total} tasks of the running stage{'s' * (len(stages) > 1)}"
                              f" done")

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


RESULT_SCHEMA = ("key string, valid string, operations long, explored long, reason string, "
                 "counterexample string, diagram string")


def _check_key(pdf, model_name: str, initial, partition: bool, budget_s: float, nil_read: str):
    """Runs in a Python worker: one key's rows (a pandas frame) -> one result row."""
    import json

    import pandas as pd

    from checkers.history import decode_parquet_row
    from checkers.linearizability import check
    from checkers.models import get_model

    rows = sorted((decode_parquet_row(r) for r in pdf.to_dict("records")),
                  key=lambda r: r["index"])
    hm = get_model(model_name, initial, nil_read)
    parts = hm.operations(rows, partition)
    key = rows[0].get("key") if rows and partition else None
    if parts:
        r = check(hm.model(partition), (), timeout_s=budget_s, keyed=parts).keys[0]
    else:
        from checkers.lin_model import KeyResult
        r = KeyResult(key, True, 0)
    return pd.DataFrame([{
        "key": None if key is None else str(key),
        "valid": {True: "true", False: "false"}.get(r.valid, "unknown"),
        "operations": r.operations, "explored": r.explored, "reason": r.reason,
        "counterexample": json.dumps(r.counterexample), "diagram": json.dumps(r.diagram)}])


def _per_key(model_name, initial, partition, budget_s, nil_read):
    """A one-argument function of the group's frame (applyInPandas reads two as key, frame)."""
    def per_key(pdf):
        return _check_key(pdf, model_name, initial, partition, budget_s, nil_read)
    return per_key


def check_linearizability(parquet_path: str, model_name: str, *, initial=None, partition=True,
                          budget_s: float = 300.0, master: str | None = None,
                          nil_read: str = "unknown") -> CheckResult:
    """Rows grouped by key, each key checked by the kernel in a Python worker (Arrow batches
    through ``applyInPandas``; never the RDD pickling path): one Spark job per round."""
    import json

    from pyspark.sql import functions as F
    spark = spark_session(master)
    df = spark.read.parquet(str(parquet_path))
    df = df.filter(df.process != "nemesis")
    if not partition:
        df = df.withColumn("key", F.lit(None).cast("string"))

    # Iterative deepening: every key gets a short budget first, and only if none is found
    # invalid do the undecided keys get four times more (Spark tasks cannot cancel each other
    # as the in-process threads do, so a hard valid key must not delay a violation).
    decided: dict = {}
    round_budget, spent = min(1.0, budget_s), 0.0
    while True:
        todo = df if not decided else df.filter(~F.col("key").isin(
            [k for k, r in decided.items() if r.valid != "unknown" and k is not None]))
        per_key = _per_key(model_name, initial, partition, round_budget, nil_read)
        grouped = todo.groupBy("key")
        for r in grouped.applyInPandas(per_key, schema=RESULT_SCHEMA).collect():
            valid = {"true": True, "false": False}.get(r["valid"], "unknown")
            decided[r["key"]] = KeyResult(r["key"], valid, r["operations"],
                                          json.loads(r["counterexample"]), r["explored"],
                                          r["reason"], json.loads(r["diagram"]))
        spent += round_budget
        undecided = [k for k, r in decided.items() if r.valid == "unknown"]
        if any(r.valid is False for r in decided.values()) or not undecided or spent >= budget_s:
            break
        round_budget = min(round_budget * 4, budget_s - spent)
    keys = sorted(decided.values(), key=lambda k: repr(k.key))
    failed = any(k.valid is False for k in keys)
    for k in keys:
        if k.valid == "unknown":
            k.reason = ("stopped: another key is not linearizable" if failed
                        else "the search budget ran out")
    return CheckResult(combine(k.valid for k in keys), keys)
