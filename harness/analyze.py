"""Analysis of a stored run: history -> Parquet -> checkers -> results.json."""
from __future__ import annotations

from pathlib import Path

from core.run_dir import CONFIG, FAULTS, LIVENESS, PLAN, RunDir
from core.verdict import WORD
from workloads.registry import WORKLOADS

from .config import RunConfig
from .coverage import coverage, describe


def fault_summary(run_dir: Path) -> dict | None:
    """Planned fault steps (plan.json) and what became of each (faults.json): happened, or
    skipped and why. None for a run stored before faults.json existed."""
    rd = RunDir(run_dir)
    if not rd.has(PLAN) or not rd.has(FAULTS):
        return None
    plan = rd.plan()
    outcomes = {o["step"]: o for o in rd.faults()}
    steps = []
    for st in plan:
        o = outcomes.get(st["index"], {"status": "skipped",
                                       "why": "never started (the harness stopped first)"})
        steps.append({"step": st["index"], "kind": st["kind"], "spec": st.get("spec"),
                      "at_s": st.get("at_s"), "status": o["status"], "why": o.get("why", ""),
                      "nodes": o.get("nodes")})
    happened = sum(1 for x in steps if x["status"] == "happened")
    not_reached = sum(1 for x in steps if x["status"] == "not-reached")
    return {"planned": len(steps), "happened": happened, "not_reached": not_reached,
            "skipped": len(steps) - happened - not_reached, "steps": steps}


def missed_scenarios(faults: dict | None) -> list[str]:
    """The planned scenario steps (packages aimed at a state: ``aims_at``) whose state never
    came, each said in words. Ordinary faults drawn at random that could not act are
    reported in the fault summary but make no run unknown."""
    from nemesis.packages import PACKAGES
    out = []
    for x in (faults or {}).get("steps", []):
        aims = getattr(PACKAGES.get(x["kind"]), "aims_at", "")
        if aims and x["status"] != "happened":
            out.append(f"step {x['step']} ({x['kind']}, aimed at {aims}) was {x['status']}: "
                       f"{x['why']}")
    return out


def missed_aims(coverage: dict | None, aims: dict[str, str]) -> list[str]:
    """The states the workload's own plan aims at (``Workload.aims_at``: event -> why) that
    no node reported reaching. Without node logs nothing can be said, so nothing is."""
    if coverage is None:
        return []
    return [f"{event} never came ({why})" for event, why in aims.items()
            if event not in coverage["reached"]]


def gates(results: dict, stats: dict, faults: dict | None, log=print,
          aims: dict[str, str] | None = None) -> dict:
    """Jepsen's stats gate and the fault gate: a run that tested nothing is never valid.

    - no client operation succeeded: unknown;
    - faults were planned and none happened: unknown;
    - a planned scenario never reached the state it aims at (``missed_scenarios``): unknown;
    - a state the workload's own plan aims at (``aims``, ``missed_aims``) never came:
      unknown.

    A violation found stays invalid: it was found, faults or not.
    """
    reasons = []
    if stats.get("ok", 0) == 0:
        reasons.append("no client operation succeeded: the run tested nothing")
    if faults and faults["planned"] and not faults["happened"]:
        reasons.append(f"none of the {faults['planned']} planned faults happened")
    reasons += [f"planned scenario not reached: {m}" for m in missed_scenarios(faults)]
    reasons += [f"planned state not reached: {m}"
                for m in missed_aims(results.get("coverage"), aims or {})]
    if reasons:
        results["gates"] = reasons
        for r in reasons:
            log(f"analysis: gate: {r}")
        if results["valid"] is True:
            results["valid"], results["verdict"] = "unknown", WORD["unknown"]
    return results


def liveness_verdict(run_dir: Path, results: dict, log=print) -> None:
    """liveness.json (the campaign's liveness phase): something still stuck once every fault
    was healed and the bound ran out is a liveness anomaly: the run is invalid, whatever
    the safety checkers said. A run stored before the phase existed, or with it switched
    off, says so in ``results["liveness"]``."""
    rd = RunDir(run_dir)
    if not rd.has(LIVENESS):
        return
    live = rd.liveness()
    results["liveness"] = live
    if not live.get("checked"):
        log("analysis: liveness: not checked")
        return
    stuck = live.get("stuck") or []
    if not stuck:
        log(f"analysis: liveness: whole again after {live.get('took_s')} s")
        return
    for s in stuck:
        log(f"analysis: liveness anomaly: {s['what']}: {s['detail']} (stuck {s.get('since_s')} s "
            f"when the {live.get('bound_s')} s bound ran out)")
    results["valid"], results["verdict"] = False, WORD[False]


def _run_config(run_dir: Path) -> dict:
    rd = RunDir(run_dir)
    return rd.config() if rd.has(CONFIG) else {}


def _finish(run_dir: Path, results: dict, stats: dict, log, cfg: dict | None = None) -> dict:
    cfg = cfg or {}
    workload = WORKLOADS[cfg.get("workload") or RunConfig.workload]
    aims = workload.aims_at(cfg)
    cov = coverage(run_dir, list(cfg.get("nemesis") or []), workload.partitions,
                   (workload.name, list(aims)))
    if cov is not None:
        results["coverage"] = cov
        log(f"analysis: coverage: {describe(cov)}")
    faults = fault_summary(run_dir)
    if faults is not None:
        results["faults"] = faults
        log(f"analysis: faults: {faults['happened']} of {faults['planned']} planned happened"
            + "".join(f"; step {x['step']} {x['kind']} {x['status']}: {x['why']}"
                      for x in faults["steps"] if x["status"] != "happened"))
    liveness_verdict(run_dir, results, log)
    gates(results, stats, faults, log, aims=aims)
    RunDir(run_dir).write_results(results)
    return results


def analyze(run_dir: Path, *, engine: str = "auto", spark_master: str | None = None,
            budget_s: float = 300.0, log=print) -> dict:
    """Check the run, write results.json, then report.html beside it."""
    results = _analyze(Path(run_dir), engine=engine, spark_master=spark_master,
                       budget_s=budget_s, log=log)
    from .frames import one_pass
    from .report.page import ReportPass
    from .timeline import TimelinePass
    try:  # one read of the history for both pages
        report, timeline = one_pass(Path(run_dir), [ReportPass(run_dir), TimelinePass(run_dir)],
                                    log, "report and timeline")
        log(f"report: {report}; timeline: {timeline}")
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
    workload = WORKLOADS[cfg.get("workload") or RunConfig.workload]
    results, stats = workload.check(run_dir, cfg, engine=engine, spark_master=spark_master,
                                    budget_s=budget_s, log=log)
    return _finish(run_dir, results, stats, log, cfg)
