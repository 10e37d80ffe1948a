"""voters: the controller quorum changes shape (KIP-853) while clients write: a voter is
removed (the active controller one time in two: it must resign once the removal commits)
and a removed one is added back, through RemoveRaftVoter and AddRaftVoter sent to the quorum
leader as an operator's tool sends them.

As Jepsen's membership nemesis, a removed node keeps running with its data (an observer,
fetching the log), so it can be added back; the package keeps its own view of the voter set
(what the leader last said it committed) and of the change pending, resolved when the
leader answers. A voter whose disk was replaced (the simulator's wipes: a new directory id,
so it can never vote again) has its key replaced first, as KIP-853 has an operator do:
removed with its old directory id, added with its new one. The quorum keeps at least ``MIN_VOTERS`` voters (checked again before each
attempt: a change asked again may no longer fit). One step in two also asks
for the opposite change right after the first, without waiting for the first to commit (an
operator's second command): the leader must refuse it while the first is uncommitted
(REQUEST_TIMED_OUT), and the step asks again until the first has committed. A change no
leader took (none, or leadership lost before it committed) is asked again, for up to
``PATIENCE_S``.

A campaign with this package formats its cluster as a dynamic quorum (its node property
``chaoskraft.bootstrap.kraft.version=1``): every controller a voter at first; the changes
go to the quorum leader's internal listener (``workloads.nodes.change_voter``), with the
directory ids the leader's DescribeQuorum shows. The simulator formats a dynamic quorum
when this package is asked for (``--option 'extra_faults={"voters": 8000}'``); a stored
run's twin has the run's.
"""
from __future__ import annotations

import asyncio
import random

from ..package import NotReached, Package, Skipped

# A removal never leaves fewer voters than this: with three, a voter whose disk is wiped
# (it can never vote again) still leaves a majority that can elect a leader.
MIN_VOTERS = 3
RETRY_S = 1.0  # between two attempts of a change no leader took
PATIENCE_S = 60.0  # the longest a change is asked again
ANSWER_S = 5.0  # an answer that has not come by then never will: asked again


# Answers (Kafka's error names; None: done) after which the change is asked again, and
# those that say it is made (the latter two: a retry of a change that was made)
RETRIABLE = ("REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER", "NOT_CONTROLLER")
DONE = (None, "DUPLICATE_VOTER", "VOTER_NOT_FOUND")


def planned(voters: list[int], stale: list[int], controllers: list[int], leader: int,
            rng: random.Random) -> list[tuple[str, int]]:
    """The changes of one step: a stale voter key replaced, else one change and, one step in
    two, a second asked at once."""
    if stale:
        return [("remove", stale[0]), ("add", stale[0])]
    first = voter_change(voters, controllers, leader, rng)
    if first is None:
        return []
    changes = [first]
    if rng.random() < 0.5:  # a second change at once, as an operator's next command
        kind, node = first
        after = sorted(set(voters) - {node}) if kind == "remove" else sorted(
            set(voters) | {node})
        second = voter_change(after, controllers, leader, rng)
        if second is not None and second[1] != node:
            changes.append(second)
    return changes


def label_of(changes: list[tuple[str, int]]) -> str:
    return "voters: " + ", then ".join(f"{k} n{n}" for k, n in changes)


def voter_change(voters: list[int], controllers: list[int], leader: int,
                 rng: random.Random) -> tuple[str, int] | None:
    """("remove" | "add", node): add back a controller that is not a voter where there is
    one (half of the time, or whenever no removal is allowed), else remove a voter (the
    leader one time in two)."""
    spare = sorted(set(controllers) - set(voters))
    can_remove = len(voters) > MIN_VOTERS
    if spare and (not can_remove or rng.random() < 0.5):
        return "add", rng.choice(spare)
    if not can_remove:
        return None
    if leader in voters and rng.random() < 0.5:
        return "remove", leader
    others = sorted(v for v in voters if v != leader)
    return "remove", rng.choice(others)


