"""``chaoskraft sim``: run the deterministic simulator and check its history.

One seed runs one simulated cluster (simulator/) with the fault options
the seed draws; the invariants are checked after every event, and at the
end the history is checked: the register workload's for linearizability
(cas-register model per key), the queue workload's by the queue checker
(``checkers.queue``, in process, with the allowances of idempotent
producers). A run "holds" when both pass.

``--from RUN_DIR`` runs a stored Docker run's twin (``simulator.twin``): its cluster, its
generated operations and its fault plan, with the seed deciding only the timing.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from core.run_dir import CONFIG, GENERATED, PLAN, RunDir, RunDirError
from core.verdict import word as verdict_word
from simulator import DEFAULT_WORKLOAD, WORKLOAD_NAMES
from simulator.cluster import SimResult, Simulation
from simulator.forms import FORMS
from simulator.journal import Journal
from simulator.twin import Twin


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
             journal_dir: Path | None = None, twin: Twin | None = None) -> Outcome:
    """One seed; ``overrides`` replace some of the fault options the seed draws. With
    ``journal_dir``, a failing run leaves its message journal and sequence diagram there.
    With ``twin`` (``load_twin``) the stored run's cluster, operations and plan replace
    ``nodes``, ``duration_s``, ``bugs``, ``workload`` and the drawn options."""
    started = time.monotonic()
    journal = Journal() if journal_dir is not None else None
    if twin is not None and overrides:
        raise ValueError("--option does not apply to --from: the stored run decides the options")
    options, queue_options = _options(seed, overrides or {})
    result = Simulation(seed, nodes=nodes, duration_s=duration_s, bugs=bugs, options=options,
                        workload=workload, journal=journal, queue_options=queue_options,
                        twin=twin).run()
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


def load_twin(run_dir: Path) -> Twin:
    """A stored Docker run as the simulator's twin: ``config.yaml``, ``plan.json`` and
    ``generated.jsonl`` of ``run_dir``. A ValueError names the file, and the line or step,
    of anything missing or malformed."""
    import dataclasses

    from nemesis.packages import PACKAGES
    from nemesis.schedule import FaultStep
    from workloads.registry import WORKLOADS as GENERATORS

    from .config import node_config
    from .reproduce import load_run_config
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"--from {run_dir}: not a run directory")
    cfg = load_run_config(run_dir)
    if cfg.workload not in WORKLOAD_NAMES:
        raise ValueError(f"{RunDir(run_dir).file(CONFIG)}: workload {cfg.workload!r} has no "
                         "simulated form")
    if cfg.seed is None:
        raise ValueError(f"{RunDir(run_dir).file(CONFIG)}: seed: the run has no seed")
    if cfg.consume != "assign" or cfg.transactions:
        raise ValueError(f"{RunDir(run_dir).file(CONFIG)}: consume: {cfg.consume}, transactions: "
                         f"{str(cfg.transactions).lower()}: the simulator's clients assign "
                         "partitions and send without transactions; this run has no twin")
    rd = RunDir(run_dir)
    path = rd.file(PLAN)
    raw = rd.plan()
    names = {f.name for f in dataclasses.fields(FaultStep)}
    steps = []
    for i, d in enumerate(raw):
        if not isinstance(d, dict) or set(d) - names or not {"index", "at_s", "kind", "spec",
                                                             "duration_s"} <= set(d):
            raise ValueError(f"{path}: step {i}: expected the fields {sorted(names)}, got "
                             f"{d!r}")
        if d["kind"] not in PACKAGES:
            raise ValueError(f"{path}: step {i}: unknown fault package {d['kind']!r}")
        steps.append(FaultStep(**d))
    path = rd.file(GENERATED)
    ops: dict[int, list[dict]] = {}
    for n, row in rd.generated():
        try:
            ops.setdefault(int(row["process"]), []).append(
                {"f": row["f"], "key": row["key"], "value": row["value"]})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{n}: not a generated operation "
                             f"({type(exc).__name__}: {exc})") from None
    # a crashed client's successor is its slot plus a multiple of the concurrency
    if sorted({p % cfg.concurrency for p in ops}) != list(range(cfg.concurrency)) or \
            (not cfg.crash_clients and sorted(ops) != list(range(cfg.concurrency))) or \
            min(ops, default=0) < 0:
        raise ValueError(f"{path}: operations for processes {sorted(ops)}, but the run had "
                         f"{cfg.concurrency} (config.yaml concurrency"
                         f"{', with crashed clients' if cfg.crash_clients else ''})")
    # The file must be what this version's generator makes for the run's seed (the twin's
    # clients are scripted by it); an operation sent to a chosen node (the register's) takes
    # that node from the generator, as the file keeps only the operation.
    gen = GENERATORS[cfg.workload].generator(cfg)
    for p, rows in ops.items():
        for i, (row, op) in enumerate(zip(rows, gen.ops(p))):
            if (row["f"], row["key"], row["value"]) != (op.f, op.key, op.value):
                raise ValueError(
                    f"{path}: process {p} operation {i}: {row} is not what the "
                    f"{cfg.workload} generator makes for the run's seed (a run of another "
                    "version?)")
            if hasattr(op, "node"):
                row["node"] = op.node
    docker_steps = {}
    try:  # what became of each step in Docker (absent for a run stopped before its faults)
        for x in rd.faults():
            docker_steps[int(x["step"])] = (str(x["status"]), list(x.get("nodes") or []))
    except (RunDirError, KeyError, TypeError, ValueError):
        docker_steps = {}
    def more(process: int):
        return ({"f": op.f, "key": op.key, "value": op.value} for op in gen.ops(process))
    return Twin(cfg, steps, ops, node_config(cfg), source=str(run_dir.resolve()),
                docker_steps=docker_steps, start_ms=FORMS[cfg.workload].twin_start_ms,
                more_ops=more if cfg.crash_clients else None)


def stored_verdict(run_dir: Path) -> str:
    """A stored run's verdict as one line (its results.json), for beside its twin's."""
    from .reproduce import anomaly_classes
    try:
        results = RunDir(run_dir).results()
    except RunDirError as exc:
        return f"not analysed ({exc})"
    valid = results.get("valid")
    word = verdict_word(valid)
    classes = anomaly_classes(results)
    return word + (f" ({', '.join(classes)})" if classes and valid is not True else "")


def _options(seed: int, overrides: dict):
    """The options the seed draws, with ``overrides`` (field -> value) in place: (SimOptions
    or None, QueueOptions or None), None where nothing is overridden."""
    import dataclasses
    from simulator.options import QueueOptions, SimOptions
    out = []
    for cls in (SimOptions, QueueOptions):
        names = {f.name for f in dataclasses.fields(cls)}
        mine = {k: v for k, v in overrides.items() if k in names}
        out.append(dataclasses.replace(cls.draw(seed), **mine) if mine else None)
    unknown = set(overrides) - {f.name for cls in (SimOptions, QueueOptions)
                                for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"no simulator option {sorted(unknown)[0]!r}")
    return tuple(out)


def option_values(items: list[str]) -> dict:
    """``--option KEY=VALUE`` items (VALUE as JSON: 0.5, 3000, null) -> overrides; a
    ValueError names a bad item."""
    import json
    out = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--option {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"--option {item!r}: the value is not JSON (a number, null, "
                             "an object)") from None
    return out


def reproduce_line(seed: int, nodes: int, duration_s: float, bugs: frozenset[str],
                   workload: str = DEFAULT_WORKLOAD, overrides: dict | None = None,
                   twin: Twin | None = None) -> str:
    import json
    if twin is not None:
        return f"chaoskraft sim --from {twin.source} --seed {seed}"
    line = f"chaoskraft sim --seed {seed} --nodes {nodes} --duration-s {duration_s:g}"
    if workload != DEFAULT_WORKLOAD:
        line += f" --workload {workload}"
    for k, v in sorted((overrides or {}).items()):
        line += f" --option {k}={json.dumps(v)}"
    for b in sorted(bugs):
        line += f" --bug {b}"
    return line


def print_outcome(o: Outcome, nodes: int, duration_s: float, bugs: frozenset[str],
                  verbose: bool, out=sys.stdout, overrides: dict | None = None,
                  twin: Twin | None = None) -> None:
    r = o.result
    workload = r.workload
    if verbose and twin is None:
        print(f"seed {o.seed}: options {r.options.describe()}"
              + (f" {r.queue_options.describe()}" if r.queue_options is not None else ""),
              file=out)
    if verbose and r.plan is not None:
        docker = twin.docker_steps if twin is not None else {}
        for s in r.plan:
            d = docker.get(s.step)
            print(f"seed {o.seed}: step {s.step} at {s.at_s:g} s {s.kind} {s.spec}: {s.status}"
                  + (f" {s.nodes}" if s.nodes else "")
                  + (f" ({s.label or s.why})" if s.label or s.why else "")
                  + (f"; in Docker: {d[0]}" + (f" {d[1]}" if d[1] else "") if d else ""),
                  file=out)
    if verbose:
        print(f"seed {o.seed}: {r.events} events, {r.sim_ms / 1000:.1f} simulated s, "
              f"{o.wall_s:.2f} wall s, faults {r.stats}", file=out)
        print(f"seed {o.seed}: coverage: "
              + (", ".join(f"{e} {n}" for e, n in sorted(r.coverage.items())) or "no node event"),
              file=out)
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
        print(f"  reproduce with: "
              f"{reproduce_line(o.seed, nodes, duration_s, bugs, workload, overrides, twin)}",
              file=out)
        if o.journal is not None:
            print(f"  journal: {o.journal[1]} (sequence diagram of the last messages); every "
                  f"message kept: {o.journal[0]}", file=out)


# What shrinking tries, in order, for each option: simpler values (no such fault, one client).
SIMPLER = {
    "partition_mean_ms": [None], "crash_mean_ms": [None], "clock_step_mean_ms": [None],
    "power_loss_mean_ms": [None], "election_crash_prob": [0.0], "wipe_prob": [0.0],
    "torn_write_prob": [0.0], "drop_rate": [0.0], "duplicate_rate": [0.0],
    "clock_drift_ppm": [0], "observers": [0], "clients": [1, 2], "keys": [1],
    "producers": [1], "consumers": [1], "partitions": [1], "max_delay_ms": [2],
    "idempotent": [True], "scenario_mean_ms": [None], "transactions": [False],
    "crash_client_ms": [None], "crash_mid_op": [False], "extra_faults": [{}],
    "extra_options": [{}],
}


def shrink(seed: int, nodes: int, duration_s: float, bugs: frozenset[str], workload: str,
           overrides: dict | None = None, log=print) -> tuple[Outcome, int, float, dict] | None:
    """A smaller run that fails as the given one does (same invariant): shorter, with fewer
    nodes and simpler options (``SIMPLER``), each step kept only if it still fails. Returns
    (its outcome, nodes, duration_s, overrides), checked to fail again with the same trace,
    or None if the given run does not fail."""
    overrides = dict(overrides or {})
    first = run_seed(seed, nodes, duration_s, bugs, overrides, workload)
    if first.ok:
        return None
    want = first.invariant
    runs = [0]

    def fails(n: int, d: float, o: dict) -> bool:
        runs[0] += 1
        try:
            return run_seed(seed, n, d, bugs, o, workload).invariant == want
        except ValueError:  # not a cluster this workload can run
            return False

    def shorter(n: int, d: float, o: dict) -> float:
        lo, hi = 1.0, d  # hi fails; find the shortest whole second that does
        while hi - lo > 1:
            mid = float(int((lo + hi) / 2))
            if fails(n, mid, o):
                hi = mid
            else:
                lo = mid
        return hi

    log(f"shrinking seed {seed}: {want} in {duration_s:g} s on {nodes} nodes")
    duration_s = shorter(nodes, duration_s, overrides)
    log(f"  {duration_s:g} s of faults are enough")
    for smaller in range(min(nodes - 1, 4), 0, -1):
        if not fails(smaller, duration_s, overrides):
            break
        nodes = smaller
        log(f"  {nodes} nodes are enough")
    drawn = {**Simulation(seed, nodes, 1, workload=workload).options.__dict__}
    if workload != DEFAULT_WORKLOAD:
        from simulator.options import QueueOptions
        drawn.update(QueueOptions.draw(seed).__dict__)
    drawn.update(overrides)
    for key, values in SIMPLER.items():
        if key not in drawn or key in FORMS[workload].unused_options:
            continue
        for value in values:
            if drawn[key] == value:
                break
            trial = {**overrides, key: value}
            if fails(nodes, duration_s, trial):
                overrides = trial
                log(f"  {key}={value} still fails")
                break
    duration_s = shorter(nodes, duration_s, overrides)
    a = run_seed(seed, nodes, duration_s, bugs, overrides, workload)
    b = run_seed(seed, nodes, duration_s, bugs, overrides, workload)
    if a.invariant != want or a.trace_hash != b.trace_hash:
        raise AssertionError(f"the shrunk run of seed {seed} does not fail the same way twice")
    log(f"  shrunk in {runs[0]} runs: {duration_s:g} s, {nodes} nodes, "
        f"{len(overrides)} options set")
    return a, nodes, duration_s, overrides
