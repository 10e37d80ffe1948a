"""elr-crash: Kafka's eligible_leader_replicas_test as a fault, with eligible leader
replicas (KIP-966) on. Of a partition whose ISR is full (three replicas), one follower shuts
down cleanly (SIGTERM: its logs flushed), leaving the ISR at min.insync.replicas (2): it
joins no ELR. Then the other shuts down cleanly, leaving the ISR below the minimum: the
high watermark stops, and it joins the ELR. Then the leader loses power (the nodes run with
``chaoskraft.power.loss.enable``: what it had not flushed is gone) and stays down until the
controller has fenced it (the partition has no leader; the ISR is empty, the ELR both).
It comes back: it crashed, so it must leave the ELR, and the partition must stay leaderless
until the follower in the ELR is back (``REJOIN_S`` later, once the crashed leader has
registered again and could lead), which is then elected, and then the other follower
returns. A controller that elected the crashed leader would lose acknowledged records. Each
phase waits for the metadata to show its state (up to ``PATIENCE_S``); a state that never
comes ends the scenario as not reached (every node it stopped is started again).

The package turns eligible leader replicas on for the whole run (the bootstrap feature
level) and the brokers' count-based fsync off (Kafka's default; ``campaigns/elr.yaml`` leaves
the topic's ``flush.messages`` unset too): the queue workload's topic has
min.insync.replicas 2. The partition's three replicas are never a majority of the
controllers. Other faults that crash every replica of a partition make its last leader
lead again uncleanly (as Kafka's balanced recovery does): without fsync that loses
acknowledged records by design, so its campaign runs it alone.
"""
from __future__ import annotations

from ..faults import PartitionInfo
from ..package import NotReached, Scenario

REJOIN_S = 8.0  # the crashed leader is up this long before the follower in the ELR returns:
# it registers again and is unfenced, so a controller that kept it in the ELR elects it


def elr_choice(partitions: list[PartitionInfo], controllers: set[int],
               rng) -> tuple[int, int, int, int] | None:
    """(partition, leader, the follower leaving at the minimum, the one leaving below it)
    or None when no partition has a leader and a full ISR of three whose replicas can all
    be down with a majority of the controllers left (the controller must fence the leader
    and shrink the ISR meanwhile)."""
    order = sorted(partitions)
    rng.shuffle(order)
    for partition, leader, replicas, isr in order:
        if leader < 0 or len(replicas) != 3 or sorted(isr) != sorted(replicas):
            continue
        if len(controllers - set(replicas)) <= len(controllers) // 2:
            continue
        followers = [r for r in replicas if r != leader]
        first, second = rng.sample(followers, 2)
        return partition, leader, first, second
    return None


class ElrCrash(Scenario):
    name = "elr-crash"
    intends = ("isr-shrink", "partition-offline", "elr-election")
    length_s = 50.0
    aims_at = "a partition left leaderless by a crashed leader, led again by the replica in " \
              "its ELR"
    # Kafka's flush policy (no fsync by count: replication keeps the data, and the ELR is
    # what keeps it so through a crash); the campaign leaves the topic's flush.messages unset
    properties = {"chaoskraft.bootstrap.eligible.leader.replicas.version": "1",
                  "chaoskraft.power.loss.enable": "true",
                  "log.flush.interval.messages": str(10 ** 12)}

    def choose(self, infos, controllers, active, rng):
        return elr_choice(infos, controllers, rng)

    async def act(self, ctx, choice, rng):
        partition, leader, first, second = choice
        value = {"target": self.name, "partition": partition}

        async def phase(holds, what):
            row, waited = await self.await_partition(ctx, partition, holds, self.PATIENCE_S,
                                                     f"partition {partition} {what}")
            if row is None:
                raise NotReached(f"partition {partition} had not {what} in {waited:.0f} s")
        for follower, left in ((first, [leader, second]), (second, [leader])):
            await ctx.kill("stop", [follower], {**value, "nodes": [follower]}, clean=True)
            await phase(lambda p, left=left: sorted(p[3]) == sorted(left),
                        f"the ISR {left} after n{follower} shut down")
        ctx.status(f"elr-crash: n{leader} loses power, alone in the ISR of partition "
                   f"{partition}; n{second} is eligible")
        await ctx.kill("power-loss", [leader], {**value, "nodes": [leader], "via": "process"})
        await phase(lambda p: p[1] < 0, f"no leader after n{leader} lost power")
        await ctx.restart([leader])
        await ctx.clock.sleep(REJOIN_S)
        await ctx.restart([second])
        try:
            await phase(lambda p: p[1] >= 0, f"a leader again after n{second} came back")
        finally:
            await ctx.restart([first])

    def describe(self, choice):
        partition, leader, first, second = choice
        return (f"elr-crash: n{first} then n{second} stop, n{leader} loses power "
                f"(partition {partition})", [first, second, leader])

    def sim_act(self, sim, choice, rng):
        partition, leader, first, second = choice

        def rejoin():
            sim.restart([leader])
            sim.after(REJOIN_S, sim.restart, [second])
        # (what it does, the state it then waits for, that state in words)
        steps = [
            (lambda: sim.kill([first], clean=True), lambda p: sorted(p[3]) == sorted(
                [leader, second]), f"the ISR {[leader, second]} after n{first} shut down"),
            (lambda: sim.kill([second], clean=True), lambda p: p[3] == [leader],
             f"the ISR {[leader]} after n{second} shut down"),
            (lambda: sim.kill([leader], lose_unsynced=True), lambda p: p[1] < 0,
             f"no leader after n{leader} lost power"),
            (rejoin, lambda p: p[1] >= 0, f"a leader again after n{second} came back")]

        def go(row=True, waited=0.0):
            if row is None:
                sim.restart([leader, first, second])
                sim.not_reached(f"partition {partition} had not {steps[0][2]} in "
                                f"{waited:.0f} s")
                return
            if not steps:
                sim.restart([first])
                return
            act, holds, _ = steps[0]
            act()
            sim.after(0, sim.await_partition, partition, holds, self.PATIENCE_S, done)

        def done(row, waited):
            if row is not None:
                steps.pop(0)
            go(row, waited)
        go()


PACKAGE = ElrCrash