class Voters(Package):
    name = "voters"
    workloads = ("register", "queue")
    targeted = False
    length_s = 10.0  # the changes take a second or so; a Docker step waits for them longer
    colour = "#b279a2"
    intends = ("raft-voters-changed", "raft-leader-resigned", "raft-leader-elected")
    opens = ("voters",)
    closes = ("voters-changed",)
    properties = {"chaoskraft.bootstrap.kraft.version": "1"}

    async def start(self, ctx, step, opts, rng, controller, leader):
        view = await ctx.quorum_view()
        if view is None:
            raise Skipped("no quorum leader answered")
        leader_id, voters, stale, _ = view
        controllers = list(range(1, ctx.cfg.controllers + 1))
        changes = planned(voters, stale, controllers, leader_id, rng)
        if not changes:
            raise Skipped(f"no change fits the voter set {voters}")
        await asyncio.gather(*(self._change(ctx, kind, node) for kind, node in changes))

        async def undo():  # a change of membership stays
            return None
        return label_of(changes), undo, sorted({n for _, n in changes})

    async def _change(self, ctx, kind: str, node: int) -> None:
        value = {"kind": kind, "node": node}
        ctx.history.record("nemesis", "invoke", "voters", value=value)
        start = ctx.clock.monotonic()
        while True:
            view = await ctx.quorum_view()
            error, message = "NOT_LEADER_OR_FOLLOWER", "no quorum leader answered"
            if view is not None:
                _, voters, _, dirs = view
                if kind == "remove" and node in voters and len(voters) <= MIN_VOTERS:
                    error, message = None, "no longer fits: left as it is"
                    break
                if node not in dirs:
                    error, message = "REQUEST_TIMED_OUT", f"n{node} does not fetch"
                else:
                    error, message = await ctx.change_voter(kind, node, dirs[node])
            waited = ctx.clock.monotonic() - start
            if error not in RETRIABLE or waited >= PATIENCE_S:
                break
            await ctx.clock.sleep(RETRY_S)
        ctx.history.record("nemesis", "info", "voters-changed",
                           value={**value, "error": error, "message": message})
        if error not in DONE:
            raise NotReached(f"{kind} n{node}: {error}: {message}")

    def simulate(self, sim, step, opts, rng, controller, leader):
        if not sim.dynamic_quorum():
            raise Skipped("the simulated quorum is static (kraft.version 0): the simulator "
                          "formats a dynamic one only when the voters package is asked for")
        view = sim.quorum_view()
        if view is None:
            raise Skipped("no quorum leader to ask")
        leader_id, voters, stale = view
        changes = planned(voters, stale, sorted(sim.controllers), leader_id, rng)
        if not changes:
            raise Skipped(f"no change fits the voter set {voters}")
        for kind, node in changes:
            self._ask(sim, kind, node, 0.0)
        return label_of(changes), lambda: None, sorted({n for _, n in changes})

    def _ask(self, sim, kind: str, node: int, waited: float) -> None:
        view = sim.quorum_view()
        if kind == "remove" and view is not None and len(view[1]) <= MIN_VOTERS and \
                node not in view[2]:
            return  # other changes came first: this one no longer fits (asked again later)
        heard = [False]

        def unanswered() -> None:  # the request or its answer was lost, or the leader died
            if not heard[0] and waited < PATIENCE_S:
                heard[0] = True
                self._ask(sim, kind, node, waited + ANSWER_S)

        def answered(error: str | None, message: str | None) -> None:
            if heard[0]:
                return
            heard[0] = True
            if error in RETRIABLE and waited < PATIENCE_S:
                sim.after(RETRY_S, self._ask, sim, kind, node, waited + RETRY_S)
            elif error not in DONE:
                sim.not_reached(f"{kind} n{node}: {error}: {message}")
        if sim.change_voter(kind, node, answered):
            sim.after(ANSWER_S, unanswered)
        elif waited < PATIENCE_S:
            sim.after(RETRY_S, self._ask, sim, kind, node, waited + RETRY_S)
        else:
            sim.not_reached(f"{kind} n{node}: no quorum leader for {waited:.0f} s")


PACKAGE = Voters
