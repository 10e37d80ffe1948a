"""features: the cluster's feature levels (KIP-584) change while clients write, through
UpdateFeatures as ``kafka-features upgrade`` / ``downgrade`` sends it: ``metadata.version``
raised by one to four levels, eligible leader replicas (KIP-966) turned on, or off again (a
safe downgrade, which clears every partition's ELR), and, once ``metadata.version`` is at
the newest level the nodes support (Kafka ties it to 3.9-IV0), ``kraft.version`` 0 -> 1 (a
static quorum made dynamic, KIP-853). One step in four asks two of these in one request
(all or nothing).

A campaign with this package formats its cluster at the oldest ``metadata.version`` the
nodes support (its node property; the option ``metadata_version`` names another), so a run
has levels to raise. Beside ``voters`` (a dynamic quorum, which needs the newest level) it
is formatted at the newest with ``metadata_version: 21``: then only eligible leader replicas
are turned on and off. Each step reads the levels
from the broker whose ApiVersions answer is the freshest (the highest finalized-features
epoch), asks its change (asked again while no controller takes it, for up to
``PATIENCE_S``), and then waits until every broker that answers reports the new levels (the
committed metadata reaching every broker: a broker that keeps answering with the old levels
past ``PATIENCE_S`` ends the step as not reached, naming it). A level stays as set: the
step's undo does nothing.

History rows: ``features`` (invoke: the updates; info: the controller's error or none) and
``features-seen`` (info: how long until every answering broker reported them). The
simulator acts it with the same draws on the simulated cluster; it draws it only when asked
(``--option 'extra_faults={"features": 8000}'``).
"""
from __future__ import annotations

import random

from ..package import NotReached, Package, Skipped

METADATA_VERSION = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"
KRAFT_VERSION = "kraft.version"
OLDEST_METADATA_VERSION = 7  # Kafka 3.3-IV3, the oldest level the nodes run
UPGRADE, SAFE_DOWNGRADE = 1, 2  # Kafka's FeatureUpdate.UpgradeType

MAX_STEP = 4  # metadata.version is raised by at most this many levels at once
TWO_AT_ONCE = 0.25  # how often a request carries two updates
PATIENCE_S = 60.0  # the longest a change is asked again, and then waited for
POLL_S = 0.5  # between two looks at the brokers' levels
ANSWER_S = 5.0  # a simulated answer that has not come by then never will: asked again


def check_level(v) -> str | None:
    if isinstance(v, bool) or not isinstance(v, int) or v < OLDEST_METADATA_VERSION:
        return f"{v!r} is not a metadata.version level ({OLDEST_METADATA_VERSION} or more)"
    return None


def candidates(levels: dict[str, int], top: int,
               rng: random.Random) -> list[tuple[str, int, int]]:
    """Every change that fits the finalized ``levels`` (feature -> level; a feature not named
    is at 0) of nodes that support ``metadata.version`` up to ``top``: (feature, level,
    upgrade type) rows."""
    mv = levels.get(METADATA_VERSION, OLDEST_METADATA_VERSION)
    out = []
    if mv < top:
        out.append((METADATA_VERSION, rng.randint(mv + 1, min(top, mv + MAX_STEP)), UPGRADE))
    out.append((ELR_FEATURE, 1, UPGRADE) if levels.get(ELR_FEATURE, 0) == 0
               else (ELR_FEATURE, 0, SAFE_DOWNGRADE))
    if mv >= top and levels.get(KRAFT_VERSION, 0) == 0:
        out.append((KRAFT_VERSION, 1, UPGRADE))
    return out


def feature_change(levels: dict[str, int], top: int,
                   rng: random.Random) -> list[tuple[str, int, int]]:
    """The updates of one step: one change that fits, or (``TWO_AT_ONCE``) two of them."""
    options = candidates(levels, top, rng)
    first = rng.choice(options)
    rest = [u for u in options if u[0] != first[0]]
    if rest and rng.random() < TWO_AT_ONCE:
        return sorted([first, rng.choice(rest)])
    return [first]


def freshest(answers: dict) -> tuple[dict[str, int], int] | None:
    """The levels of the answer with the highest epoch and the newest ``metadata.version``
    its node supports (answers: node -> (epoch, levels, newest supported) or None), or None
    when no broker answered with a ``metadata.version`` (a broker that has just started
    reports none until it has read the metadata log)."""
    seen = [a for a in answers.values() if a is not None and METADATA_VERSION in a[1]]
    if not seen:
        return None
    _, levels, top = max(seen, key=lambda a: a[0])
    return levels, top


