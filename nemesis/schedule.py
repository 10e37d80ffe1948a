"""The fault schedule: a pure function of the seed.

``plan`` lays out, before the run starts, when each fault starts, which kind
and shape or target it has, and how long it lasts. Which concrete nodes a
symbolic target means (a random node, the active controller) is decided when
the fault fires, with a random generator derived from the seed and the
step's index, so a re-run with the same seed on the same cluster makes the
same choices.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .faults import KILL_TARGETS, PARTITION_SHAPES

PACKAGES = ("partition", "kill", "power-loss", "strand-replica", "depose-leader")
# Scenario packages: a short sequence of faults aimed at one partition of the queue's topic
# (see nemesis.faults). Each lasts a fixed time, long enough for the controller to act.
SCENARIOS = {"strand-replica": 24.0, "depose-leader": 13.0}
QUEUE_ONLY = set(SCENARIOS)
PACKAGE_WEIGHTS = {"partition": 2, "kill": 1, "power-loss": 1, "strand-replica": 1,
                   "depose-leader": 1}
# Faults aimed at the leader the workload depends on find the most bugs: the active
# controller for the register (a deposed leader still answering, acknowledged writes it
# loses), a partition leader for the queue. They come more often, and first.
WEIGHTS = {
    "register": {
        "partition": {"isolate-controller": 6, "isolate-one": 1, "halves": 1,
                      "majorities-ring": 1, "bridge": 1},
        "kill": {"active-controller": 2, "one": 1, "minority": 1},
    },
    "queue": {
        "partition": {"isolate-partition-leader": 4, "isolate-controller": 1, "isolate-one": 1,
                      "halves": 1, "majorities-ring": 1, "bridge": 1},
        "kill": {"partition-leader": 3, "active-controller": 1, "one": 1, "minority": 1},
    },
}
FIRST = {"register": {"partition": "isolate-controller", "kill": "active-controller"},
         "queue": {"partition": "isolate-partition-leader", "kill": "partition-leader"}}
for _w in WEIGHTS.values():
    assert set(_w["partition"]) <= set(PARTITION_SHAPES) and set(_w["kill"]) <= set(KILL_TARGETS)


@dataclass(frozen=True)
class FaultStep:
    index: int
    at_s: float
    kind: str  # a package: "partition" | "kill" | "power-loss" | a scenario
    spec: str  # a partition shape or a kill target (a scenario: "partition")
    duration_s: float


def plan(seed: int, packages: list[str], time_limit_s: float, interval_s: float = 10.0,
         duration_s: tuple[float, float] = (3.0, 6.0), workload: str = "register",
         power_loss_targets: tuple[str, ...] = ("one", "minority")) -> list[FaultStep]:
    for p in packages:
        if p not in PACKAGES:
            raise ValueError(f"unknown nemesis package {p!r}; known: {', '.join(PACKAGES)}")
        if p in QUEUE_ONLY and workload != "queue":
            raise ValueError(f"nemesis package {p!r} aims at a partition of the queue workload's "
                             f"topic; the {workload} workload has none")
    if not packages:
        return []
    weights = dict(WEIGHTS[workload])
    weights["power-loss"] = {t: 1 for t in power_loss_targets}
    for name in SCENARIOS:
        weights[name] = {"partition": 1}
    first = dict(FIRST[workload])
    first["power-loss"] = power_loss_targets[0]
    rng = random.Random(f"{seed}-nemesis-plan")
    steps = []
    t = interval_s / 2
    while True:
        t += rng.uniform(0, interval_s / 2)
        kind = rng.choices(packages, weights=[PACKAGE_WEIGHTS[p] for p in packages])[0]
        choices = weights[kind]
        spec = rng.choices(list(choices), weights=list(choices.values()))[0]
        if not any(st.kind == kind for st in steps):
            # The first fault of each package is the most telling one: it comes in every
            # campaign, however short.
            spec = first.get(kind, spec)
        length = SCENARIOS[kind] if kind in SCENARIOS else rng.uniform(*duration_s)
        if t + length > time_limit_s:
            break
        steps.append(FaultStep(len(steps), round(t, 3), kind, spec, round(length, 3)))
        t += length + interval_s / 2
    return steps
