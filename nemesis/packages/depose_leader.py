"""depose-leader: a partition's leader (its preferred replica, where one leads) is cut from
every other node while clients still reach it, for ``CUT_S``, long enough to be fenced and
replaced; the records it appends alone are uncommitted. Then it also refuses its clients
for ``REFUSE_S`` (a TCP reset on the client port): a producer whose sends time out on a
deposed leader gets no error that sends it elsewhere, and the reset moves it to the new
leader, which fills the offsets the deposed one filled alone. The clients are refused only
once the other nodes name a new leader (waited for up to ``PATIENCE_S`` more: on a slow
machine the election can take longer than ``CUT_S``; a leader never named ends the scenario
as not reached), and stay refused until the clients have had ``PROGRESS_OPS`` operations
acknowledged elsewhere. After healing the deposed
leader must truncate what it appended (leader epochs) before following, and the
preferred-leader election (``leader.imbalance.check.interval.seconds``, set to 3) makes it
the leader again.
"""
from __future__ import annotations

import random

from ..faults import PARTITION_CHAIN, PartitionInfo, chain_script, grudge, grudge_value
from ..package import NotReached, Scenario, Unreachable
from ..seeded import Seeded

CUT_S = 12.0  # the cut outlasts the broker session (9 s) and an election
REFUSE_S = 5.0  # then its clients are refused, long enough to move to the new leader
PROGRESS_OPS = 20  # and until this many operations were acknowledged by the others


def refuse_script(port: int) -> list[str]:
    """The command that answers every new and every open TCP connection to ``port`` with a
    reset, in the partition chain (healing removes it): a node its clients see go away."""
    return chain_script(PARTITION_CHAIN, [f"-p tcp --dport {port} -j REJECT --reject-with tcp-reset"])


def depose_choice(partitions: list[PartitionInfo],
                  rng: random.Random) -> tuple[int, int] | None:
    """(partition, its leader): a partition led by its preferred replica where there is one
    (the preferred-leader election brings it back), or None when no partition has a leader
    that another in-sync replica could replace: cut off a leader alone in its ISR and, with
    unclean elections off, the partition has no leader until it comes back (on a starved
    machine followers fall out of the ISR; the scenario waits until they are back in)."""
    led = sorted(p for p in partitions if p[1] >= 0 and set(p[3]) - {p[1]})
    preferred = [p for p in led if p[2] and p[2][0] == p[1]]
    pool = preferred or led
    if not pool:
        return None
    partition, leader, _, _ = pool[rng.randrange(len(pool))]
    return partition, leader


def leaderless(row: PartitionInfo, leader: int) -> bool:
    """The partition has no leader and no replica but the cut-off ``leader`` in its ISR:
    with unclean elections off, none may lead until that one is back."""
    return row[1] < 0 and set(row[3]) <= {leader}


def leaderless_reason(row: PartitionInfo, leader: int) -> str:
    return (f"partition {row[0]} has no leader and only n{leader}, cut off, in its ISR "
            f"{row[3]}: the other replicas had fallen out of the ISR before the cut, and with "
            f"unclean elections off none may lead")


class DeposeLeader(Scenario):
    name = "depose-leader"
    intends = ("partition-leader-elected", "epoch-truncation")
    length_s = 18.0
    # the scenario timeline, one after another (this member times it for both)
    seeded = (Seeded("scenario", mean_ms=lambda o, q: q and q.scenario_mean_ms,
                     stat="scenarios"),)
    aims_at = "a new leader elected while the old one, cut off, still takes writes"
    properties = {"leader.imbalance.check.interval.seconds": "3"}

    def choose(self, infos, controllers, active, rng):
        return depose_choice(infos, rng)

    async def act(self, ctx, choice, rng):
        partition, leader = choice
        g = grudge("isolate-partition-leader", ctx.ids, rng, leader=leader)
        await ctx.cut(g, {"shape": self.name, "partition": partition, "grudge": grudge_value(g)})
        ctx.status(f"depose-leader: n{leader} (leader of partition {partition}) cut from every node")
        await ctx.clock.sleep(CUT_S)
        row, waited = await self.await_partition(
            ctx, partition, lambda p: (p[1] >= 0 and p[1] != leader) or leaderless(p, leader),
            self.PATIENCE_S, f"a new leader of partition {partition} (n{leader} cut off)")
        if row is not None and leaderless(row, leader):
            raise Unreachable(leaderless_reason(row, leader))
        if row is None:
            raise NotReached(f"no new leader of partition {partition} was named within "
                             f"{CUT_S + waited:.0f} s of cutting its leader n{leader} off")
        # Its clients' sends time out there with no error that sends them elsewhere (a
        # producer kept writing to the deposed leader for 30 s): connections reset now send
        # them to the new leader, which fills the offsets the deposed leader filled alone.
        value = {"nodes": [leader], "port": ctx.client_port, "partition": partition,
                 "new_leader": row[1], "waited_s": round(waited, 1)}
        ctx.history.record("nemesis", "invoke", "refuse-clients", value=value)
        await ctx.exec_all([leader], lambda n: refuse_script(ctx.client_port), check=True)
        ctx.history.record("nemesis", "info", "refuse-clients", value=value)
        ctx.status(f"depose-leader: n{leader} cut off and refusing clients (partition {partition})")
        await self.await_progress(ctx, PROGRESS_OPS, REFUSE_S, self.PATIENCE_S,
                                  f"{PROGRESS_OPS} operations acknowledged by the other nodes")

    def describe(self, choice):
        return f"depose-leader: n{choice[1]} (leader of partition {choice[0]})", []

    def sim_act(self, sim, choice, rng):
        partition, leader = choice
        sim.cut(grudge("isolate-partition-leader", sim.ids, rng, leader=leader))

        def refuse(row, waited):
            if row is not None and leaderless(row, leader):
                sim.not_reached(leaderless_reason(row, leader))
                return
            if row is None:
                sim.not_reached(f"no new leader of partition {partition} was named within "
                                f"{CUT_S + waited:.0f} s of cutting its leader n{leader} off")
                return
            sim.refuse_clients([leader])
        sim.after(CUT_S, sim.await_partition, partition,
                  lambda p: (p[1] >= 0 and p[1] != leader) or leaderless(p, leader),
                  self.PATIENCE_S, refuse)


PACKAGE = DeposeLeader
