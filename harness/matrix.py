"""The planted-bug matrix: does every planted bug get caught, and a correct node never?

``chaoskraft matrix --bugs all --seeds 1-5`` runs, for each bug and seed:

- bugs of the broker (``workload == "queue"`` in ``node_image.bugs``): a
  Docker queue campaign (``time_limit_s``, the queue workload's default
  nemesis unless ``TARGETED_QUEUE`` aims other faults at the bug) with the
  bug on every node, checked in Spark;
- the Raft, storage and controller bugs (``workload == "register"``): the
  deterministic simulator, ``sim_duration_s`` simulated seconds per seed,
  its invariants and the linearizability of its register history. As a
  nightly matrix gives each cell its nemesis, a bug may come with the
  faults aimed at it (``TARGETED``: they replace what the seed would draw);
- ``none``: the correct node in the Docker queue campaign.

It prints one row per bug: seeds detected, the anomaly classes or
invariants that reported it, and the median time to detect (queue: seconds
from the start of the workload to the earliest operation an anomaly example
names; simulator: simulated seconds until the invariant broke or, for
linearizability, until the first operation of the counterexample).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from node_image.bugs import BUGS


@dataclass
class Cell:
    bug: str
    seed: int
    detected: bool
    classes: list[str] = field(default_factory=list)
    detect_s: float | None = None
    where: str = ""
    verdict: str = ""


def _detect_time_queue(run_dir: Path, anomalies: dict, bad: list[str]) -> float | None:
    rows = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    start = next((r["time"] for r in rows if r["process"] != "nemesis"), 0)
    sends = {(r["key"], (r.get("value") or {}).get("value")): r["index"] for r in rows
             if r["f"] == "send" and r["type"] == "invoke" and isinstance(r.get("value"), dict)}
    indexes = []
    for name in bad:
        for ex in anomalies[name]["examples"]:
            found = [v for k, v in ex.items() if k.endswith("index") and isinstance(v, int)]
            if not found and "key" in ex:  # duplicate, inconsistent-offsets: name values only
                values = ex.get("values") or ([ex["value"]] if "value" in ex else [])
                found = [sends[(ex["key"], v)] for v in values if (ex["key"], v) in sends]
            indexes += found
    times = [rows[i]["time"] for i in indexes if 0 <= i < len(rows)]
    return (min(times) - start) / 1e9 if times else None


# Campaign fields aimed at a broker bug: divergent replica logs only show once the deposed
# leader leads again (depose-leader), and only where they differ: an idempotent producer
# re-sends what the deposed leader holds to the new one in the same order, so the logs agree
# even untruncated; producers without retries leave the deposed leader's records its own.
# An out-of-ISR replica is only elected while it is the one replica alive (strand-replica).
# The scenarios are in nemesis.faults.
TARGETED_QUEUE: dict[str, dict] = {
    "skip-epoch-truncation": {"nemesis": ["depose-leader"], "idempotent": False},
    "unclean-election": {"nemesis": ["strand-replica"]},
}


def queue_cell(bug: str | None, seed: int, time_limit_s: float, results_dir: str) -> Cell:
    from .config import resolve
    from .runner import run
    from .store import new_run_dir
    cfg = resolve(dict(TARGETED_QUEUE.get(bug, {})),
                  {"workload": "queue", "seed": seed, "time_limit_s": time_limit_s,
                   "bugs": [bug] if bug else None, "test": f"matrix-{bug or 'none'}",
                   "results_dir": results_dir})
    run_dir = new_run_dir(Path(results_dir), cfg.test, seed)
    with open(run_dir / "progress.log", "w") as quiet:
        code = run(cfg, stream=quiet, run_dir=run_dir)
    if code == 130:
        raise KeyboardInterrupt  # the run was interrupted: so is the matrix
    results = json.loads((run_dir / "results.json").read_text())
    q = results["checkers"]["queue"]
    bad = q["bad_anomalies"]
    return Cell(bug or "none", seed, results["valid"] is False, bad,
                _detect_time_queue(run_dir, q["anomalies"], bad) if bad else None,
                str(run_dir.resolve()), results["verdict"])


# Faults aimed at a bug, replacing the seed's draw: a deposed leader must see reads while
# partitioned away (read-without-barrier); a voter must restart mid-election (forget-vote).
TARGETED: dict[str, dict] = {
    "read-without-barrier": {"partition_mean_ms": 3000, "keys": 1, "clients": 5},
    "forget-vote": {"election_crash_prob": 0.5, "max_delay_ms": 400, "crash_mean_ms": 3000,
                    "down_ms": 3000, "partition_mean_ms": 3000, "partition_length_ms": 5000,
                    "drop_rate": 0.0, "observers": 0},
}
# Simulated seconds a bug needs at least (two candidates in one epoch are rare).
TARGETED_DURATION_S = {"forget-vote": 1200.0}


def sim_cell(bug: str, seed: int, duration_s: float) -> Cell:
    from .simulate import run_seed
    duration_s = max(duration_s, TARGETED_DURATION_S.get(bug, 0.0))
    o = run_seed(seed, 5, duration_s, frozenset([bug]), TARGETED.get(bug))
    if o.ok:
        return Cell(bug, seed, False, verdict="held")
    t = o.result.sim_ms / 1000
    if o.counterexample:
        hist = o.result.history
        t = min(hist[c["index"]]["time"] for c in o.counterexample) / 1000
    return Cell(bug, seed, True, [o.invariant], t, f"sim --seed {seed} --bug {bug}",
                "violated")


def run_matrix(bugs: list[str | None], seeds: list[int], time_limit_s: float,
               sim_duration_s: float, results_dir: str, out=sys.stdout) -> list[Cell]:
    cells = []
    for bug in bugs:
        for seed in seeds:
            started = time.monotonic()
            if bug is None or BUGS[bug].workload == "queue":
                cell = queue_cell(bug, seed, time_limit_s, results_dir)
            else:
                cell = sim_cell(bug, seed, sim_duration_s)
            cells.append(cell)
            print(f"{cell.bug} seed {seed}: {cell.verdict}"
                  + (f" ({', '.join(cell.classes)}; first anomalous op at {cell.detect_s:.1f} s)"
                     if cell.detected and cell.detect_s is not None else "")
                  + f" [{time.monotonic() - started:.0f} s wall] {cell.where}", file=out, flush=True)
    print_table(cells, out)
    return cells


def print_table(cells: list[Cell], out=sys.stdout) -> None:
    by_bug: dict[str, list[Cell]] = {}
    for c in cells:
        by_bug.setdefault(c.bug, []).append(c)
    print(f"\n{'bug':<24} {'checked by':<10} {'detected':<9} {'median time to detect':>21}  "
          f"anomalies / invariants (seeds)", file=out)
    for bug, cs in by_bug.items():
        detected = [c for c in cs if c.detected]
        classes = Counter(cls for c in detected for cls in c.classes)
        times = [c.detect_s for c in detected if c.detect_s is not None]
        how = "queue" if bug == "none" or BUGS[bug].workload == "queue" else "simulator"
        med = f"{statistics.median(times):.1f} s" if times else "-"
        cls = ", ".join(f"{k} ({v})" for k, v in classes.most_common(3)) or "-"
        if len(classes) > 3:
            cls += ", ..."
        print(f"{bug:<24} {how:<10} {len(detected)}/{len(cs):<7} {med:>21}  {cls}", file=out)
