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

Per-package options (a campaign's ``nemesis`` entries; see ``OPTIONS``):
``targets`` (node targets, or partition shapes for ``partition``),
``duration_s`` (seconds, or ``[low, high]``), ``interval_s``, ``weight``,
and for some packages ``modes`` and their own settings.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .faults import CORRUPT_FILES, CORRUPT_MODES, NODE_TARGETS, PARTITION_SHAPES, check_target

PACKAGES = ("partition", "kill", "power-loss", "pause", "clock", "packet-loss", "corrupt",
            "strand-replica", "depose-leader")
# Scenario packages: a short sequence of faults aimed at one partition of the queue's topic
# (see nemesis.faults). Each lasts a fixed time, long enough for the controller to act.
SCENARIOS = {"strand-replica": 24.0, "depose-leader": 18.0}
QUEUE_ONLY = set(SCENARIOS)
PACKAGE_WEIGHTS = {"partition": 2, "kill": 1, "power-loss": 1, "pause": 1, "clock": 1,
                   "packet-loss": 1, "corrupt": 1, "strand-replica": 1, "depose-leader": 1}
MODES = {"clock": ("bump", "strobe"), "corrupt": CORRUPT_MODES}
COMBINE = ("sequential", "concurrent")
# Faults aimed at the leader the workload depends on find the most bugs: the active
# controller for the register (a deposed leader still answering, acknowledged writes it
# loses), a partition leader for the queue. They come more often, and first.
WEIGHTS = {
    "register": {
        "partition": {"isolate-controller": 6, "isolate-one": 1, "halves": 1,
                      "majorities-ring": 1, "bridge": 1},
        "kill": {"active-controller": 2, "one": 1, "minority": 1},
        "pause": {"active-controller": 2, "one": 1, "minority": 1},
    },
    "queue": {
        "partition": {"isolate-partition-leader": 4, "isolate-controller": 1, "isolate-one": 1,
                      "halves": 1, "majorities-ring": 1, "bridge": 1},
        "kill": {"partition-leader": 3, "active-controller": 1, "one": 1, "minority": 1},
        "pause": {"partition-leader": 2, "active-controller": 1, "one": 1, "minority": 1},
    },
}
DEFAULT_TARGETS = {"clock": {"one": 1, "minority": 1, "all": 1},
                   "packet-loss": {"one": 1, "minority": 1, "all": 1},
                   "corrupt": {"one": 1}}
# A partition that cuts off the leader the workload depends on lasts long enough for the rest
# to elect another and answer clients: with the node's defaults a cut-off controller resigns
# after 3 s (1.5 x controller.quorum.fetch.timeout.ms) and the others elect one within 2-4 s.
# A shorter cut heals first, the old leader keeps its log, and what it acknowledged alone is
# never lost: a bug like reply-before-commit or ack-before-replication goes unseen.
LEADER_PARTITIONS = ("isolate-controller", "isolate-partition-leader")
LEADER_PARTITION_MIN_S = 7.5
FIRST = {"register": {"partition": "isolate-controller", "kill": "active-controller"},
         "queue": {"partition": "isolate-partition-leader", "kill": "partition-leader"}}
# In a sequential plan the first faults are these packages, in this order, when the campaign
# has them (with a weight above 0): the scenarios aimed at the queue's partitions each find a
# bug nothing else finds (a stranded replica elected unclean, a deposed leader that does not
# truncate), and a 60 s campaign has room for both and one fault more; the register's
# controller, cut off, acknowledges alone what the next controller never had.
OPENING = {"register": ("partition",), "queue": ("depose-leader", "strand-replica")}
for _w in WEIGHTS.values():
    assert set(_w["partition"]) <= set(PARTITION_SHAPES)
    assert set(_w["kill"]) <= set(NODE_TARGETS) and set(_w["pause"]) <= set(NODE_TARGETS)

# Options each package takes, with a check returning what is wrong (None when fine).


def _number(lo: float, hi: float | None = None, what: str = ""):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{v!r} is not a number"
        if v < lo or (hi is not None and v > hi):
            return f"{v!r} is out of range ({what})"
        return None
    return check


def _duration(v):
    if isinstance(v, list):
        if len(v) != 2:
            return f"{v!r}: a duration range is [low, high]"
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                return f"{x!r} is not a number"
            if x < 0:
                return f"{x!r} is negative"
        if v[0] > v[1]:
            return f"{v!r}: low is above high"
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not a number of seconds or [low, high]"
    return f"{v!r} is negative" if v < 0 else None


def _choices(known):
    def check(v):
        if not isinstance(v, list) or not v:
            return f"{v!r} is not a non-empty list"
        for x in v:
            if x not in known:
                return f"unknown value {x!r} (known: {', '.join(known)})"
        return None
    return check


def _targets(package: str):
    def check(v):
        if not isinstance(v, list) or not v:
            return f"{v!r} is not a non-empty list"
        for x in v:
            if not isinstance(x, str):
                return f"{x!r} is not a target"
            if package == "partition":
                if x not in PARTITION_SHAPES:
                    return f"unknown partition shape {x!r} (known: {', '.join(PARTITION_SHAPES)})"
            elif (why := check_target(x)) is not None:
                return why
        return None
    return check


_COMMON = {"duration_s": _duration, "interval_s": _number(0.1, None, "seconds, above 0"),
           "weight": _number(0, None, "not negative")}
OPTIONS: dict[str, dict] = {p: dict(_COMMON) for p in PACKAGES}
for _p in PACKAGES:
    if _p not in SCENARIOS:
        OPTIONS[_p]["targets"] = _targets(_p)
OPTIONS["clock"].update(modes=_choices(MODES["clock"]),
                        max_skew_s=_number(0.001, 86400 * 365, "0 < s <= a year"),
                        strobe_delta_s=_number(0.001, 86400, "0 < s <= a day"),
                        strobe_period_ms=_number(50, 60_000, "50..60000 ms"))
OPTIONS["packet-loss"].update(probability=_number(0.0001, 1, "0 < p <= 1"))
OPTIONS["corrupt"].update(modes=_choices(CORRUPT_MODES), files=_choices(CORRUPT_FILES))
DEFAULTS = {"clock": {"modes": ["bump", "strobe"], "max_skew_s": 120.0, "strobe_delta_s": 10.0,
                      "strobe_period_ms": 200},
            "packet-loss": {"probability": 0.3},
            "corrupt": {"modes": list(CORRUPT_MODES)}}


def check_options(package: str, options: dict) -> tuple[str, str] | None:
    """(option, what is wrong) for the first bad option, or None."""
    known = OPTIONS[package]
    for key, value in options.items():
        if key not in known:
            return key, (f"unknown option {key!r} for package {package!r} "
                         f"(known: {', '.join(sorted(known))})")
        why = known[key](value)
        if why is not None:
            return key, why
    return None


def package_options(package: str, options: dict | None, workload: str) -> dict:
    """The options a package runs with: its defaults, then the campaign's."""
    out = dict(DEFAULTS.get(package, {}))
    if package == "corrupt":
        out["files"] = ["partitions" if workload == "queue" else "metadata"]
    out.update(options or {})
    return out


@dataclass(frozen=True)
class FaultStep:
    index: int
    at_s: float
    kind: str  # the package
    spec: str  # a partition shape or a node target (a scenario: "partition")
    duration_s: float
    mode: str = ""  # clock: bump | strobe; corrupt: bitflip | truncate


def _target_weights(package: str, workload: str, opts: dict,
                    power_loss_targets: tuple[str, ...]) -> dict[str, float]:
    if "targets" in opts:
        return {t: 1 for t in opts["targets"]}
    if package in SCENARIOS:
        return {"partition": 1}
    if package == "power-loss":
        return {t: 1 for t in power_loss_targets}
    if package in WEIGHTS[workload]:
        return WEIGHTS[workload][package]
    return DEFAULT_TARGETS[package]


def plan(seed: int, packages: list[str], time_limit_s: float, interval_s: float = 10.0,
         duration_s: tuple[float, float] = (3.0, 6.0), workload: str = "register",
         power_loss_targets: tuple[str, ...] = ("one", "minority"),
         options: dict[str, dict] | None = None, combine: str = "sequential") -> list[FaultStep]:
    for p in packages:
        if p not in PACKAGES:
            raise ValueError(f"unknown nemesis package {p!r}; known: {', '.join(PACKAGES)}")
        if p in QUEUE_ONLY and workload != "queue":
            raise ValueError(f"nemesis package {p!r} aims at a partition of the queue workload's "
                             f"topic; the {workload} workload has none")
    if combine not in COMBINE:
        raise ValueError(f"unknown combine mode {combine!r}; known: {', '.join(COMBINE)}")
    if not packages:
        return []
    opts = {p: package_options(p, (options or {}).get(p), workload) for p in packages}
    targets = {p: _target_weights(p, workload, opts[p], power_loss_targets) for p in packages}
    first = dict(FIRST[workload])
    first["power-loss"] = power_loss_targets[0]

    def length(p: str, spec: str, rng: random.Random) -> float:
        if "duration_s" in opts[p]:
            d = opts[p]["duration_s"]
            return float(d) if not isinstance(d, list) else rng.uniform(*d)
        if p in SCENARIOS:
            return SCENARIOS[p]
        n = rng.uniform(*duration_s)
        return max(n, LEADER_PARTITION_MIN_S) if spec in LEADER_PARTITIONS else n

    def draw(p: str, rng: random.Random, steps: list) -> tuple[str, str]:
        choices = targets[p]
        spec = rng.choices(list(choices), weights=list(choices.values()))[0]
        if "targets" not in opts[p] and not any(st.kind == p for st in steps) and p in first:
            # The first fault of each package is the most telling one: it comes in every
            # campaign, however short.
            spec = first[p]
        modes = opts[p].get("modes")
        return spec, (modes[rng.randrange(len(modes))] if modes else "")

    raw: list[tuple[float, str, str, float, str]] = []
    if combine == "sequential":
        rng = random.Random(f"{seed}-nemesis-plan")
        weights = [float(opts[p].get("weight", PACKAGE_WEIGHTS[p])) for p in packages]
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