def behind(answers: dict, updates) -> list[int]:
    """The answering brokers whose levels are not yet the ``updates``' levels."""
    return sorted(n for n, a in answers.items() if a is not None and
                  any(a[1].get(name, 0) != level for name, level, _ in updates))


def label_of(updates) -> str:
    return "features: " + ", ".join(f"{name}={level}" for name, level, _ in updates)


def rows(updates) -> list[dict]:
    return [{"feature": name, "level": level, "upgrade_type": kind}
            for name, level, kind in updates]


class Features(Package):
    name = "features"
    workloads = ("register", "queue")
    targeted = False
    length_s = 10.0  # the change commits in well under a second; a Docker step waits longer
    colour = "#9d755d"
    intends = ("feature-level-changed",)
    opens = ("features",)
    closes = ("features-seen",)
    options = {"metadata_version": check_level}  # the level the cluster is formatted at
    defaults = {"metadata_version": OLDEST_METADATA_VERSION}

    @classmethod
    def node_properties(cls, opts: dict) -> dict[str, str]:
        level = opts.get("metadata_version", OLDEST_METADATA_VERSION)
        return {"chaoskraft.bootstrap.metadata.version": str(level)}

    async def start(self, ctx, step, opts, rng, controller, leader):
        view = freshest(await ctx.feature_levels())
        if view is None:
            raise Skipped("no broker reported a metadata.version (ApiVersions)")
        updates = feature_change(*view, rng)
        value = {"updates": rows(updates)}
        ctx.history.record("nemesis", "invoke", "features", value=value)
        error = await ctx.update_features(updates, PATIENCE_S)
        ctx.history.record("nemesis", "info", "features", value={**value, "error": error})
        if error is not None:
            raise NotReached(f"{label_of(updates)} refused: {error}")
        ctx.status(label_of(updates) + ": waiting for every broker to report them")
        start = ctx.clock.monotonic()
        while True:
            answers = await ctx.feature_levels()
            late = behind(answers, updates)
            waited = ctx.clock.monotonic() - start
            if not late and any(a is not None for a in answers.values()):
                break
            if waited >= PATIENCE_S:
                raise NotReached(f"{label_of(updates)}: brokers {late} still reported other "
                                 f"levels {waited:.0f} s after the change was committed")
            await ctx.clock.sleep(POLL_S)
        ctx.history.record("nemesis", "info", "features-seen",
                           value={**value, "waited_s": round(waited, 1),
                                  "brokers": sorted(n for n, a in answers.items()
                                                    if a is not None)})

        async def undo():  # a feature level stays as set
            return None
        return label_of(updates), undo, []

    def simulate(self, sim, step, opts, rng, controller, leader):
        view = freshest(sim.feature_levels())
        if view is None:
            raise Skipped("no node has read a metadata.version yet")
        updates = feature_change(*view, rng)
        self._ask(sim, updates, 0.0)
        return label_of(updates), lambda: None, []

    def _ask(self, sim, updates, waited: float) -> None:
        heard = [False]

        def unanswered() -> None:  # the request or its answer was lost, or the leader died
            if not heard[0]:
                heard[0] = True
                self._ask(sim, updates, waited + ANSWER_S)

        def answered(error: str | None) -> None:
            if heard[0]:
                return
            heard[0] = True
            if error is None:
                self._await(sim, updates, 0.0)
            elif error.startswith("NOT_CONTROLLER") and waited < PATIENCE_S:
                sim.after(POLL_S, self._ask, sim, updates, waited + POLL_S)
            elif error.startswith("NOT_CONTROLLER"):
                sim.not_reached(f"{label_of(updates)}: no controller took it in "
                                f"{waited:.0f} s")
            else:
                sim.not_reached(f"{label_of(updates)} refused: {error}")
        if waited >= PATIENCE_S:
            sim.not_reached(f"{label_of(updates)}: no answer in {waited:.0f} s")
            return
        sim.update_features(updates, answered)
        sim.after(ANSWER_S, unanswered)

    def _await(self, sim, updates, waited: float) -> None:
        late = behind(sim.feature_levels(), updates)
        if not late:
            return
        if waited >= PATIENCE_S:
            sim.not_reached(f"{label_of(updates)}: nodes {late} still reported other levels "
                            f"{waited:.0f} s after the change was committed")
            return
        sim.after(POLL_S, self._await, sim, updates, waited + POLL_S)


PACKAGE = Features
