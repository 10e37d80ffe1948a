"""The fault schedule: a pure function of the seed and the campaign's nemesis.

``plan`` lays out, before the run starts, when each fault starts, which
package, target (or partition shape) and mode it has, and how long it lasts.
Which concrete nodes a symbolic target means (a random node, the active
controller, the leader of partition 2) is decided when the fault fires, with
a random generator derived from the seed and the step's index, so a re-run
with the same seed on the same cluster makes the same choices.

Two ways to combine packages (``mode``):

- ``sequential`` (default): one fault at a time; each next fault's package
  is drawn by weight, ``interval_s / 2`` plus up to ``interval_s / 2`` after
  the previous one ended. The first faults are the workload's ``OPENING``
  packages that the campaign has.
- ``concurrent``: every package keeps its own timeline (its own interval and
  random stream), so faults of different packages overlap.

Per-package options (a campaign's ``nemesis`` entries; each package's ``option_checks``):
``targets`` (node targets, or partition shapes for ``partition``),
``duration_s`` (seconds, or ``[low, high]``), ``interval_s``, ``weight``,
and for some packages ``modes`` and their own settings.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .packages import PACKAGES as REGISTRY

PACKAGES = tuple(REGISTRY)
# Scenario packages (a fixed length each) and the packages only some workloads take.
SCENARIOS = {n: p.length_s for n, p in REGISTRY.items() if p.length_s is not None}
COMBINE = ("sequential", "concurrent")
# In a sequential plan the first faults are these packages, in this order, when the campaign
# has them (with a weight above 0): the scenarios aimed at the queue's partitions each find a
# bug nothing else finds (a stranded replica elected unclean, a deposed leader that does not
# truncate, a preferred replica elected outside the ISR), and a 60 s campaign has room for
# two and one fault more; the register's controller, cut off, acknowledges alone what the
# next controller never had.
OPENING = {"register": ("partition",), "queue": ("depose-leader", "strand-replica", "elect")}


def check_package_options(options: dict) -> tuple[str, str | None, str] | None:
    """(package, option or None, what is wrong) for the first bad entry of a mapping of
    package -> its options (option None: the package or its entry is wrong), or None."""
    for package, opts in options.items():
        if package not in REGISTRY:
            return package, None, f"unknown package {package!r} (known: {', '.join(PACKAGES)})"
        if not isinstance(opts, dict):
            return package, None, f"{opts!r} is not a mapping of option: value"
        bad = check_options(package, opts)
        if bad is not None:
            return package, *bad
    return None


def check_options(package: str, options: dict) -> tuple[str, str] | None:
    """(option, what is wrong) for the first bad option, or None."""
    known = REGISTRY[package].option_checks()
    for key, value in options.items():
        if key not in known:
            return key, (f"unknown option {key!r} for package {package!r} "
                         f"(known: {', '.join(sorted(known))})")
        why = known[key](value)
        if why is not None:
            return key, why
    return REGISTRY[package].check_together(options)


def package_options(package: str, options: dict | None, workload: str) -> dict:
    """The options a package runs with: its defaults, then the campaign's."""
    return REGISTRY[package].run_options(workload, options)


def package_refusal(package: str, workload: str) -> str | None:
    """Why ``package`` cannot run with ``workload``, or None."""
    if workload in REGISTRY[package].workloads:
        return None
    return f"package {package!r} {REGISTRY[package].needs}; the {workload} workload has none"


def fault_length(package: str, opts: dict, spec: str, rng: random.Random,
                 duration_s: tuple[float, float]) -> float:
    """How long one fault of ``package`` lasts: its options' ``duration_s`` (seconds, or a
    range drawn from), else the package's own length (``duration_s``: the plan's default)."""
    if "duration_s" in opts:
        d = opts["duration_s"]
        return float(d) if not isinstance(d, list) else rng.uniform(*d)
    return REGISTRY[package].length(spec, rng, duration_s)


@dataclass(frozen=True)
class FaultStep:
    index: int
    at_s: float
    kind: str  # the package
    spec: str  # a partition shape or a node target (a scenario: "partition")
    duration_s: float
    mode: str = ""  # clock: bump | strobe; corrupt: bitflip | truncate


def plan(seed: int, packages: list[str], time_limit_s: float, interval_s: float = 10.0,
         duration_s: tuple[float, float] = (3.0, 6.0), workload: str = "register",
         power_loss_targets: tuple[str, ...] = ("one", "minority"),
         options: dict[str, dict] | None = None, combine: str = "sequential") -> list[FaultStep]:
    for p in packages:
        if p not in REGISTRY:
            raise ValueError(f"unknown nemesis package {p!r}; known: {', '.join(PACKAGES)}")
        if (why := package_refusal(p, workload)) is not None:
            raise ValueError(f"nemesis {why}")
    if combine not in COMBINE:
        raise ValueError(f"unknown combine mode {combine!r}; known: {', '.join(COMBINE)}")
    if not packages:
        return []
    opts = {p: package_options(p, (options or {}).get(p), workload) for p in packages}
    targets = {p: REGISTRY[p].targets_for(workload, opts[p], power_loss_targets)
               for p in packages}
    first = {p: REGISTRY[p].first_target(workload, power_loss_targets) for p in packages}

    def length(p: str, spec: str, rng: random.Random) -> float:
        return fault_length(p, opts[p], spec, rng, duration_s)

    def draw(p: str, rng: random.Random, steps: list) -> tuple[str, str]:
        choices = targets[p]
        spec = rng.choices(list(choices), weights=list(choices.values()))[0]
        if "targets" not in opts[p] and not any(st.kind == p for st in steps) and first[p]:
            # The first fault of each package is the most telling one: it comes in every
            # campaign, however short.
            spec = first[p]
        modes = opts[p].get("modes")
        return spec, (modes[rng.randrange(len(modes))] if modes else "")

    raw: list[tuple[float, str, str, float, str]] = []
    if combine == "sequential":
        rng = random.Random(f"{seed}-nemesis-plan")
        weights = [float(opts[p].get("weight", REGISTRY[p].weight)) for p in packages]
        if not any(weights):
            return []
        steps: list[FaultStep] = []
        opening = [p for p in OPENING[workload] if p in packages
                   and weights[packages.index(p)] > 0]
        t = interval_s / 2
        while True:
            t += rng.uniform(0, interval_s / 2)
            kind = rng.choices(packages, weights=weights)[0]
            if len(steps) < len(opening):
                kind = opening[len(steps)]
            spec, mode = draw(kind, rng, steps)
            n = length(kind, spec, rng)
            if t + n > time_limit_s:
                break
            steps.append(FaultStep(len(steps), round(t, 3), kind, spec, round(n, 3), mode))
            t += n + interval_s / 2
        return steps
    for p in packages:
        rng = random.Random(f"{seed}-nemesis-plan-{p}")
        gap = float(opts[p].get("interval_s", interval_s))
        mine: list[FaultStep] = []
        t = gap / 2
        while True:
            t += rng.uniform(0, gap / 2)
            spec, mode = draw(p, rng, mine)
            n = length(p, spec, rng)
            if t + n > time_limit_s:
                break
            mine.append(FaultStep(0, round(t, 3), p, spec, round(n, 3), mode))
            raw.append((round(t, 3), p, spec, round(n, 3), mode))
            t += n + gap / 2
    raw.sort(key=lambda r: (r[0], packages.index(r[1])))
    return [FaultStep(i, *r) for i, r in enumerate(raw)]
