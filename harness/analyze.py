"""Analysis of a stored run: history -> Parquet -> checkers -> results.json."""
from __future__ import annotations

import json
from pathlib import Path

from checkers.history import HistoryError, iter_history, read_history
from checkers.parquet import HistoryWriter, write_parquet

from .check_cmd import run_check

WORD = {True: "valid", False: "invalid", "unknown": "unknown"}


class Stats:
    """The history's totals, a row at a time: client rows by type, and the faults begun."""

    def __init__(self) -> None:
        self.rows = 0
        self.counts = dict.fromkeys(("invoke", "ok", "fail", "info"), 0)
        self.faults: list[dict] = []

    def add(self, r: dict) -> None:
        self.rows += 1
        if r.get("process") == "nemesis":
            if r.get("type") == "invoke":
                self.faults.append({"f": r["f"], "value": r.get("value")})
        elif r.get("type") in self.counts:
            self.counts[r["type"]] += 1

    def result(self) -> dict:
        return {"rows": self.rows, **self.counts, "faults": self.faults}


def history_stats(rows) -> dict:
    s = Stats()
    for r in rows:
        s.add(r)
    return s.result()


CHUNK = 100_000  # rows held at once while a queue history streams into its Parquet files


def fault_summary(run_dir: Path) -> dict | None:
    """Planned fault steps (plan.json) and what became of each (faults.json): happened, or
    skipped and why. None for a run stored before faults.json existed."""
    plan_path, out_path = run_dir / "plan.json", run_dir / "faults.json"
    if not plan_path.exists() or not out_path.exists():
        return None
    plan = json.loads(plan_path.read_text())
    outcomes = {o["step"]: o for o in json.loads(out_path.read_text())}
    steps = []
    for st in plan:
        o = outcomes.get(st["index"], {"status": "skipped",
                                       "why": "never started (the harness stopped first)"})
        steps.append({"step": st["index"], "kind": st["kind"], "spec": st.get("spec"),
                      "at_s": st.get("at_s"), "status": o["status"], "why": o.get("why", ""),
                      "nodes": o.get("nodes")})
    happened = sum(1 for x in steps if x["status"] == "happened")
    return {"planned": len(steps), "happened": happened, "skipped": len(steps) - happened,
            "steps": steps}


def gates(results: dict, stats: dict, faults: dict | None, log=print) -> dict:
    """Jepsen's stats gate and the fault gate: a run that tested nothing is never valid.

    - no client operation succeeded: unknown;
    - faults were planned and none happened: unknown (a violation found stays invalid:
      it was found, faults or not).
    """
    reasons = []
    if stats.get("ok", 0) == 0:
        reasons.append("no client operation succeeded: the run tested nothing")
    if faults and faults["planned"] and not faults["happened"]:
        reasons.append(f"none of the {faults['planned']} planned faults happened")
    if reasons:
        results["gates"] = reasons
        for r in reasons:
            log(f"analysis: gate: {r}")
        if results["valid"] is True:
            results["valid"], results["verdict"] = "unknown", WORD["unknown"]
    return results


def _run_config(run_dir: Path) -> dict:
    import yaml
    path = run_dir / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _stream_queue(run_dir: Path, typed: Path) -> dict:
    """history.jsonl -> history.parquet and the typed queue.parquet, CHUNK rows at a time;
    returns the history's stats."""
    from checkers import queue_history
    st = Stats()
    hw, qw = HistoryWriter(run_dir / "history.parquet"), queue_history.Writer(typed)
    try:
        chunk: list[dict] = []
        for r in iter_history(run_dir / "history.jsonl"):
            st.add(r)
            chunk.append(r)
            if len(chunk) >= CHUNK:
                hw.write(chunk)
                qw.write(chunk)
                chunk = []
        hw.write(chunk)
        qw.write(chunk)
    except BaseException:
        qw.abort()
        raise
    finally:
        hw.close()
    qw.close()
    return st.result()


def typed_stats(path: Path) -> dict:
    """``Stats`` of a typed queue history, a row group at a time, without decoding its rows."""
    import pyarrow.parquet as pq
    st = Stats()
    for b in pq.ParquetFile(str(path)).iter_batches(batch_size=CHUNK,
                                                    columns=["process", "type", "f", "extra"]):
        d = b.to_pandas()
        st.rows += len(d)
        client = d["process"].notna()
        for t, n in d.loc[client, "type"].value_counts().items():
            if t in st.counts:
                st.counts[t] += int(n)
        for f, extra in d.loc[~client & (d["type"] == "invoke"), ["f", "extra"]].itertuples(
                index=False):
            st.faults.append({"f": f, "value": json.loads(extra).get("value") if extra else None})
    return st.result()


