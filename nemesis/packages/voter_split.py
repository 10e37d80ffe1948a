"""voter-split: the controller quorum is cut in two while a voter change is in flight, the
way a change of membership loses data when its rules are broken (KIP-853; Jepsen's
membership analyses). Each step plays two cuts, on five controllers that are all voters:

1. **Two removals across a cut.** The quorum leader L and one voter P are cut off from the
   other three, and L is asked at once to remove two of those three. L must take the
   first and refuse the second while the first is uncommitted; the first then never
   commits (two of four voters), L resigns on its check quorum and the three elect a leader
   of their own. A leader that takes both counts the majority of the voter set both
   removals leave (L, P and the third), so both halves of the cut commit writes: reads on
   one side miss the other's writes, and one side's writes are lost when the cut heals.
2. **A voter added that cannot fetch.** A voter W is removed (an ordinary change, waited
   for until committed), then paused until it is no longer caught up, and L is asked to add
   it back. L must refuse (W does not fetch). Then L and one voter are cut off from the
   other two and W, and W resumes. A leader that adds W and counts it as holding the whole
   log until it fetches (the planted ``voter-counted-before-catch-up``) commits with two of
   five, until its check quorum ends it; the other side, which took the added W from the
   log before the cut, elects a leader without those writes (W votes: KIP-853 answers votes
   whatever the voter's own view), and the writes are lost when the cut heals.

After each cut the voter set is made whole again through the leader (``voters``' change, asked
until it is done). A correct node is unavailable during the cuts, never wrong. The asks go
to the leader chosen before the cut, on its internal listener, as an operator's tool sends
them; their answers are in the step's rows (``voter-split`` and ``voter-split-healed``).

The simulator plays the same two cuts (``--option 'extra_faults={"voter-split": 20000}'``,
which formats a dynamic quorum).
"""
from __future__ import annotations

import asyncio
import random

from ..package import NotReached, Package, Skipped
from .voters import DONE, PATIENCE_S, RETRY_S, Voters

CONTROLLERS = 5  # both cuts need five voters: three against two
HOLD_S = 8.0  # how long each cut holds, writes going on beside it
# A paused voter's last fetch is this old before it is asked for: past the leader's
# fetch timeout (2 s by default), after which it no longer counts as caught up
STALE_S = 4.0
SETTLE_S = 1.0  # for the followers to take a committed voter change from the log
POLL_S = 0.5


def two_removals(voters: list[int], leader: int, rng: random.Random):
    """(the leader's partner, the two voters it is asked to remove) for the first cut."""
    others = sorted(v for v in voters if v != leader)
    partner = rng.choice(others)
    far = sorted(v for v in others if v != partner)
    return partner, sorted(rng.sample(far, 2))


def cut_off_add(voters: list[int], leader: int, rng: random.Random) -> int:
    """The voter removed, then added back while paused, for the second cut."""
    return rng.choice(sorted(v for v in voters if v != leader))


def halves(near: set[int], nodes: list[int]) -> dict[int, set[int]]:
    """The cut between ``near`` and the other ``nodes``: who drops whom."""
    far = set(nodes) - near
    return {n: (far if n in near else near) for n in nodes}


