"""Many runs at once, in Spark: ``chaoskraft analyze --across results/``.

Every run directory under the root (one holding ``results.json`` and
``config.yaml``) becomes rows of four Spark tables:

- ``runs``: run, test, workload, seed, started (from the directory name),
  verdict, nemesis (the packages), bugs;
- ``anomalies``: run, class, count, counted (false for an anomaly the run
  allowed); for the register workload the class is ``linearizability`` and
  the count its invalid keys;
- ``faults``: run, kind (one row per fault kind the run injected, from its
  nemesis rows; ``none`` for a run without faults);
- ``coverage``: run, event, count (the node events the run reached, from its
  results.json's coverage section: ``harness.coverage``);
- ``history``: every history row of every run (``history.parquet``), with
  its run.

The summary groups runs by workload and fault kind (a run counts once under
each kind it injected): runs, invalid runs, anomaly counts by class, and
availability (client operations the service answered, over all completed
ones: ok, plus fails that are a definite answer such as a cas whose
expected value did not match; computed from the history table). It is
printed, and saved with the small tables as Parquet in ``<root>/_across/``
(``summary.csv`` too). A second table says, per workload and fault kind, in how
many runs each node event was reached (``coverage.txt``): what a nightly matrix
never exercised. A run whose results.json or config.yaml is malformed is left
out and named (file, line and column) in the output and in
``_across/unreadable.txt``; ``chaoskraft analyze --across`` then exits 3.

For ad-hoc queries, in ``.venv/bin/pyspark`` (see docs/report.md for its environment) or any
Spark session::

    from harness.across import load_tables
    t = load_tables(spark, "results")        # registers temp views too
    spark.sql("select workload, count(*) from runs group by workload").show()
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from core.run_dir import RESULTS, RunDir, RunDirError
from workloads.registry import WORKLOADS

from .report import ANSWERED_FAILS, OPENS

FAULT_KINDS = OPENS  # the history row that opens a fault -> its package


def find_runs(root: Path) -> list[Path]:
    """Run directories under ``root`` (resolved, so ``latest`` links do not count twice)."""
    found = {p.parent.resolve() for p in Path(root).rglob(RESULTS)
             if RunDir(p.parent).is_analysed_run()}
    return sorted(found)


def run_rows(run_dirs: list[Path], unreadable: list[str] | None = None
             ) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    """The rows of the small tables. A run whose results.json or config.yaml is malformed
    raises, or, given ``unreadable``, is left out and its error (naming file, line and
    column) added there."""
    runs, anomalies, faults, coverage = [], [], [], []
    for d in run_dirs:
        rd = RunDir(d)
        try:
            results, cfg = rd.results(), rd.config()
        except RunDirError as exc:
            if unreadable is None:
                raise
            unreadable.append(str(exc))
            continue
        run = str(d)
        runs.append({"run": run, "test": cfg.get("test", ""), "workload": cfg.get("workload", ""),
                     "seed": int(cfg.get("seed") or 0), "started": d.name.split("-")[0],
                     "verdict": results.get("verdict", ""),
                     "nemesis": ",".join(cfg.get("nemesis") or []),
                     "bugs": ",".join(cfg.get("bugs") or [])})
        for name, r in results.get("checkers", {}).items():
            if "anomalies" in r:  # a checker that names anomaly classes (the queue's)
                bad = set(r.get("bad_anomalies", []))
                for cls, a in r.get("anomalies", {}).items():
                    anomalies.append({"run": run, "class": cls, "count": int(a.get("count", 0)),
                                      "counted": cls in bad})
            elif r.get("valid") is False:
                anomalies.append({"run": run, "class": name,
                                  "count": len(r.get("invalid_keys") or [1]), "counted": True})
        kinds = sorted({FAULT_KINDS[f["f"]] for f in results.get("stats", {}).get("faults", [])
                        if f.get("f") in FAULT_KINDS})
        for kind in kinds or ["none"]:
            faults.append({"run": run, "kind": kind})
        for event, n in (results.get("coverage") or {}).get("reached", {}).items():
            coverage.append({"run": run, "event": event, "count": int(n)})
    return runs, anomalies, faults, coverage


def load_tables(spark, root: str | Path, views: bool = True,
                unreadable: list[str] | None = None) -> dict:
    """The tables of every run under ``root``; ``unreadable``: see :func:`run_rows` (a run
    left out there has no history rows either)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    dirs = find_runs(Path(root))
    if not dirs:
        raise FileNotFoundError(f"no run directory (results.json and config.yaml) under {root}")
    runs, anomalies, faults, coverage = run_rows(dirs, unreadable)
    read = {r["run"] for r in runs}
    dirs = [d for d in dirs if str(d) in read]
    schemas = {
        "runs": "run string, test string, workload string, seed long, started string, "
                "verdict string, nemesis string, bugs string",
        "anomalies": "run string, class string, count long, counted boolean",
        "faults": "run string, kind string",
        "coverage": "run string, event string, count long",
    }
    tables = {name: spark.createDataFrame(rows, schemas[name])
              for name, rows in (("runs", runs), ("anomalies", anomalies), ("faults", faults),
                                 ("coverage", coverage))}
    paths = [str(d / "history.parquet") for d in dirs if (d / "history.parquet").exists()]
    if paths:
        hist = spark.read.parquet(*paths).withColumn(
            "run", F.regexp_replace(F.input_file_name(), r"^file:(//)?|/history\.parquet$", ""))
    else:
        hist = spark.createDataFrame([], T.StructType([T.StructField("run", T.StringType())]))
    tables["history"] = hist
    if views:
        for name, df in tables.items():
            df.createOrReplaceTempView(name)
    return tables


