"""reassign: one partition of the queue workload's topic moves to other brokers (KIP-455),
through AlterPartitionReassignments as an operator's admin tool sends it, while the clients
write to it. One replica of a partition is replaced by a broker that holds none: a replica
outside the ISR where there is one, else its leader three times in four (the new broker
then comes first, so leadership moves to it once the move is done), else a follower. The
move is done only once the new replica has caught up and joined the ISR; the scenario waits
for the partition's replicas to be the target (up to ``PATIENCE_S``: a move whose target is
cut off or down waits for it; one that never completes ends the scenario as not reached).
A reassignment no controller took (the quorum has no leader) is asked again, as an admin
tool retries. Other faults may run meanwhile; the removed replica deletes its copy.
"""
from __future__ import annotations

import asyncio
import random

from ..faults import PartitionInfo
from ..package import NotReached, Scenario


LEADER_MOVES = 0.75  # how often a move of an in-sync partition replaces its leader


def reassign_choice(partitions: list[PartitionInfo], brokers: list[int],
                    rng: random.Random) -> tuple[int, list[int]] | None:
    """(partition, target replicas) or None when no partition has a leader, a broker
    outside its replicas and at most one replica outside its ISR. A replica outside the
    ISR is the one replaced (an operator's move off a lagging broker; the move can complete
    without it); else the leader (``LEADER_MOVES`` of the time) or a follower."""
    order = sorted(partitions)
    rng.shuffle(order)
    for partition, leader, replicas, isr in order:
        spare = sorted(set(brokers) - set(replicas))
        lagging = [r for r in replicas if r not in isr]
        if leader < 0 or not spare or len(lagging) > 1:
            continue
        new = spare[rng.randrange(len(spare))]
        if lagging:
            out = lagging[0]
        elif rng.random() < LEADER_MOVES:  # the new broker is preferred, and leads
            return partition, [new] + [r for r in replicas if r != leader]
        else:
            out = rng.choice([r for r in replicas if r != leader])
        return partition, [new if r == out else r for r in replicas]
    return None


RETRY_S = 1.0  # between two attempts of a reassignment no controller took
POLL_S = 0.5  # between two looks at the simulated cluster (``sim_find``)
# Answers after which the cluster surely did not take the reassignment, and may later: the
# quorum has no leader, or the broker asked does not know it yet
RETRIABLE = ("NotControllerError", "RequestTimedOutError")


def transient(error: str | None) -> bool:
    """Is ``error`` (an error name, or an exception as "Type: message") worth asking again?"""
    return error is not None and (error in RETRIABLE or ":" in error)


# A partition the controller's answer leaves out: not taken, asked again
LEFT_OUT = "NoAnswer: the answer did not name the partition"


async def ask_reassignment(ctx, scenario, partition: int, target: list[int],
                           topic: str | None = None) -> str | None:
    """AlterPartitionReassignments of ``partition`` (of the workload's topic, or of the
    internal ``topic``) to ``target``, asked again while no controller takes it (as an
    admin tool retries), for up to the scenario's ``PATIENCE_S``: the error it was refused
    with, or None once accepted."""
    return (await ask_reassignments(ctx, scenario, {partition: target}, topic))[partition]


async def ask_reassignments(ctx, scenario, moves: dict[int, list[int]],
                            topic: str | None = None) -> dict[int, str | None]:
    """``ask_reassignment`` of many partitions of one topic in one request (as an admin
    tool sends a plan), those no controller took asked again together: partition -> the
    error it was refused with, or None once accepted."""
    start = ctx.clock.monotonic()
    out: dict[int, str | None] = {}
    left = dict(moves)
    if not left:
        return out
    while True:
        try:
            answers = await asyncio.to_thread(ctx.reassign, left, topic)
        except Exception as exc:  # noqa: BLE001 - no controller answered (yet)
            answers = {p: f"{type(exc).__name__}: {exc}" for p in left}
        waited = ctx.clock.monotonic() - start
        for p in list(left):
            error = answers.get(p, LEFT_OUT)
            if not transient(error) or waited >= scenario.PATIENCE_S:
                out[p] = error
                del left[p]
        if not left:
            return out
        many = f" ({len(left)} partitions)" if len(left) > 1 else ""
        ctx.log(f"{scenario.name}: {answers.get(min(left), LEFT_OUT)}{many}; asking again "
                f"({waited:.0f} s of at most {scenario.PATIENCE_S:.0f})")
        await ctx.clock.sleep(RETRY_S)


