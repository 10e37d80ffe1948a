"""How the seeded simulator draws its faults: each package says it, in ``Package.seeded``.

A seeded form (``Seeded``) belongs to a timeline (``TIMELINES``): the seed gives the
timeline a mean interval (``mean_ms`` of the one form that times it, from the options the
seed drew, ``simulator.options``), its first fault comes an exponential draw after the
start and each next one ``fire`` says when. A timeline with several members picks one at
random each time (the scenarios). A form either acts itself on the simulation
(``fire``, through ``SeededContext``), or, by default, starts an ordinary plan step of its
package, acted by the package's ``simulate`` as a stored run's twin acts it. A package with
a simulated form and no ``seeded`` at all is still drawn when a run asks for it by name
(the simulator's ``extra_faults``: ``with_asked``), on a timeline of its own.
An ``on`` form is not timed: it answers a node event (``"voted"``: a voter has just voted).

One ``random.Random`` (the seed's ``{seed}-faults``) decides every draw, in event order;
the forms that act themselves (partitions, crashes, clock steps) draw exactly what the
simulator's nemesis drew before they moved here, so every seed keeps its schedule.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Protocol

# The timelines the seeds draw, in the order they are scheduled at the start (each first
# draw comes from the one stream in this order); any other comes after them, by name, and
# runs only when asked (``asked``).
TIMELINES = ("network", "crash", "clock-step", "power-off", "scenario")


class SeededContext(Protocol):
    """What a seeded form may use of the simulation (``simulator.nemesis.SimNemesis``)."""
    now: int
    duration_ms: int
    ids: list[int]  # every node, sorted
    voters: int  # how many voters the cluster has

    def alive(self) -> list[int]: ...  # the nodes that are up, sorted
    def leader(self) -> int | None: ...  # the Raft leader, if any
    def trace(self, *parts) -> None: ...  # one line of the run's trace (now is added)
    def count(self, stat: str) -> None: ...  # one more of a run statistic
    def block(self, links: set[tuple[int, int]]) -> None: ...  # (src, dst) lose everything
    def heal_after(self, ms: int) -> None: ...
    def may_wipe(self, node: int) -> bool: ...  # at most one voter's disk per run
    def crash(self, node: int, wipe: bool) -> None: ...  # a power loss (and its disk wiped)
    def restart_after(self, ms: int, node: int) -> None: ...
    def clock_step(self, node: int) -> int: ...  # its wall clock's step now, ms
    def set_clock_step(self, node: int, ms: int) -> None: ...
    def later(self, ms: int, fn: Callable, *args) -> None: ...  # acted even after the faults
    def start_step(self, package: str, stat: str) -> float: ...  # a plan step now; its length


@dataclass(frozen=True)
class Seeded:
    """One way the seed draws a package's faults. ``timeline``: one of ``TIMELINES`` (or a
    name of its own, timed by ``asked``), or None with ``on``; ``mean_ms(options, queue_options)``: the timeline's mean interval (None:
    off), on the one member that times it; ``chance(options)``: for an ``on`` form, how
    likely it acts on each event; ``fire(ctx, rng, options)``: act now and return the gap
    to the next fault of the timeline, ms (None: no next); None: start a plan step of the
    package (``SeededContext.start_step``), counted in the run's statistics as ``stat``."""
    timeline: str | None = None
    mean_ms: Callable | None = None
    fire: Callable | None = None
    on: str | None = None
    chance: Callable | None = None
    stat: str = "steps"


def seeded_forms(packages: dict) -> dict[str, list[tuple[str, Seeded]]]:
    """timeline (or ``on:EVENT``) -> [(package, form)] in package-name order; a timeline
    timed by no member or by two is our bug and fails here."""
    out: dict[str, list[tuple[str, Seeded]]] = {}
    for name in sorted(packages):
        for form in packages[name].seeded:
            key = f"on:{form.on}" if form.on else form.timeline
            if not key:
                raise ValueError(f"package {name}: a seeded form needs a timeline or an event")
            out.setdefault(key, []).append((name, form))
    for key, members in out.items():
        timed = [n for n, f in members if (f.chance if f.on else f.mean_ms) is not None]
        if len(timed) != 1:
            raise ValueError(f"seeded timeline {key!r} is timed by {len(timed)} packages "
                             f"({', '.join(timed) or 'none'}); it needs exactly one")
    return out


def timing(members: list[tuple[str, Seeded]], options, queue_options) -> float | None:
    """The timeline's mean interval (ms) or, for an ``on`` form, its chance; None or 0: off."""
    form = next(f for _, f in members if (f.chance if f.on else f.mean_ms) is not None)
    return form.chance(options) if form.on else form.mean_ms(options, queue_options)


def with_asked(forms: dict, packages: dict, asked_for) -> dict:
    """``forms`` and, for each name in ``asked_for`` that is a package with a simulated form
    but no timeline of that name, a timeline of its own: its plan steps, timed by ``asked``
    (any such package can be asked for by name, as a campaign names it). A name that is
    neither is refused, naming what could be asked for."""
    from .package import simulated
    out = dict(forms)
    for name in asked_for:
        if name in out and name not in TIMELINES:
            continue
        if name in packages and simulated(packages[name]) and name not in out:
            out[name] = [(name, Seeded(name, mean_ms=asked(name)))]
            continue
        known = sorted({t for t in out if t not in TIMELINES and not t.startswith("on:")}
                       | {n for n, cls in packages.items() if simulated(cls)} - set(TIMELINES))
        raise ValueError(f"option extra_faults: {name!r} is no fault package with a simulated "
                         f"form nor a timeline no seed draws (known: {', '.join(known)})")
    return out


def ordered(forms: dict) -> list[str]:
    """The timelines of ``seeded_forms`` in the order they are scheduled."""
    return [t for t in TIMELINES if t in forms] + sorted(
        t for t in forms if t not in TIMELINES and not t.startswith("on:"))


def asked(timeline: str) -> Callable:
    """The timing of a timeline no seed draws: the mean interval the run asks for in the
    simulator's ``extra_faults`` option, or off."""
    return lambda options, queue_options: options.extra_faults.get(timeline)


def pick(members: list, rng: random.Random):
    return members[0] if len(members) == 1 else rng.choice(members)
