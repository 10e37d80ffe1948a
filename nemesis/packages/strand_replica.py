"""strand-replica: one follower of a partition is cut from the partition's other replicas
until the leader drops it from the ISR (``replica.lag.time.max.ms``, set to 3 s) while
acknowledged writes go on; then the ISR's members are killed and the cut healed, so the
only live replica is the one without those writes. Kafka must leave the partition offline
(no unclean election) until an ISR member returns. The killed replicas never hold a
majority of the controllers, and the active controller is never the stranded one (the
replicas that keep the data must reach it to shrink the ISR). The kill waits until the
freshest metadata shows the stranded replica out of the ISR (up to ``PATIENCE_S`` past
``CUT_S``: on a slow machine the shrink can take longer; a shrink that never comes ends the
scenario as not reached, with nothing killed), and then until the clients have had
``PROGRESS_OPS`` more operations acknowledged: writes the stranded replica lacks.
"""
from __future__ import annotations

import random

from ..faults import PartitionInfo, grudge_value
from ..package import NotReached, Scenario, Unreachable
from ..seeded import Seeded

CUT_S = 8.0  # the cut outlasts replica.lag.time.max.ms (3 s) and then some acknowledged writes
DOWN_S = 12.0  # the kill that follows outlasts the broker session (9 s) and an election
AFTER_SHRINK_S = 2.0  # writes go on without the stranded replica at least this long
PROGRESS_OPS = 20  # and until this many more operations were acknowledged

def strand_choice(partitions: list[PartitionInfo], controllers: set[int],
                  rng: random.Random, avoid: set = frozenset()) -> tuple[int, int, list[int]] | None:
    """(partition, the replica to strand, the replicas to kill later) or None when no
    partition has a full ISR whose other members can die without the controller quorum.
    Nodes in ``avoid`` (the active controller) are never the stranded replica."""
    order = sorted(partitions)
    rng.shuffle(order)
    # A partition led by another than its preferred replica is about to get that one back (the
    # preferred-leader election): the replica chosen as a follower here may lead by the time it
    # is cut off. Such partitions come last.
    order.sort(key=lambda p: bool(p[2]) and p[1] != p[2][0])
    for partition, leader, replicas, isr in order:
        if leader < 0 or len(replicas) < 2 or sorted(isr) != sorted(replicas):
            continue
        followers = sorted(r for r in replicas if r != leader)
        rng.shuffle(followers)
        for stranded in followers:
            if stranded in avoid:
                continue
            others = sorted(r for r in replicas if r != stranded)
            if len(controllers) - len(controllers & set(others)) > len(controllers) // 2:
                return partition, stranded, others
    return None


class StrandReplica(Scenario):
    name = "strand-replica"
    intends = ("isr-shrink", "partition-offline")
    length_s = 24.0
    seeded = (Seeded("scenario", stat="scenarios"),)  # timed by depose-leader's
    aims_at = "a replica out of the ISR left as the only live one, without acknowledged writes"
    properties = {"replica.lag.time.max.ms": "3000"}
    needs_controller = True

    def choose(self, infos, controllers, active, rng):
        return strand_choice(infos, controllers, rng, avoid={active})

    async def act(self, ctx, choice, rng):
        partition, stranded, others = choice
        g: dict[int, set[int]] = {i: set() for i in ctx.ids}
        for o in others:
            g[stranded].add(o)
            g[o].add(stranded)
        await ctx.cut(g, {"shape": self.name, "partition": partition, "grudge": grudge_value(g)})
        ctx.status(f"strand-replica: n{stranded} cut from {others} (partition {partition})")
        await ctx.clock.sleep(CUT_S)
        row, waited = await self.await_partition(
            ctx, partition, lambda p: stranded not in p[3] or p[1] == stranded, self.PATIENCE_S,
            f"n{stranded} out of the ISR of partition {partition}")
        if row is not None and row[1] == stranded:
            raise Unreachable(f"n{stranded}, cut off to be stranded, became the leader of "
                              f"partition {partition} (ISR {row[3]}): its leader had lost its "
                              f"broker session")
        if row is None:
            raise NotReached(f"n{stranded} was still in the ISR of partition {partition} "
                             f"{CUT_S + waited:.0f} s into the cut; nothing was killed")
        await self.await_progress(ctx, PROGRESS_OPS, AFTER_SHRINK_S, self.PATIENCE_S,
                                  f"{PROGRESS_OPS} operations acknowledged without n{stranded}")
        await ctx.kill("kill", others, {"target": self.name, "partition": partition,
                                        "nodes": others, "isr": row[3],
                                        "waited_s": round(waited, 1)})
        await ctx.heal_cut()
        ctx.status(f"strand-replica: {others} killed, n{stranded} alone (partition {partition})")
        await ctx.clock.sleep(DOWN_S)

    def describe(self, choice):
        partition, stranded, others = choice
        return (f"strand-replica: n{stranded} cut from {others}, then they are killed "
                f"(partition {partition})", others)

    def sim_act(self, sim, choice, rng):
        partition, stranded, others = choice
        g: dict[int, set[int]] = {i: set() for i in sim.ids}
        for o in others:
            g[stranded].add(o)
            g[o].add(stranded)
        sim.cut(g)

        def kill_isr(row, waited):
            if row is None:
                sim.not_reached(f"n{stranded} was still in the ISR of partition {partition} "
                                f"{CUT_S + waited:.0f} s into the cut; nothing was killed")
                return
            sim.kill(others)
            sim.heal_cut()
        sim.after(CUT_S, sim.await_partition, partition, lambda p: stranded not in p[3],
                  self.PATIENCE_S, kill_isr)


PACKAGE = StrandReplica