def summary(spark, tables: dict) -> list[dict]:
    from pyspark.sql import functions as F
    runs, faults, anomalies, hist = (tables[k] for k in ("runs", "faults", "anomalies", "history"))
    clients = hist.where((F.col("process") != "nemesis") & (F.col("type") != "invoke")
                         & ~F.col("f").isin("final-poll", "assign", "subscribe"))
    error = F.col("error") if "error" in hist.columns else F.lit(None)
    answered = (F.col("type") == "ok") | ((F.col("type") == "fail")
                                          & F.coalesce(error.isin(*ANSWERED_FAILS), F.lit(False)))
    per_run = clients.groupBy("run").agg(
        F.sum(F.when(answered, 1).otherwise(0)).alias("ok"),
        F.count(F.lit(1)).alias("completed"))
    base = runs.join(faults, "run").join(per_run, "run", "left")
    rows = base.groupBy("workload", "kind").agg(
        F.countDistinct("run").alias("runs"),
        F.countDistinct(F.when(F.col("verdict") == "invalid", F.col("run"))).alias("invalid"),
        F.sum(F.coalesce("ok", F.lit(0))).alias("ok"),
        F.sum(F.coalesce("completed", F.lit(0))).alias("completed")).collect()
    counted = anomalies.where("counted").join(faults, "run").join(runs.select("run", "workload"),
                                                                   "run")
    per_class = {}
    for r in counted.groupBy("workload", "kind", "class").agg(F.sum("count").alias("n")).collect():
        per_class.setdefault((r["workload"], r["kind"]), {})[r["class"]] = int(r["n"])
    out = []
    for r in sorted(rows, key=lambda r: (r["workload"], r["kind"])):
        out.append({"workload": r["workload"], "fault": r["kind"], "runs": int(r["runs"]),
                    "invalid": int(r["invalid"]),
                    "anomalies": per_class.get((r["workload"], r["kind"]), {}),
                    "availability": (round(r["ok"] / r["completed"], 4)
                                     if r["completed"] else None)})
    return out


