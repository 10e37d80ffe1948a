"""elect: a preferred leader election (ElectLeaders, PREFERRED), as an operator's admin tool
sends it, asked for while it must be refused. Of a partition whose ISR is full (three
replicas), the preferred replica (the first) shuts down; once the partition is led with the
other two in its ISR, the clients write on (at least ``LAG_OPS`` acknowledged operations,
which it misses). It is started again cut off from the other two replicas (it reaches the
controllers, so it registers and is unfenced, but cannot fetch: it stays outside the ISR)
and ElectLeaders for the partition is sent every ``RETRY_S``: a correct controller answers
PREFERRED_LEADER_NOT_AVAILABLE. After ``CUT_S`` the cut heals, the replica catches up and
rejoins the ISR, and the election succeeds. A controller that elected it while it was
outside the ISR would make a replica missing acknowledged records the leader, and the
others truncate to it once they reach it. The scenario waits for the preferred replica to
lead (up to ``PATIENCE_S``; a state that never comes ends it as not reached, healed and
with the replica started again).

The partition is one whose other two replicas are not a majority of the controllers and
do not include the active one: the preferred replica must still reach the quorum.
"""
from __future__ import annotations

import asyncio

from ..faults import PartitionInfo, grudge_value
from ..package import NotReached, Scenario

RETRY_S = 0.2  # between two ElectLeaders while the preferred replica is refused
CUT_S = 8.0  # how long the restarted replica stays cut off from the other replicas
LAG_OPS = 20  # acknowledged operations while the preferred replica is down
DONE = ("ElectionNotNeededError", "ELECTION_NOT_NEEDED")  # it leads already


def elect_choice(partitions: list[PartitionInfo], controllers: set[int],
                 active: int | None) -> tuple[int, int, list[int]] | None:
    """(partition, its preferred replica, the other replicas) or None when no partition has
    a leader and a full ISR of three whose other replicas leave the preferred one a
    majority of the controllers, the active one among them."""
    for partition, leader, replicas, isr in partitions:
        if leader < 0 or len(replicas) != 3 or sorted(isr) != sorted(replicas):
            continue
        preferred, others = replicas[0], list(replicas[1:])
        left = controllers - set(others)
        if len(left) <= len(controllers) // 2 or active is None or active in others:
            continue
        return partition, preferred, others
    return None


def without(p: PartitionInfo, preferred: int) -> bool:
    """Is the partition led, with every replica but ``preferred`` in its ISR (so that writes
    are acknowledged while it is away)?"""
    return p[1] >= 0 and sorted(p[3]) == sorted(r for r in p[2] if r != preferred)


def elected(error: str | None) -> bool:
    return error is None or error.split(":")[0] in DONE


class Elect(Scenario):
    name = "elect"
    intends = ("isr-shrink", "isr-expand")
    length_s = 45.0
    aims_at = "a preferred leader election asked for while the preferred replica is back " \
              "but outside the ISR"
    opens = ("elect",)
    closes = ("elected",)
    colour = "#b279a2"
    needs_controller = True

    def choose(self, infos, controllers, active, rng):
        infos = list(infos)
        rng.shuffle(infos)
        return elect_choice(infos, controllers, active)

    async def act(self, ctx, choice, rng):
        partition, preferred, others = choice
        value = {"target": self.name, "partition": partition, "nodes": [preferred]}
        await ctx.kill("stop", [preferred], value, clean=True)
        row, waited = await self.await_partition(
            ctx, partition, lambda p: without(p, preferred), self.PATIENCE_S,
            f"partition {partition} led, its ISR the others")
        if row is None:
            raise NotReached(f"partition {partition} had no leader and ISR of its other "
                             f"replicas {waited:.0f} s after n{preferred} shut down")
        await self.await_progress(ctx, LAG_OPS, 1.0, self.PATIENCE_S,
                                  f"{LAG_OPS} operations while n{preferred} is down")
        g = {o: {preferred} for o in others}  # the live ones drop what it sends
        await ctx.cut(g, {"shape": self.name, "partition": partition,
                          "grudge": grudge_value(g)})
        await ctx.restart([preferred])
        ctx.history.record("nemesis", "invoke", "elect", value=value)
        start, refused, error = ctx.clock.monotonic(), 0, None
        while True:
            try:
                error = await asyncio.to_thread(ctx.elect, partition)
            except Exception as exc:  # noqa: BLE001 - no controller answered (yet)
                error = f"{type(exc).__name__}: {exc}"
            waited = ctx.clock.monotonic() - start
            if elected(error) or waited >= self.PATIENCE_S:
                break
            refused += 1
            if ctx.partitioned and waited >= CUT_S:
                await ctx.heal_cut()
            await ctx.clock.sleep(RETRY_S)
        ctx.history.record("nemesis", "info", "elect",
                           value={**value, "error": error, "refused": refused,
                                  "while_cut": ctx.partitioned})
        if ctx.partitioned:
            await ctx.heal_cut()
        if not elected(error):
            raise NotReached(f"the preferred election of partition {partition} was refused "
                             f"for {self.PATIENCE_S:.0f} s: {error}")
        row, waited = await self.await_partition(
            ctx, partition, lambda p: p[1] == preferred, self.PATIENCE_S,
            f"n{preferred} leading partition {partition}")
        ctx.history.record("nemesis", "info", "elected",
                           value={**value, "refused": refused, "leader": row and row[1]})

    def describe(self, choice):
        partition, preferred, _ = choice
        return f"elect: n{preferred} stopped, back cut off, and elected (partition " \
            f"{partition})", [preferred]

    def sim_act(self, sim, choice, rng):
        partition, preferred, others = choice
        patience = self.PATIENCE_S
        asked = [0.0]

        def answered(error):
            if elected(error) or asked[0] >= patience:
                sim.heal_cut()
                if not elected(error):
                    sim.not_reached(f"the preferred election of partition {partition} was "
                                    f"refused for {patience:.0f} s: {error}")
                return
            asked[0] += RETRY_S
            if asked[0] >= CUT_S:
                sim.heal_cut()
            sim.after(RETRY_S, lambda: sim.elect(partition, answered))

        def back():
            sim.cut({o: {preferred} for o in others})
            sim.restart([preferred])
            sim.elect(partition, answered)

        def out(row, waited):
            if row is None:
                sim.restart([preferred])
                sim.not_reached(f"partition {partition} had no leader and ISR of its other "
                                f"replicas {waited:.0f} s after n{preferred} shut down")
                return
            sim.after(3.0, back)  # the clients write on meanwhile
        sim.kill([preferred], clean=True)
        sim.after(0, sim.await_partition, partition, lambda p: without(p, preferred),
                  patience, out)


PACKAGE = Elect