def analyze_queue(run_dir: Path, cfg: dict, *, spark_master: str | None,
                  engine: str = "auto", log=print) -> dict:
    """Streams history.jsonl once into history.parquet and the typed queue.parquet, in
    chunks of CHUNK rows (a history of any length in bounded memory), then checks. A run
    stored as a typed queue.parquet alone (written straight to Parquet) is checked as it is."""
    from checkers import queue_history
    from checkers.queue import AUTO_SPARK_ROWS, check_queue, default_allowed
    allowed = cfg.get("allowed_anomalies")
    if allowed is None:
        allowed = default_allowed(cfg.get("idempotent", True))
    typed = run_dir / "queue.parquet"
    if (run_dir / "history.jsonl").exists():
        stats = _stream_queue(run_dir, typed)
        log(f"analysis: {stats['rows']} history rows; wrote history.parquet and queue.parquet")
    elif typed.exists() and queue_history.is_typed(typed):
        stats = typed_stats(typed)
        log(f"analysis: {stats['rows']} history rows, stored as queue.parquet")
    else:
        raise HistoryError(f"{run_dir}: neither history.jsonl nor a typed queue.parquet")
    if engine == "auto":
        engine = "spark" if spark_master or stats["rows"] > AUTO_SPARK_ROWS else "local"
    where = f"in Spark ({spark_master or 'local[2]'})" if engine == "spark" else "in process"
    log(f"analysis: queue checkers {where}; allowed: {', '.join(allowed) or 'none'}")
    spark = None
    if engine == "spark":
        from checkers.spark import spark_session
        spark = spark_session(spark_master)
    result = check_queue(spark, str(typed), allowed=tuple(allowed), engine=engine)
    for name, a in result["anomalies"].items():
        mark = "" if name in result["bad_anomalies"] else " (allowed)"
        log(f"analysis: {name}{mark}: {a['count']}; e.g. {a['examples'][0]}")
    if not result["stats"]["final_polls"]:
        log("analysis: no final poll succeeded, so durability is unknown")
    results = {"valid": result["valid"], "verdict": WORD[result["valid"]],
               "checkers": {"queue": result}, "stats": stats}
    return _finish(run_dir, results, stats, log)


def _finish(run_dir: Path, results: dict, stats: dict, log) -> dict:
    faults = fault_summary(run_dir)
    if faults is not None:
        results["faults"] = faults
        log(f"analysis: faults: {faults['happened']} of {faults['planned']} planned happened"
            + "".join(f"; step {x['step']} {x['kind']} skipped: {x['why']}"
                      for x in faults["steps"] if x["status"] != "happened"))
    gates(results, stats, faults, log)
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    return results


def analyze(run_dir: Path, *, engine: str = "auto", spark_master: str | None = None,
            budget_s: float = 300.0, log=print) -> dict:
    """Check the run, write results.json, then report.html beside it."""
    results = _analyze(Path(run_dir), engine=engine, spark_master=spark_master,
                       budget_s=budget_s, log=log)
    from .report import render
    from .timeline import write_timeline
    try:
        log(f"report: {render(Path(run_dir))}; timeline: {write_timeline(Path(run_dir))}")
    except Exception:  # noqa: BLE001 - the verdict stands; the report's failure is shown whole
        import traceback
        log("report: could not be made (the verdict above stands):\n" + traceback.format_exc())
    log(f"analysis: peak memory of this process (RSS): {peak_rss_mb():.0f} MB")
    return results


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts afresh at exec (getrusage's
    ru_maxrss carries the peak of the process that forked us across exec)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _analyze(run_dir: Path, *, engine: str, spark_master: str | None, budget_s: float,
             log) -> dict:
    cfg = _run_config(run_dir)
    if cfg.get("workload") == "queue":
        return analyze_queue(run_dir, cfg, spark_master=spark_master, engine=engine, log=log)
    rows = read_history(run_dir / "history.jsonl")
    log(f"analysis: {len(rows)} history rows; writing history.parquet")
    write_parquet(rows, run_dir / "history.parquet")
    log(f"analysis: linearizability (cas-register per key) with {engine}"
        + (f" on {spark_master}" if spark_master else (" (local[2])" if engine == "spark" else "")))
    # A nil read in our own runs means "the key holds no value": checked as a value.
    result = run_check(rows, "cas-register", engine=engine, master=spark_master, budget_s=budget_s,
                       nil_read="value", independent=False, strict=True)
    keys = result.keys
    lin = {
        "valid": result.valid,
        "model": "cas-register",
        "keys": len(keys),
        "invalid_keys": [k.key for k in keys if k.valid is False],
        "unknown_keys": [k.key for k in keys if k.valid == "unknown"],
        "unknown_reasons": {str(k.key): k.reason for k in keys if k.valid == "unknown"},
        "counterexamples": {str(k.key): k.counterexample for k in keys if k.valid is False},
        "diagrams": {str(k.key): k.diagram for k in keys if k.valid is False and k.diagram},
    }
    if result.reason:
        lin["reason"] = result.reason
    for k in keys:
        if k.valid is False:
            log(f"analysis: key {k.key} is not linearizable; counterexample:")
            for c in k.counterexample:
                log(f"    {c['role']:>16}: process {c['process']} {c['op']} (history index {c['index']})")
    stats = history_stats(rows)
    results = {"valid": result.valid, "verdict": WORD[result.valid],
               "checkers": {"linearizability": lin}, "stats": stats}
    return _finish(run_dir, results, stats, log)
