"""The planted-bug matrix: does every planted bug get caught, and a correct node never?

``chaoskraft matrix --bugs all --seeds 1-5`` runs, for each bug and seed:

- the bugs marked ``docker`` in ``node_image.bugs`` (the broker's, and a
  controller bug the register campaign shows): their workload's default Docker
  campaign (``time_limit_s``, no faults chosen: what a user gets from
  ``chaoskraft run --workload W``) with the bug on every node, each in its own
  ``chaoskraft run`` process, ``jobs`` at a time;
- the other Raft, storage and controller bugs: the deterministic simulator,
  ``sim_duration_s`` simulated seconds per seed, its invariants and the
  linearizability of its register history. As a nightly matrix gives each
  cell its nemesis, a bug may come with the faults aimed at it (``TARGETED``:
  they replace what the seed would draw);
- ``none``: the correct node in the default Docker campaign of
  ``config.CONTROL_WORKLOAD``.

A bug that only some faults can show (``needs_faults``, a clock that steps
back for ``lease-read``) comes with its own campaign file, which its cells run
instead of the workload's default; ``--campaign FILE`` runs every Docker cell
under that file instead. ``--without PKG`` drops packages from the campaign a
cell runs (the file is written beside the results): a bug that needs one of
them must then go unseen in every seed, the control row for its ``needs_faults``.

It prints one row per bug: seeds detected, the anomaly classes or
invariants that reported it, and the median time to detect (queue: seconds
from the start of the workload to the earliest operation an anomaly example
names; register: to the earliest operation of the
counterexample; simulator: simulated seconds until the invariant broke or, for
linearizability, until the first operation of the counterexample).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from core.run_dir import RunDir
from node_image.bugs import BUGS
from workloads.registry import WORKLOADS

from .config import CONTROL_WORKLOAD


@dataclass
class Cell:
    bug: str
    seed: int
    detected: bool
    classes: list[str] = field(default_factory=list)
    detect_s: float | None = None
    where: str = ""
    verdict: str = ""
    checked_by: str = ""  # the workload whose checker judged the run, or "simulator"


def bug_groups() -> dict[str, list[str | None]]:
    """The names ``--bugs`` takes beside bug names: all, each workload's (the bugs its Docker
    campaigns are meant to show), docker, none."""
    groups: dict[str, list[str | None]] = {"all": list(BUGS)}
    for name in WORKLOADS:
        groups[name] = [n for n, b in BUGS.items() if b.workload == name and b.docker]
    groups["docker"] = [n for n in BUGS if docker_workload(n)]
    groups["none"] = [None]
    return groups


def docker_workload(bug: str | None) -> str | None:
    """The workload whose default Docker campaign must catch the bug, or None (simulator)."""
    if bug is None:
        return CONTROL_WORKLOAD
    return BUGS[bug].workload if BUGS[bug].docker else None


ROOT = Path(__file__).resolve().parent.parent


def expected_detection(bug: str | None, without=()) -> bool:
    """Must the cell find the bug: a bug, unless a package it needs was taken away."""
    return bug is not None and not set(BUGS[bug].needs_faults) & set(without)


def cell_campaign(bug: str | None, campaign: str | None, without, results_dir: str) -> str | None:
    """The campaign file a Docker cell runs: ``campaign``, else the bug's own, else None (the
    workload's default); without the packages in ``without`` (a copy written to
    ``results_dir``). Raises ValueError naming the file and package when that cannot be."""
    path = campaign or (BUGS[bug].campaign if bug else None)
    if path is None:
        if without:
            raise ValueError(f"--without {','.join(without)}: the {bug or 'none'} cells run the "
                             f"workload's default campaign; give --campaign FILE")
        return None
    # --campaign is the user's path (from where they are); a bug's own is the project's.
    path = os.path.abspath(campaign) if campaign else str(ROOT / path)
    if not os.path.isfile(path):
        raise ValueError(f"--campaign {campaign}: no such file" if campaign
                         else f"{bug}'s campaign {path} is missing")
    if not without:
        return path
    data = yaml.safe_load(Path(path).read_text())
    entries = data.get("nemesis") or []
    names = [e if isinstance(e, str) else e.get("package") for e in entries]
    for w in without:
        if w not in names:
            raise ValueError(f"{path}: --without {w}: the campaign has no package {w!r} "
                             f"(it has {', '.join(map(str, names)) or 'none'})")
    data["nemesis"] = [e for e, n in zip(entries, names) if n not in without]
    out = Path(results_dir) / f"{Path(path).stem}-without-{'-'.join(without)}.yaml"
    out.write_text(f"# {path} without {', '.join(without)} (chaoskraft matrix --without)\n"
                   + yaml.safe_dump(data, sort_keys=False))
    return str(out.resolve())


def _cell_command(bug: str | None, seed: int, time_limit_s: float, results_dir: str,
                  campaign: str | None = None) -> list[str]:
    """The campaign file given, else the workload's default campaign, as a user gets it: no
    faults chosen."""
    cmd = [sys.executable, "-m", "harness.cli", "run"]
    cmd += ["--campaign", campaign] if campaign else ["--workload", docker_workload(bug)]
    cmd += ["--seed", str(seed), "--time-limit", f"{time_limit_s:g}",
            "--test", f"matrix-{bug or 'none'}", "--results-dir", results_dir]
    return cmd + (["--bug", bug] if bug else [])


def docker_cell(bug: str | None, seed: int, time_limit_s: float, results_dir: str,
                log_dir: Path, children: set, campaign: str | None = None) -> Cell:
    """One campaign in its own ``chaoskraft run`` process (so cells run side by side, and an
    interrupted matrix interrupts each: teardown, history kept); its output goes to the run
    directory's ``progress.log``."""
    log = log_dir / f"{bug or 'none'}-seed{seed}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(_cell_command(bug, seed, time_limit_s, results_dir, campaign),
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
        children.add(proc)
        try:
            code = proc.wait()
        finally:
            children.discard(proc)
    text = log.read_text()
    found = re.search(r"run directory: (\S+)", text)
    if code == 130:
        raise KeyboardInterrupt
    if code not in (0, 1, 2) or found is None:
        # The campaign itself failed (no verdict): the cell says so, keeps the output, and the
        # matrix goes on; it counts as not detected.
        kept = Path(results_dir) / "matrix-errors" / log.name
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(log, kept)
        last = [line for line in text.splitlines() if "run failed" in line or "Error" in line]
        return Cell(bug or "none", seed, False, [], None, str(kept.resolve()),
                    f"error (exit {code}{': ' + last[-1].strip() if last else ''})")
    run_dir = Path(found.group(1))
    shutil.move(log, run_dir / "progress.log")
    rd = RunDir(run_dir)
    results = rd.results()
    # the workload the run ran: a --campaign file may name another than the bug's default
    workload = rd.config()["workload"]
    bad, detect = WORKLOADS[workload].detection(run_dir, results)
    if (results.get("liveness") or {}).get("stuck"):
        bad = list(bad) + ["liveness"]  # found by the liveness phase (harness.analyze)
    return Cell(bug or "none", seed, results["valid"] is False, bad, detect,
                str(run_dir.resolve()), results["verdict"], workload)


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
    options = {**dict(BUGS[bug].sim_options if bug in BUGS else ()), **TARGETED.get(bug, {})}
    o = run_seed(seed, 5, duration_s, frozenset([bug]), options or None)
    if o.ok:
        return Cell(bug, seed, False, verdict="held", checked_by="simulator")
    t = o.result.sim_ms / 1000
    if o.counterexample:
        hist = o.result.history
        t = min(hist[c["index"]]["time"] for c in o.counterexample) / 1000
    return Cell(bug, seed, True, [o.invariant], t, f"sim --seed {seed} --bug {bug}",
                "violated", "simulator")


