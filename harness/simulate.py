"""``chaoskraft sim``: run the deterministic simulator and check its history.

One seed runs one simulated cluster (simulator/) with the fault options
the seed draws; the invariants are checked after every event, and at the
end the history is checked: the register workload's for linearizability
(cas-register model per key), the queue workload's by the queue checker
(``checkers.queue``, in process, with the allowances of idempotent
producers). A run "holds" when both pass.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from simulator import DEFAULT_WORKLOAD
from simulator.cluster import SimResult, Simulation
from simulator.journal import Journal


@dataclass
class Outcome:
    """A seed's run (``result``) and the verdict on it: the invariants', or, when they held,
    the linearizability checker's on the register history."""
    result: SimResult
    ok: bool
    invariant: str | None
    detail: str | None
    wall_s: float = 0.0
    counterexample: list | None = None
    journal: tuple[Path, Path] | None = None  # (seed-N.jsonl, seed-N.html) of a failure

    seed = property(lambda self: self.result.seed)
    event_index = property(lambda self: self.result.event_index)
    trace_hash = property(lambda self: self.result.trace_hash)


def run_seed(seed: int, nodes: int, duration_s: float, bugs: frozenset[str],
             overrides: dict | None = None, workload: str = DEFAULT_WORKLOAD,
             journal_dir: Path | None = None) -> Outcome:
    """One seed; ``overrides`` replace some of the fault options the seed draws. With
    ``journal_dir``, a failing run leaves its message journal and sequence diagram there."""
    started = time.monotonic()
    journal = Journal() if journal_dir is not None else None
    options = None
    if overrides:
        import dataclasses
        from simulator.cluster import SimOptions
        options = dataclasses.replace(SimOptions.draw(seed), **overrides)
    result = Simulation(seed, nodes=nodes, duration_s=duration_s, bugs=bugs, options=options,
                        workload=workload, journal=journal).run()
    outcome = Outcome(result, result.ok, result.invariant, result.detail)
    if result.ok:
        verdict = result.check_history()
        if verdict is not None:
            outcome.ok = False
            outcome.invariant, outcome.detail, outcome.counterexample = verdict
    if journal is not None and not outcome.ok:
        outcome.journal = journal.write(Path(journal_dir), seed, result.sim_ms,
                                        f"{outcome.invariant}: {outcome.detail}")
    outcome.wall_s = time.monotonic() - started
    return outcome


def reproduce_line(seed: int, nodes: int, duration_s: float, bugs: frozenset[str],
                   workload: str = DEFAULT_WORKLOAD) -> str:
    line = f"chaoskraft sim --seed {seed} --nodes {nodes} --duration-s {duration_s:g}"
    if workload != DEFAULT_WORKLOAD:
        line += f" --workload {workload}"
    for b in sorted(bugs):
        line += f" --bug {b}"
    return line


def print_outcome(o: Outcome, nodes: int, duration_s: float, bugs: frozenset[str],
                  verbose: bool, out=sys.stdout) -> None:
    r = o.result
    workload = r.workload
    if verbose:
        print(f"seed {o.seed}: options {r.options.describe()}"
              + (f" {r.queue_options.describe()}" if r.queue_options is not None else ""),
              file=out)
        print(f"seed {o.seed}: {r.events} events, {r.sim_ms / 1000:.1f} simulated s, "
              f"{o.wall_s:.2f} wall s, faults {r.stats}", file=out)
    status = "ok" if o.ok else f"FAIL {o.invariant}"
    print(f"seed {o.seed}: {status} trace {o.trace_hash}", file=out)
    if not o.ok:
        where = f" at event {o.event_index}" if o.event_index is not None else " (end of run)"
        print(f"  {o.invariant}{where}: {o.detail}", file=out)
        for c in o.counterexample or []:
            if "anomaly" in c:
                print(f"    {c['anomaly']}: {c['example']}", file=out)
                continue
            print(f"    {c['role']:>16}: process {c['process']} {c['op']} "
                  f"[{c['call']}, {c['return']}] (history index {c['index']})", file=out)
        print(f"  reproduce with: {reproduce_line(o.seed, nodes, duration_s, bugs, workload)}",
              file=out)
        if o.journal is not None:
            print(f"  journal: {o.journal[1]} (sequence diagram of the last messages); every "
                  f"message kept: {o.journal[0]}", file=out)
