"""Reproduction: re-run a stored run with its resolved config and seed.

``chaoskraft reproduce RUN_DIR [--attempts N]`` reads ``RUN_DIR/config.yaml``
(every field the run used, the seed and planted bugs included), runs it
again into a new run directory, and compares:

- the anomaly classes: an invalid original is reproduced when a re-run is
  invalid with at least one of its classes (the queue checker's anomalies,
  or ``linearizability``); a valid original when the re-run is valid too;
- the generated operation sequences (``generated.jsonl``) and the fault
  schedule (``plan.json``), which depend on the config alone and must be
  identical; and what the processes invoked, which must be a prefix of
  what the generator produced for each of them.

It retries up to ``--attempts`` times (timing decides how faults meet
operations, so one re-run may miss what the next finds) and says after how
many attempts the anomaly came back. Exit 0 when it did, 1 when not.
"""
from __future__ import annotations

import sys
from pathlib import Path

from core.run_dir import GENERATED, PLAN, RunDir, RunDirError

from .config import CampaignError, resolve


def anomaly_classes(results: dict) -> list[str]:
    """The classes that made a run invalid: queue anomalies, or the failing checkers."""
    out: list[str] = []
    for name, result in results.get("checkers", {}).items():
        if "bad_anomalies" in result:  # a checker that names anomaly classes (the queue's)
            out += result.get("bad_anomalies", [])
        elif result.get("valid") is False:
            out.append(name)
    return sorted(out)


def load_run_config(run_dir: Path):
    try:
        values = RunDir(run_dir).config()
    except RunDirError as exc:
        raise CampaignError(str(exc)) from None
    return resolve(values, {})


def invoked_prefix_ok(run_dir: Path) -> tuple[bool, str]:
    """Whether every process invoked a prefix of what the generator made for it."""
    rd = RunDir(run_dir)
    generated: dict[int, list] = {}
    for _, r in rd.generated():
        generated.setdefault(r["process"], []).append(r)
    done: dict[int, int] = {}
    assigned: set[int] = set()
    for _, r in rd.history_rows():
        p = r["process"]
        if r.get("f") == "subscribe":  # the generator's assign, by a subscribe() consumer
            r["f"] = "assign"
        if r["type"] != "invoke" or not isinstance(p, int) or p not in generated \
                or r["f"] not in ("read", "write", "cas", "send", "poll", "assign", "txn"):
            continue
        if r["f"] == "assign" and p not in assigned:
            assigned.add(p)  # a queue process's first assign comes before its generator's
            continue
        if r["f"] == "txn":  # the generator's sends and polls, grouped
            ops = [{"f": m[0], "key": m[1] if m[0] == "send" else None,
                    "value": m[2] if m[0] == "send" else None} for m in r["value"]]
        else:
            ops = [{"f": r["f"], "key": r["key"] if r["f"] not in ("poll", "assign") else None,
                    "value": r["value"]["value"] if r["f"] == "send" else r["value"]}]
        for got in ops:
            i = done.get(p, 0)
            want = generated[p][i] if i < len(generated[p]) else None
            if want is None or {k: want[k] for k in got} != got:
                return False, f"process {p} operation {i}: invoked {got}, generated {want}"
            done[p] = i + 1
    return True, f"{sum(done.values())} invoked operations follow the generator"


def same_file(a: Path, b: Path) -> bool:
    return a.exists() and b.exists() and a.read_bytes() == b.read_bytes()


def reproduce(run_dir: Path, attempts: int = 1, results_dir: str | None = None,
              out=sys.stdout) -> int:
    from .runner import run, write_plan
    from .store import new_run_dir
    run_dir = Path(run_dir)
    cfg = load_run_config(run_dir)
    original = RunDir(run_dir).results()
    want = anomaly_classes(original)
    if not RunDir(run_dir).has(GENERATED):
        write_plan(cfg, run_dir)  # a run stored before these files existed: rebuild them
    print(f"reproducing {run_dir}: seed {cfg.seed}, verdict {original['verdict']}"
          + (f" ({', '.join(want)})" if want else ""), file=out, flush=True)
    for attempt in range(1, attempts + 1):
        again = new_run_dir(Path(results_dir or cfg.results_dir), cfg.test, cfg.seed)
        (again / "reproduces").write_text(str(run_dir.resolve()) + "\n")
        with open(again / "progress.log", "w") as progress:
            code = run(cfg, stream=progress, run_dir=again)
        if code == 130:
            print("interrupted", file=out)
            return 130
        results = RunDir(again).results()
        got = anomaly_classes(results)
        ops = same_file(RunDir(run_dir).file(GENERATED), RunDir(again).file(GENERATED))
        faults = same_file(RunDir(run_dir).file(PLAN), RunDir(again).file(PLAN))
        prefix, why = invoked_prefix_ok(again)
        if original["valid"] is False:
            back = results["valid"] is False and bool(set(got) & set(want))
        else:
            back = results["valid"] == original["valid"]
        print(f"attempt {attempt}: {results['verdict']}" + (f" ({', '.join(got)})" if got else "")
              + f"; same generated operations: {'yes' if ops else 'NO'}; same fault plan: "
              f"{'yes' if faults else 'NO'}; {why}; {again}", file=out, flush=True)
        if not (ops and faults and prefix):
            print("the re-run did not replay the original's operations or faults", file=out)
            return 1
        if back:
            print(f"reproduced in {attempt} attempt{'s' if attempt > 1 else ''}: "
                  f"{', '.join(sorted(set(got) & set(want))) or results['verdict']}", file=out)
            return 0
    print(f"not reproduced in {attempts} attempt{'s' if attempts > 1 else ''}", file=out)
    return 1