def coverage_summary(spark, tables: dict) -> list[dict]:
    """Per workload and fault kind: every node event (``node_image.coverage.EVENTS``), in how
    many of the runs it was reached, and how often in all; an event no run of a cell reached
    is listed with 0 (what a nightly matrix never exercised)."""
    from pyspark.sql import functions as F
    from node_image.coverage import DATA_PLANE, EVENTS
    runs, faults, cov = tables["runs"], tables["faults"], tables["coverage"]
    cells = runs.join(faults, "run").groupBy("workload", "kind").agg(
        F.countDistinct("run").alias("runs")).collect()
    got = {(r["workload"], r["kind"], r["event"]): (int(r["runs"]), int(r["times"]))
           for r in cov.join(faults, "run").join(runs.select("run", "workload"), "run")
           .groupBy("workload", "kind", "event")
           .agg(F.countDistinct("run").alias("runs"), F.sum("count").alias("times")).collect()}
    out = []
    for c in sorted(cells, key=lambda r: (r["workload"], r["kind"])):
        workload = WORKLOADS.get(c["workload"])
        partitions = workload is None or workload.partitions
        for event in EVENTS:
            if event in DATA_PLANE and not partitions:
                continue
            n, times = got.get((c["workload"], c["kind"], event), (0, 0))
            out.append({"workload": c["workload"], "fault": c["kind"], "event": event,
                        "runs": int(c["runs"]), "reached_in": n, "times": times})
    return out


def format_coverage(rows: list[dict]) -> str:
    lines = [f"{'workload':<10} {'fault':<15} {'event':<25} {'reached in':>12} {'times':>7}"]
    for r in rows:
        mark = "" if r["reached_in"] else "  never"
        lines.append(f"{r['workload']:<10} {r['fault']:<15} {r['event']:<25} "
                     f"{r['reached_in']:>5} of {r['runs']:<4} {r['times']:>7}{mark}")
    return "\n".join(lines)


def format_summary(rows: list[dict]) -> str:
    lines = [f"{'workload':<10} {'fault':<12} {'runs':>5} {'invalid':>8} {'availability':>12}  "
             f"anomalies"]
    for r in rows:
        avail = f"{r['availability']:.3f}" if r["availability"] is not None else "-"
        anom = ", ".join(f"{k} {v}" for k, v in sorted(r["anomalies"].items())) or "-"
        lines.append(f"{r['workload']:<10} {r['fault']:<12} {r['runs']:>5} {r['invalid']:>8} "
                     f"{avail:>12}  {anom}")
    return "\n".join(lines)


def across(root: str | Path, spark_master: str | None = None, out=sys.stdout,
           unreadable: list[str] | None = None) -> list[dict]:
    """The summary of every readable run under ``root``, printed and saved; a run whose
    results.json or config.yaml is malformed is left out, named in the output, in
    ``_across/unreadable.txt`` and in ``unreadable`` if given."""
    from checkers.spark import spark_session
    root = Path(root)
    spark = spark_session(spark_master)
    skipped: list[str] = [] if unreadable is None else unreadable
    tables = load_tables(spark, root, unreadable=skipped)
    n = tables["runs"].count()
    print(f"across {root}: {n} runs", file=out, flush=True)
    if skipped:
        print(f"left out {len(skipped)} unreadable run(s):", file=out)
        for why in skipped:
            print(f"  {why}", file=out)
    rows = summary(spark, tables)
    text = format_summary(rows)
    print(text, file=out)
    cov_rows = coverage_summary(spark, tables)
    cov_text = format_coverage(cov_rows)
    print("\nnode events reached, per workload and fault kind:\n" + cov_text, file=out)
    dest = root / "_across"
    dest.mkdir(exist_ok=True)
    (dest / "coverage.txt").write_text(cov_text + "\n")
    (dest / "unreadable.txt").write_text("".join(f"{why}\n" for why in skipped))
    (dest / "coverage.json").write_text(json.dumps(cov_rows, indent=1) + "\n")
    for name in ("runs", "anomalies", "faults", "coverage"):
        frame = tables[name].toPandas()
        frame.attrs = {}  # Spark Connect leaves its plan metrics here, which Parquet cannot hold
        frame.to_parquet(dest / f"{name}.parquet")
    (dest / "summary.txt").write_text(text + "\n")
    (dest / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    with open(dest / "summary.csv", "w") as f:
        f.write("workload,fault,runs,invalid,availability,anomalies\n")
        for r in rows:
            anom = ";".join(f"{k}={v}" for k, v in sorted(r["anomalies"].items()))
            f.write(f"{r['workload']},{r['fault']},{r['runs']},{r['invalid']},"
                    f"{'' if r['availability'] is None else r['availability']},{anom}\n")
    print(f"saved: {dest}/summary.txt, summary.csv, summary.json, coverage.txt, coverage.json, "
          f"runs/anomalies/faults/coverage.parquet",
          file=out)
    return rows