class VoterSplit(Package):
    name = "voter-split"
    workloads = ("register", "queue")
    targeted = False
    length_s = 40.0  # two cuts of HOLD_S, the changes around them and the voter set restored
    colour = "#9d755d"
    intends = ("raft-voters-changed", "raft-leader-resigned", "raft-leader-elected")
    opens = ("voter-split",)
    closes = ("voter-split-healed",)
    properties = {"chaoskraft.bootstrap.kraft.version": "1"}
    needs = "five controllers, formatted as a dynamic quorum"

    async def start(self, ctx, step, opts, rng, controller, leader):
        controllers = sorted(n.node_id for n in ctx.backend.nodes if n.is_controller)
        if len(controllers) != CONTROLLERS:
            raise Skipped(f"needs {CONTROLLERS} controllers, the cluster has {len(controllers)}")
        paused: list[int] = []
        try:
            view = await self._whole(ctx, controllers)
            await self._removals(ctx, controllers, view, rng)
            view = await self._whole(ctx, controllers)
            await self._add(ctx, controllers, view, rng, paused)
            await self._whole(ctx, controllers)
        finally:  # a step cut short leaves no cut and no paused node behind
            if self._cut:
                await self._heal(ctx)
            if paused:
                await ctx.exec_all(paused, lambda n: ["ck-ctl", "resume"])

        async def undo():  # each cut healed and the voter set whole already
            return None
        return "voter-split: two removals, then an add, across cuts", undo, controllers

    _cut = False  # one of its cuts is in force

    async def _cut_off(self, ctx, near: set[int], controllers: list[int], value: dict) -> None:
        self._cut = True
        await ctx.cut(halves(near, controllers), value)

    async def _heal(self, ctx) -> None:
        await ctx.heal_cut()
        self._cut = False

    async def _whole(self, ctx, controllers: list[int]):
        """Every controller a voter again (added back through the leader, as ``voters``
        does); the leader's view then."""
        start = ctx.clock.monotonic()
        while True:
            view = await ctx.quorum_view()
            if view is not None and sorted(view[1]) == controllers:
                return view
            if ctx.clock.monotonic() - start >= PATIENCE_S:
                raise NotReached(f"the voter set was not every controller within "
                                 f"{PATIENCE_S:.0f} s (last view: {view})")
            if view is not None:  # each asked until done (NotReached if never)
                for node in sorted(set(controllers) - set(view[1])):
                    await Voters()._change(ctx, "add", node)
            else:
                await ctx.clock.sleep(POLL_S)

    async def _ask(self, ctx, leader: int, kind: str, node: int, dirs: dict) -> list:
        error, message = await ctx.change_voter(kind, node, dirs.get(node, ""), leader=leader)
        return [kind, node, error, message]

    async def _removals(self, ctx, controllers, view, rng) -> None:
        leader, voters, _, dirs = view
        partner, removed = two_removals(voters, leader, rng)
        value = {"cut": "two-removals", "leader": leader, "near": sorted([leader, partner]),
                 "remove": removed}
        ctx.history.record("nemesis", "invoke", "voter-split", value=value)
        ctx.status(f"voter-split: n{leader} and n{partner} cut off, n{leader} asked to remove "
                   f"{removed}")
        await self._cut_off(ctx, {leader, partner}, controllers, value)
        asked = asyncio.gather(*(self._ask(ctx, leader, "remove", n, dirs) for n in removed))
        await ctx.clock.sleep(HOLD_S)
        await self._heal(ctx)
        answers = await asked
        ctx.history.record("nemesis", "info", "voter-split-healed",
                           value={**value, "answers": answers})
        ctx.log(f"voter-split: two removals across a cut asked of n{leader}: {answers}")

    async def _add(self, ctx, controllers, view, rng, paused: list[int]) -> None:
        added = cut_off_add(view[1], view[0], rng)
        await Voters()._change(ctx, "remove", added)
        view = await ctx.quorum_view()
        if view is None or added in view[1]:
            raise NotReached(f"n{added} was not removed (view {view})")
        leader, voters, _, dirs = view
        partner = rng.choice(sorted(v for v in voters if v != leader))
        value = {"cut": "cut-off-add", "leader": leader, "near": sorted([leader, partner]),
                 "add": added}
        ctx.history.record("nemesis", "invoke", "voter-split", value=value)
        await self._pause(ctx, added)
        paused.append(added)
        await ctx.clock.sleep(STALE_S)
        answer = await self._ask(ctx, leader, "add", added, dirs)
        if answer[2] in DONE:
            await ctx.clock.sleep(SETTLE_S)
        ctx.status(f"voter-split: n{leader} and n{partner} cut off after n{added}'s add "
                   f"({answer[2] or 'taken'})")
        await self._cut_off(ctx, {leader, partner}, controllers, value)
        await ctx.exec_all([added], lambda n: ["ck-ctl", "resume"])
        paused.remove(added)
        await ctx.clock.sleep(HOLD_S)
        await self._heal(ctx)
        ctx.history.record("nemesis", "info", "voter-split-healed",
                           value={**value, "answers": [answer]})
        ctx.log(f"voter-split: n{added} added while paused, then a cut: {answer}")

    async def _pause(self, ctx, node: int) -> None:
        """SIGSTOP the node, asked again while it is not running (a node that stopped on a
        safety check, say, is started again by its supervisor within a second or so)."""
        start = ctx.clock.monotonic()
        while True:
            rc, out = (await ctx.exec_all([node], lambda n: ["ck-ctl", "pause"]))[0]
            if rc == 0:
                return
            if ctx.clock.monotonic() - start >= PATIENCE_S:
                raise NotReached(f"n{node} could not be paused within {PATIENCE_S:.0f} s: "
                                 f"{out.strip()}")
            await ctx.clock.sleep(POLL_S)

    # ------------------------------------------------------------------ simulator

    def simulate(self, sim, step, opts, rng, controller, leader):
        if not sim.dynamic_quorum():
            raise Skipped("the simulated quorum is static (kraft.version 0): the simulator "
                          "formats a dynamic one only when a voter package is asked for")
        controllers = sorted(sim.controllers)
        if len(controllers) != CONTROLLERS:
            raise Skipped(f"needs {CONTROLLERS} controllers, the cluster has {len(controllers)}")
        view = sim.quorum_view()
        if view is None or sorted(view[1]) != controllers or view[2]:
            raise Skipped(f"the voter set is not every controller now ({view})")
        paused: list[int] = []

        def undo():
            sim.heal_cut()
            sim.resume(paused)
            restore(0.0)  # a step cut short by its end leaves no voter out

        def restore(waited):
            """Every controller a voter again, asked every RETRY_S until it is (beyond the
            step: a quorum left a voter short has no room for the next fault)."""
            view = sim.quorum_view()
            if view is None or sorted(view[1]) != controllers:
                if view is not None:
                    for n in sorted(set(controllers) - set(view[1])):
                        sim.change_voter("add", n, lambda *_: None)
                if waited < PATIENCE_S:
                    sim.lasting(RETRY_S, restore, waited + RETRY_S)

        def removals():
            view = sim.quorum_view()
            if view is None or sorted(view[1]) != controllers:
                sim.not_reached(f"the voter set was not whole before the first cut ({view})")
                return
            top = view[0]
            partner, removed = two_removals(view[1], top, rng)
            sim.cut(halves({top, partner}, controllers))
            for n in removed:
                sim.change_voter("remove", n, lambda *_: None, to=top)
            sim.after(HOLD_S, healed, lambda: sim.after(POLL_S, whole, 0.0, add))

        def healed(then):
            sim.heal_cut()
            then()

        def whole(waited, then):
            view = sim.quorum_view()
            if view is not None and sorted(view[1]) == controllers:
                then(view)
                return
            if waited == 0.0:
                restore(0.0)
            if waited >= PATIENCE_S:
                sim.not_reached(f"the voter set was not whole again within {waited:.0f} s "
                                f"({view})")
                return
            sim.after(RETRY_S, whole, waited + RETRY_S, then)

        def add(view):
            added = cut_off_add(view[1], view[0], rng)
            Voters()._ask(sim, "remove", added, 0.0)
            sim.after(POLL_S, removed, added, 0.0)

        def removed(added, waited):
            view = sim.quorum_view()
            if view is None or added in view[1]:
                if waited >= PATIENCE_S:
                    sim.not_reached(f"n{added} was not removed within {waited:.0f} s")
                else:
                    sim.after(POLL_S, removed, added, waited + POLL_S)
                return
            sim.pause([added])
            paused.append(added)
            sim.after(STALE_S, ask_add, added)

        def ask_add(added):
            view = sim.quorum_view()
            if view is None:
                sim.not_reached(f"no quorum leader to add n{added} back")
                return
            top = view[0]
            partner = rng.choice(sorted(v for v in view[1] if v != top))
            sim.change_voter("add", added, lambda *_: None, to=top)
            sim.after(SETTLE_S, cut, top, partner, added)

        def cut(top, partner, added):
            sim.cut(halves({top, partner}, controllers))
            sim.resume([added])
            paused.remove(added)
            sim.after(HOLD_S, healed, lambda: sim.after(POLL_S, whole, 0.0, lambda v: None))
        removals()
        return "voter-split: two removals, then an add, across cuts", undo, controllers


PACKAGE = VoterSplit
