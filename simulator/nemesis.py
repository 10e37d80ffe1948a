"""The seeded nemesis: the fault packages' seeded forms (``nemesis.seeded``) on their
timelines, and the simulation as those forms see it (``nemesis.seeded.SeededContext``).

This module names no fault: each package says in ``Package.seeded`` which timeline its
faults are drawn on, how the seed times it and how one fault is acted (or that it is an
ordinary plan step, acted by the package's ``simulate`` through ``simulator.twin.PlanFaults``
as a stored run's twin acts it). One seeded ``random.Random`` decides every draw."""
from __future__ import annotations

import random

from nemesis.packages import PACKAGES
from nemesis.schedule import FaultStep, check_package_options, fault_length
from nemesis.seeded import ordered, pick, seeded_forms, timing, with_asked

POWER_LOSS_TARGETS = ("one", "minority")  # a campaign's default
DURATION_S = (3.0, 6.0)  # a plan's default fault length, for a package with no fixed one


def check_extra_options(extra: dict, workload: str) -> None:
    """The ``extra_options`` option (package -> its options, as a campaign gives them):
    a ValueError naming the package and the field that is wrong."""
    if not isinstance(extra, dict):
        raise ValueError(f"option extra_options: {extra!r} is not a mapping of package -> "
                         "options")
    bad = check_package_options(extra)
    if bad is not None:
        name, option, why = bad
        raise ValueError(f"option extra_options: {name!r}: "
                         f"{'' if option is None else f'field {option!r}: '}{why}")


class SimNemesis:
    def __init__(self, sim, rng: random.Random, options, queue_options, workload: str) -> None:
        """``sim``: the simulation (its time, event queue, nodes, network and crashes);
        ``options``/``queue_options``: what the seed drew, which times the timelines."""
        self.sim = sim
        self.rng = rng
        self.options = options
        self.workload = workload
        fits = {n: p for n, p in PACKAGES.items() if workload in p.workloads}
        self.forms = with_asked(seeded_forms(fits), fits, options.extra_faults)
        self.timing = {k: timing(m, options, queue_options) for k, m in self.forms.items()}
        for name, mean in options.extra_faults.items():
            if isinstance(mean, bool) or not isinstance(mean, (int, float)) or mean <= 0:
                raise ValueError(f"option extra_faults: {name!r}: {mean!r} is not a mean "
                                 "interval in ms above 0")
        check_extra_options(options.extra_options, workload)
        self._later: dict[int, tuple] = {}
        self._next_id = 0

    # ------------------------------------------------------------- schedule

    def schedule(self) -> None:
        for timeline in ordered(self.forms):
            if self.timing.get(timeline):
                self.sim.push(int(self.rng.expovariate(1 / self.timing[timeline])), "seeded",
                              timeline)

    def step_packages(self) -> list[str]:
        """The packages whose plan steps this seed starts (their node properties apply)."""
        return [n for k, members in self.forms.items() if self.timing.get(k)
                for n, f in members if f.fire is None]

    def listens(self, event: str) -> bool:
        return bool(self.timing.get(f"on:{event}"))

    def fire(self, timeline: str) -> None:
        """The timeline's next fault (a drawn fault: the simulation acts it only while the
        faults last)."""
        mean = self.timing[timeline]
        name, form = pick(self.forms[timeline], self.rng)
        if form.fire is not None:
            gap = form.fire(self, self.rng, self.options, mean)
        else:
            gap = int(self.start_step(name, form.stat) * 1000) \
                + int(self.rng.expovariate(1 / mean)) + 1
        if gap is not None:
            self.sim.push(self.sim.now + gap, "seeded", timeline)

    def on_event(self, event: str, node: int) -> None:
        for _, form in self.forms.get(f"on:{event}", ()):
            form.fire(self, self.rng, self.options, node)

    def fire_later(self, callback: int) -> None:
        fn, args = self._later.pop(callback)
        fn(self, self.rng, *args)

    # ------------------------------------------------------------- SeededContext

    @property
    def now(self) -> int:
        return self.sim.now

    @property
    def duration_ms(self) -> int:
        return self.sim.duration_ms

    @property
    def ids(self) -> list[int]:
        return sorted(set(self.sim.nodes) - self.sim.retired)

    @property
    def voters(self) -> int:
        return len(self.sim.voter_ids)

    def alive(self) -> list[int]:
        return [i for i in self.ids if self.sim.nodes[i].node is not None]

    def leader(self) -> int | None:
        leader = self.sim.leader()
        return None if leader is None else leader[0]

    def trace(self, *parts) -> None:
        self.sim.trace(self.sim.now, *parts)

    def count(self, stat: str) -> None:
        self.sim.stats[stat] = self.sim.stats.get(stat, 0) + 1

    def block(self, links: set[tuple[int, int]]) -> None:
        self.sim.network.blocked = links

    def heal_after(self, ms: int) -> None:
        self.sim.push(self.sim.now + ms, "heal")

    def may_wipe(self, node: int) -> bool:
        return not self.sim.nodes[node].voter or self.sim.voter_wipes == 0

    def crash(self, node: int, wipe: bool) -> None:
        self.sim.crash(self.sim.nodes[node], wipe)

    def restart_after(self, ms: int, node: int) -> None:
        self.sim.push(self.sim.now + ms, "restart", node)

    def clock_step(self, node: int) -> int:
        return self.sim.nodes[node].clock.step_ms

    def set_clock_step(self, node: int, ms: int) -> None:
        self.sim.nodes[node].clock.step_ms = ms

    def later(self, ms: int, fn, *args) -> None:
        self._next_id += 1
        self._later[self._next_id] = (fn, args)
        self.sim.push(self.sim.now + ms, "seeded_later", self._next_id)

    def start_step(self, package: str, stat: str = "steps") -> float:
        """A plan step of ``package`` starting now, acted by its ``simulate``; its length."""
        sim, cls = self.sim, PACKAGES[package]
        if sim.plan is None:
            sim.plan = sim.form.plan_faults(sim)
        opts = cls.run_options(self.workload, self.options.extra_options.get(package))
        targets = cls.targets_for(self.workload, opts, POWER_LOSS_TARGETS)
        spec = next(iter(targets)) if len(targets) == 1 else \
            self.rng.choices(list(targets), weights=list(targets.values()))[0]
        length = fault_length(package, opts, spec, self.rng, DURATION_S)
        mode = self.rng.choice(opts["modes"]) if cls.modes else ""
        step = FaultStep(len(sim.plan.steps), round(sim.now / 1000, 3), package, spec, length,
                         mode)
        self.count(stat)
        sim.plan.start_now(step)
        return length