def _line(cell: Cell, wall_s: float) -> str:
    return (f"{cell.bug} seed {cell.seed}: {cell.verdict}"
            + (f" ({', '.join(cell.classes)}; first anomalous op at {cell.detect_s:.1f} s)"
               if cell.detected and cell.detect_s is not None else "")
            + f" [{wall_s:.0f} s wall] {cell.where}")


def run_matrix(bugs: list[str | None], seeds: list[int], time_limit_s: float,
               sim_duration_s: float, results_dir: str, out=sys.stdout, jobs: int = 1,
               campaign: str | None = None, without=()) -> list[Cell]:
    """Every bug over every seed: Docker campaigns ``jobs`` at a time (each in its own
    process), simulator seeds in this one. Rows print as cells end; the table at the end
    lists the bugs in the order given. ``campaign``, ``without``: see the module's doc."""
    Path(results_dir).mkdir(parents=True, exist_ok=True)
    campaigns = {b: cell_campaign(b, campaign, without, results_dir)
                 for b in bugs if docker_workload(b)}
    docker = [(b, s) for b in bugs for s in seeds if docker_workload(b)]
    sim = [(b, s) for b in bugs for s in seeds if not docker_workload(b)]
    done: dict[tuple, Cell] = {}
    children: set = set()
    total = len(docker) + len(sim)

    def report(cell: Cell, started: float) -> None:
        print(f"[{len(done)}/{total}] " + _line(cell, time.monotonic() - started),
              file=out, flush=True)

    def one(bug, seed, log_dir):
        started = time.monotonic()
        cell = docker_cell(bug, seed, time_limit_s, results_dir, log_dir, children,
                           campaigns[bug])
        done[(bug, seed)] = cell
        report(cell, started)

    if docker:
        print(f"matrix: {len(docker)} Docker campaigns ({time_limit_s:g} s each, {jobs} at a "
              f"time), {len(sim)} simulator seeds", file=out, flush=True)
        for b, path in campaigns.items():
            if path is not None:
                print(f"matrix: {b or 'none'} runs {path}", file=out, flush=True)
    with tempfile.TemporaryDirectory(prefix="matrix-", dir=results_dir) as log_dir:
        pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="matrix-cell")
        futures = [pool.submit(one, b, s, Path(log_dir)) for b, s in docker]
        try:
            for bug, seed in sim:
                started = time.monotonic()
                done[(bug, seed)] = sim_cell(bug, seed, sim_duration_s)
                report(done[(bug, seed)], started)
            for f in futures:
                f.result()
        except BaseException:
            # Interrupted (or a cell failed): every running campaign is interrupted in turn and
            # tears its cluster down, keeping its history; no new one starts.
            for f in futures:
                f.cancel()
            for proc in list(children):
                proc.send_signal(signal.SIGTERM)
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
    cells = [done[(b, s)] for b in bugs for s in seeds]
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
        # what judged the runs (a --campaign file's workload), else what would have
        how = next((c.checked_by for c in cs if c.checked_by), None) or docker_workload(
            None if bug == "none" else bug) or "simulator"
        med = f"{statistics.median(times):.1f} s" if times else "-"
        cls = ", ".join(f"{k} ({v})" for k, v in classes.most_common(3)) or "-"
        if len(classes) > 3:
            cls += ", ..."
        errors = sum(c.verdict.startswith("error") for c in cs)
        if errors:
            cls += f"; {errors} campaign(s) ended in error, no verdict"
        print(f"{bug:<24} {how:<10} {len(detected)}/{len(cs):<7} {med:>21}  {cls}", file=out)