def sim_reassign(sim, partition: int, target: list[int], patience: float, done,
                 first: bool = True, topic: str | None = None) -> None:
    """``ask_reassignment`` and the wait for the partition to reach ``target`` on the
    simulated cluster: ``done(row, waited_s)`` as ``PlanFaults.await_partition`` calls it (a
    refusal ends the step as not reached). ``first``: asked as the step starts (no active
    controller: ``Skipped``), not from a later phase."""
    waited = [0.0]

    def answered(error):
        if error is not None and error.startswith("NOT_CONTROLLER") and waited[0] < patience:
            waited[0] += RETRY_S
            sim.after(RETRY_S, lambda: sim.reassign(partition, target, answered, False, topic))
            return
        if error is not None:
            sim.not_reached(f"the reassignment of {topic or 'partition'}{'-' if topic else ' '}"
                            f"{partition} to {target} was refused: {error}")
            return
        sim.await_partition(partition, lambda p: p[2] == target, patience, done, topic=topic)
    sim.reassign(partition, target, answered, first, topic)


class Reassign(Scenario):
    name = "reassign"
    intends = ("reassignment-started", "reassignment-completed", "isr-expand")
    length_s = 15.0
    aims_at = "a partition moved to another broker, which caught up, while clients write"
    opens = ("reassign",)
    closes = ("reassigned",)
    colour = "#72b7b2"
    brokers: list[int] = []

    def choose(self, infos, controllers, active, rng):
        return reassign_choice(infos, self.brokers, rng)

    async def start(self, ctx, step, opts, rng, controller, leader):
        self.brokers = list(ctx.ids)
        return await super().start(ctx, step, opts, rng, controller, leader)

    async def act(self, ctx, choice, rng):
        partition, target = choice
        value = {"partition": partition, "replicas": target}
        ctx.history.record("nemesis", "invoke", "reassign", value=value)
        error = await ask_reassignment(ctx, self, partition, target)
        ctx.history.record("nemesis", "info", "reassign", value={**value, "error": error})
        if error is not None:
            raise NotReached(f"the reassignment of partition {partition} to {target} was "
                             f"refused: {error}")
        ctx.status(f"reassign: partition {partition} moving to {target}")
        row, waited = await self.await_partition(
            ctx, partition, lambda p: p[2] == target, self.PATIENCE_S,
            f"partition {partition} on {target}")
        if row is None:
            raise NotReached(f"partition {partition} had not reached {target} "
                             f"{waited:.0f} s after its reassignment was accepted")
        ctx.history.record("nemesis", "info", "reassigned",
                           value={**value, "leader": row[1], "waited_s": round(waited, 1)})

    def describe(self, choice):
        partition, target = choice
        return f"reassign: partition {partition} to {target}", []

    def simulate(self, sim, step, opts, rng, controller, leader):
        self.brokers = list(sim.ids)
        return super().simulate(sim, step, opts, rng, controller, leader)

    def sim_act(self, sim, choice, rng):
        partition, target = choice

        def done(row, waited):
            if row is None:
                sim.not_reached(f"partition {partition} had not reached {target} "
                                f"{waited:.0f} s after its reassignment was accepted")
        sim_reassign(sim, partition, target, self.PATIENCE_S, done)


def sim_move_all(sim, asked: list, broker: int, patience: float, then,
                 first: bool = False) -> None:
    """Each (topic, or None for the workload's, partition, target) of ``asked`` reassigned on
    the simulated cluster (a partition of the workload's released once done); ``then()``
    once every move is done, else the step is not reached. ``first``: as ``sim_reassign``."""
    pending = {(t, p) for t, p, _ in asked}
    if not pending:
        then()
    for t, p, r in asked:
        def done(row, waited, topic=t, partition=p, target=r):
            if topic is None:
                sim.release([partition])
            if row is None:
                sim.not_reached(f"{topic + '-' if topic else 'partition '}{partition} had not "
                                f"left n{broker} for {target} {waited:.0f} s after its "
                                f"reassignment was accepted")
                return
            pending.discard((topic, partition))
            if not pending:
                then()
        sim_reassign(sim, p, r, patience, done, first=first, topic=t)


def sim_find(sim, find, patience: float, then, why: str, waited: float = 0.0) -> None:
    """``then(found)`` once ``find()`` is not None, asked every POLL_S of simulated time
    for at most ``patience`` seconds; else the step is not reached, ``why``."""
    found = find()
    if found is not None:
        then(found)
    elif waited < patience:
        sim.after(POLL_S, sim_find, sim, find, patience, then, why, waited + POLL_S)
    else:
        sim.not_reached(why)


PACKAGE = Reassign
