"""decommission: a broker leaves the cluster and a new machine takes its place, as an
operator does it, while the clients write and other faults run:

1. every partition of the workload's topic with a replica on the broker moves off it
   (AlterPartitionReassignments: the broker's replica replaced by one that holds none of the
   partition), each move done once the new replica is in the ISR; then every partition of
   Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``) with a replica
   on it, in the same way (one fewer replica where every other broker holds one already):
   a broker that goes away with the only in-sync replica of a transaction log partition
   leaves that partition offline for good, and the transactional producers it coordinated
   stuck;
2. the broker shuts down cleanly and is unregistered (UnregisterBroker through the running
   brokers, as ``kafka-cluster unregister`` sends it): it leaves every ISR and the cluster's
   metadata, and the step waits until no running broker's Metadata lists it;
3. a new machine takes its place, under a **new node id** (``replacement: new-id``, the
   default): Docker starts another container from the same image on the cluster's network,
   over SSH a spare host of the hosts file is taken, the simulator adds a node; it formats
   with a directory id of its own and registers as a new broker, and the old machine stays
   down, out of the cluster for good (kept, with its logs and data; nothing starts it again
   and no fault picks it). With ``replacement: same-id``, or where there is no machine to
   add (an SSH hosts file naming no spare host: the log says so), the new machine comes
   under the old id instead: its data directory emptied (a new disk), it starts, formats,
   and registers again. Either way the step waits until every running broker lists it;
4. one partition of the topic moves onto it (a follower's replica replaced), done once it
   has caught up and joined the ISR.

With ``replacement: none`` the cluster shrinks instead: after 2 the broker stays down, out
of the cluster for good, and no machine comes (3 and 4 are left out); a broker is chosen
only while every partition on it has a broker to go to, so the topic keeps its
replication factor.

A broker that is only a broker is chosen (a controller's voter would need the voters
package's changes first), of those up, so the topic's replicas can go to the others. Each
phase waits for its state for at most ``PATIENCE_S`` (a move whose target is cut off or down
waits for it); one that never comes ends the step as not reached, with the broker started
again. The package keeps the view an operator has: the moves asked, the broker's
registration as the brokers' Metadata shows it, and the change pending (each row below).
History rows: ``decommission`` (invoke, info: the moves asked), ``decommission-internal``
(info: the internal topics' moves asked, where the broker held any), ``decommissioned`` (it is
out of every broker's Metadata), ``recommission`` (invoke: the new machine is being
brought), ``recommissioned`` (info: the new broker, ``replaced`` naming the old id when it
is a new one, listed by every broker, and the partition moved onto it), or with
``replacement: none`` ``retired`` (info: the broker left for good).
"""
from __future__ import annotations

import asyncio
import random

from ..package import NotReached, Scenario, Skipped, one_of
from .reassign import (ask_reassignment, ask_reassignments, sim_find, sim_move_all,
                       sim_reassign)

POLL_S = 0.5  # between two looks at the brokers' Metadata
ANSWER_S = 5.0  # an UnregisterBroker answer that has not come by then never will: asked again
NO_BROKER = "every node is a controller: no broker-only node to decommission"
# Answers after which UnregisterBroker is asked again: the quorum has no leader yet
RETRIABLE = ("NOT_CONTROLLER", "REQUEST_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER")
# the new machine's node id: a new one, or the old; or no new machine (the cluster shrinks)
REPLACEMENTS = ("new-id", "same-id", "none")
# Kafka's internal topics, whose replicas an operator moves off the broker too
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")

# The data directory emptied, as a new disk would be: run where the node runs (its
# container, or its host's root), the node stopped
EMPTY_PY = ("import os, shutil, sys\n"
            "d = sys.argv[1]\n"
            "for x in os.listdir(d):\n"
            "    p = os.path.join(d, x)\n"
            "    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)\n")


def empty_cmd(data_dir: str) -> list[str]:
    return ["python3", "-c", EMPTY_PY, data_dir]


def moves_off(infos, broker: int, brokers: list[int],
              rng: random.Random) -> dict[int, list[int]] | None:
    """Partition -> target replicas with ``broker``'s replica replaced by one of ``brokers``
    the partition lacks, for every partition on ``broker``; None when one of them has no
    leader or no such broker, or the topic's partitions are not known (no metadata: that is
    not a broker holding nothing)."""
    if not infos:
        return None
    moves = {}
    for partition, leader, replicas, _ in sorted(infos):
        if broker not in replicas:
            continue
        spare = sorted(set(brokers) - set(replicas) - {broker})
        if leader < 0 or not spare:
            return None
        new = spare[rng.randrange(len(spare))]
        moves[partition] = [new if r == broker else r for r in replicas]
    return moves


def internal_moves_off(internal: dict[str, list], broker: int, brokers: list[int],
                       rng: random.Random) -> dict[str, dict[int, list[int]]] | None:
    """``moves_off`` for each internal topic (topic -> infos; one not made yet holds
    nothing): topic -> its moves, leaving out topics with none. A partition with a replica
    on every other broker (a cluster of three, with the internal topics' replication
    factor of three) is left one replica fewer, as an operator shrinks it; None when a
    partition on ``broker`` has no leader, or no other replica."""
    out: dict[str, dict[int, list[int]]] = {}
    for topic, infos in sorted(internal.items()):
        for partition, leader, replicas, _ in sorted(infos):
            if broker not in replicas:
                continue
            spare = sorted(set(brokers) - set(replicas) - {broker})
            rest = [r for r in replicas if r != broker]
            if leader < 0 or not (spare or rest):
                return None
            new = spare[rng.randrange(len(spare))] if spare else None
            out.setdefault(topic, {})[partition] = (
                [new if r == broker else r for r in replicas] if spare else rest)
    return out


def too_few(infos, members: list[int]) -> str | None:
    """Why no broker of ``members`` (the cluster's brokers, down ones too) can ever leave:
    every partition of the topic has a replica on every one of them (no more brokers than
    its smallest replica set: a partition being moved has more replicas for a while), so
    none has anywhere to go (a cluster ``replacement: none`` shrank that far, or one made
    so); None if one can."""
    rf = min((len(replicas) for _, _, replicas, _ in infos), default=0)
    if infos and len(members) <= rf:
        return (f"the cluster has {len(members)} brokers, no more than the topic's "
                f"replication factor ({rf}): none can leave it")
    return None


def move_onto(infos, broker: int, rng: random.Random,
              busy: set[int] = frozenset()) -> tuple[int, list[int]] | None:
    """(partition, target) putting ``broker`` in place of a follower of a partition led,
    with a full ISR and no replica on it, and not ``busy`` (another step is moving it);
    None when none is so."""
    fits = [(p, leader, replicas) for p, leader, replicas, isr in sorted(infos)
            if leader >= 0 and broker not in replicas and sorted(isr) == sorted(replicas)
            and len(replicas) > 1 and p not in busy]
    if not fits:
        return None
    partition, leader, replicas = fits[rng.randrange(len(fits))]
    out = rng.choice([r for r in replicas if r != leader])
    return partition, [broker if r == out else r for r in replicas]


def lists_none(lists: dict, broker: int) -> bool:
    """Does every broker that answered leave ``broker`` out (and one at least answer)?"""
    answered = [ids for ids in lists.values() if ids is not None]
    return bool(answered) and all(broker not in ids for ids in answered)


def lists_all(lists: dict, broker: int) -> bool:
    """Does every running broker list ``broker`` (``broker`` itself among them)?"""
    return broker in lists and all(ids is not None and broker in ids for ids in lists.values())


class Decommission(Scenario):
    name = "decommission"
    intends = ("reassignment-started", "reassignment-completed", "broker-unregistered",
               "isr-expand")
    length_s = 60.0  # a Docker step spends most of it: the moves, the stop, the new start
    aims_at = "a broker moved off, unregistered, and a new one registered in its place"
    opens = ("decommission",)
    closes = ("recommissioned", "retired")
    colour = "#8c6d31"
    options = {**Scenario.options, "replacement": one_of(REPLACEMENTS)}
    defaults = {"replacement": "new-id"}
    brokers: list[int] = []  # broker-only nodes that are up, and every broker that is up
    up: list[int] = []
    replacement = "new-id"

    def choose(self, infos, controllers, active, rng):
        candidates = [b for b in self.brokers if b not in controllers]
        rng.shuffle(candidates)
        for broker in candidates:
            moves = moves_off(infos, broker, self.up, rng)
            if moves is not None:
                return broker, moves
        return None

    async def start(self, ctx, step, opts, rng, controller, leader):
        self.replacement = opts.get("replacement", "new-id")
        # of the cluster's nodes (``ids``: a machine an earlier step took out is not)
        self.up = [n.node_id for n in ctx.backend.nodes if "broker" in n.roles
                   and n.node_id in ctx.ids and n.node_id not in ctx.killed]
        self.brokers = [n.node_id for n in ctx.backend.nodes if n.roles == ("broker",)
                        and n.node_id in ctx.ids and n.node_id not in ctx.killed]
        if not any(n.roles == ("broker",) and n.node_id in ctx.ids for n in ctx.backend.nodes):
            raise Skipped(NO_BROKER)
        try:
            infos = await asyncio.to_thread(ctx.partition_infos)
        except Exception:  # noqa: BLE001 - no metadata now: the aim waits for it
            infos = []
        if why := too_few(infos, [n.node_id for n in ctx.backend.nodes if "broker" in n.roles
                                  and n.node_id in ctx.ids]):
            raise Skipped(why)
        self._listed_only(await ctx.broker_lists())
        return await super().start(ctx, step, opts, rng, controller, leader)

    def _listed_only(self, lists: dict) -> None:
        """Keep of ``up`` and ``brokers`` only those every running broker that answered
        lists (``lists``: broker -> the ids its Metadata lists, None: no answer): a machine
        another step has just added is not registered yet, and a move onto it is refused
        (InvalidReplicationAssignment)."""
        listed = [set(ids) for ids in lists.values() if ids is not None]
        if listed:
            known = set.intersection(*listed)
            self.up = [b for b in self.up if b in known]
            self.brokers = [b for b in self.brokers if b in known]

    async def _await_lists(self, ctx, holds, what: str) -> float | None:
        """Wait for ``holds`` of the running brokers' Metadata lists, at most PATIENCE_S:
        the seconds it took, None if it never held."""
        start = ctx.clock.monotonic()
        while True:
            lists = await ctx.broker_lists()
            waited = ctx.clock.monotonic() - start
            if holds(lists):
                return waited
            if waited >= self.PATIENCE_S:
                ctx.log(f"{self.name}: {what}: did not come within {waited:.0f} s (brokers "
                        f"listed: {lists})")
                return None
            await ctx.clock.sleep(POLL_S)

    async def act(self, ctx, choice, rng):
        broker, moves = choice
        await self._claim(ctx, set(moves))
        try:
            await self._act(ctx, broker, moves, rng)
        finally:
            ctx.moving.difference_update(moves)

    async def _claim(self, ctx, partitions: set[int]) -> None:
        """Wait (at most PATIENCE_S) until no other step is moving any of ``partitions``
        (``ctx.moving``: a scenario beside this one, whose wait for its own target a move
        of ours would make endless), then take them."""
        start = ctx.clock.monotonic()
        while partitions & ctx.moving:
            if ctx.clock.monotonic() - start >= self.PATIENCE_S:
                raise NotReached(f"partitions {sorted(partitions & ctx.moving)} were being "
                                 f"moved by another step for {self.PATIENCE_S:.0f} s")
            await ctx.clock.sleep(POLL_S)
        ctx.moving.update(partitions)

    async def _act(self, ctx, broker: int, moves: dict, rng) -> None:
        value = {"node": broker, "moves": {str(p): t for p, t in moves.items()}}
        ctx.history.record("nemesis", "invoke", "decommission", value=value)
        errors = await ask_reassignments(ctx, self, moves)
        ctx.history.record("nemesis", "info", "decommission", value={
            **value, "errors": [e for e in errors.values() if e is not None]})
        for p, error in errors.items():
            if error is not None:
                raise NotReached(f"moving partition {p} off n{broker} to {moves[p]} was "
                                 f"refused: {error}")
        ctx.status(f"decommission: partitions {sorted(moves)} moving off n{broker}")
        await self._await_moves(ctx, broker, moves)
        ctx.moving.difference_update(moves)  # moved: other steps may move them again
        await self._move_internal(ctx, broker, rng)
        await ctx.kill("stop", [broker], {"target": self.name, "nodes": [broker]}, clean=True)
        error = await ctx.unregister_broker(broker, self.PATIENCE_S)
        if error is not None:
            raise NotReached(f"UnregisterBroker {broker} was refused: {error}")
        waited = await self._await_lists(ctx, lambda ls: lists_none(ls, broker),
                                         f"n{broker} out of every broker's Metadata")
        if waited is None:
            raise NotReached(f"n{broker} was still listed {self.PATIENCE_S:.0f} s after it "
                             f"was unregistered")
        ctx.history.record("nemesis", "info", "decommissioned",
                           value={"node": broker, "waited_s": round(waited, 1)})
        holding = await self._holding(ctx, broker)
        if holding is None or holding:
            raise NotReached(f"n{broker} is a replica of partitions {holding} again: its disk "
                             f"is kept" if holding else f"no metadata of the topic came within "
                             f"{self.PATIENCE_S:.0f} s to show n{broker} holds none: its disk "
                             f"is kept")
        if self.replacement == "none":
            await self._retire(ctx, broker)
        else:
            await self._recommission(ctx, broker, rng)

    async def _retire(self, ctx, broker: int) -> None:
        """No machine takes the broker's place: it stays down, out of the cluster for good."""
        if broker not in ctx.killed:  # another fault's end started it again meanwhile
            await ctx.kill("stop", [broker], {"target": self.name, "nodes": [broker]},
                           clean=True)
        ctx.retire(broker)
        ctx.history.record("nemesis", "info", "retired", value={"node": broker})

    async def _move_internal(self, ctx, broker: int, rng) -> None:
        """Move the internal topics' replicas off ``broker`` and wait until every move is
        done (an internal partition on it without a leader is waited for, at most
        PATIENCE_S)."""
        def find():
            try:
                internal = {t: ctx.partition_infos(t) for t in INTERNAL_TOPICS}
            except Exception:  # noqa: BLE001 - no metadata now: not yet
                return None, None
            return internal_moves_off(internal, broker, self.up, rng), internal
        moves = await self._find(ctx, find, lambda seen: (
            f"an internal topic's partition on n{broker} had no leader or nowhere to go for "
            f"{self.PATIENCE_S:.0f} s ({seen})"))
        if not moves:
            return
        # one request a topic, as an operator's reassignment plan
        topics = sorted(moves)
        answers = await asyncio.gather(*(ask_reassignments(ctx, self, moves[t], t)
                                         for t in topics))
        ctx.history.record("nemesis", "info", "decommission-internal", value={
            "node": broker, "moves": {t: {str(p): r for p, r in m.items()}
                                      for t, m in moves.items()},
            "errors": [e for a in answers for e in a.values() if e is not None]})
        for t, errors in zip(topics, answers):
            for p, error in errors.items():
                if error is not None:
                    raise NotReached(f"moving {t}-{p} off n{broker} to {moves[t][p]} was "
                                     f"refused: {error}")
        ctx.status(f"decommission: {sum(len(m) for m in moves.values())} internal partitions "
                   f"moving off n{broker}")
        for t in topics:
            await self._await_moves(ctx, broker, moves[t], t)

    async def _await_moves(self, ctx, broker: int, moves: dict, topic: str | None = None):
        """Wait until each partition of ``moves`` (of the workload's topic, or ``topic``)
        has its target replicas, at most PATIENCE_S; else NotReached naming the first that
        had not."""
        if not moves:
            return
        name = f"{topic}-" if topic else "partition "
        _, left, waited = await self.await_partitions(
            ctx, {p: (lambda r, t=t: r[2] == t) for p, t in moves.items()}, self.PATIENCE_S,
            f"{len(moves)} partition{'s' if len(moves) > 1 else ''} of {topic or 'the topic'} "
            f"off n{broker}", topic)
        if left:
            p = min(left)
            raise NotReached(f"{name}{p} had not left n{broker} for {moves[p]} {waited:.0f} s "
                             f"after its reassignment was accepted"
                             + (f" ({len(left) - 1} more had not)" if len(left) > 1 else ""))

    async def _find(self, ctx, find, why):
        """``find()`` (blocking: run in a thread; (what it found or None, what it saw)) asked
        every POLL_S until it finds something, at most PATIENCE_S; else NotReached, ``why``
        of what it saw last."""
        start = ctx.clock.monotonic()
        while True:
            found, seen = await asyncio.to_thread(find)
            if found is not None:
                return found
            if ctx.clock.monotonic() - start >= self.PATIENCE_S:
                raise NotReached(why(seen))
            await ctx.clock.sleep(POLL_S)

    async def _holding(self, ctx, broker: int) -> list[int] | None:
        """The topic's partitions that still name ``broker`` a replica in the freshest
        metadata, asked again until some is known (at most PATIENCE_S): before its disk is
        emptied, what the scenario chose from is checked once more."""
        start = ctx.clock.monotonic()
        while True:
            try:
                infos = await asyncio.to_thread(ctx.partition_infos)
            except Exception:  # noqa: BLE001 - no metadata now: not yet
                infos = []
            if infos:
                return [p for p, _, replicas, _ in infos if broker in replicas]
            if ctx.clock.monotonic() - start >= self.PATIENCE_S:
                return None
            await ctx.clock.sleep(POLL_S)

    async def _recommission(self, ctx, broker: int, rng) -> None:
        ctx.history.record("nemesis", "invoke", "recommission",
                           value={"node": broker, "replacement": self.replacement})
        if broker not in ctx.killed:  # another fault's end started it again meanwhile
            await ctx.kill("stop", [broker], {"target": self.name, "nodes": [broker]},
                           clean=True)
        old, new = broker, None
        if self.replacement == "new-id":
            new = await ctx.add_broker(old)
        if new is None:
            await ctx.exec_all([old], lambda n: empty_cmd(ctx.data_dir), check=True)
            await ctx.restart([old])
        broker = old if new is None else new
        partition, target = await self._join(ctx, broker, rng, "" if new is None else "new ")
        ctx.history.record("nemesis", "info", "recommissioned",
                           value={"node": broker, "partition": partition, "replicas": target,
                                  **({} if new is None else {"replaced": old})})

    async def _join(self, ctx, broker: int, rng, what: str = "new ") -> tuple[int, list[int]]:
        """Wait until every running broker lists the just started ``broker``, then move a
        partition led with a full ISR onto it and wait until it is in that ISR: (partition,
        its replicas). NotReached when a state does not come within PATIENCE_S."""
        waited = await self._await_lists(ctx, lambda ls: lists_all(ls, broker),
                                         f"n{broker} registered" + ("" if what else " again"))
        if waited is None:
            raise NotReached(f"the new n{broker} was not listed by every broker "
                             f"{self.PATIENCE_S:.0f} s after it started")
        def find():  # a partition led with a full ISR (right after a fault, maybe none yet)
            infos = ctx.partition_infos()
            return move_onto(infos, broker, rng, ctx.moving), infos
        partition, target = await self._find(ctx, find, lambda seen: (
            f"no partition could move onto the {what}n{broker} within "
            f"{self.PATIENCE_S:.0f} s ({seen})"))
        ctx.moving.add(partition)
        try:
            return await self._move_onto(ctx, broker, partition, target, what)
        finally:
            ctx.moving.discard(partition)

    async def _move_onto(self, ctx, broker, partition, target, what) -> tuple[int, list[int]]:
        error = await ask_reassignment(ctx, self, partition, target)
        if error is not None:
            raise NotReached(f"moving partition {partition} onto the {what}n{broker} was "
                             f"refused: {error}")
        row, waited = await self.await_partition(
            ctx, partition, lambda r: r[2] == target and broker in r[3], self.PATIENCE_S,
            f"partition {partition} on {target}, n{broker} in its ISR")
        if row is None:
            raise NotReached(f"partition {partition} had not reached {target} with n{broker} "
                             f"in its ISR {waited:.0f} s after its move was accepted")
        return partition, target

    def describe(self, choice):
        broker, moves = choice
        place = {"new-id": "a new broker in its place", "same-id": f"a new n{broker} in its "
                 f"place", "none": "no machine in its place"}[self.replacement]
        return f"decommission: n{broker} (partitions {sorted(moves)} moved off), {place}", \
            [broker]

    # ------------------------------------------------------------- the simulated form

    def simulate(self, sim, step, opts, rng, controller, leader):
        self.replacement = opts.get("replacement", "new-id")
        self.up = [n for n in sim.ids if n not in sim.killed]
        self.brokers = [n for n in self.up if n not in sim.controllers]
        if not set(sim.ids) - sim.controllers:
            raise Skipped(NO_BROKER)
        if why := too_few(sim.partition_infos(), list(sim.ids)):
            raise Skipped(why)
        self._listed_only(sim.broker_lists())
        return super().simulate(sim, step, opts, rng, controller, leader)

    def _sim_lists(self, sim, holds, then, waited: float = 0.0) -> None:
        if holds(sim.broker_lists()):
            then(waited)
        elif waited >= self.PATIENCE_S:
            then(None)
        else:
            sim.after(POLL_S, self._sim_lists, sim, holds, then, waited + POLL_S)

    def sim_act(self, sim, choice, rng):
        broker, moves = choice
        patience = self.PATIENCE_S
        new = [broker]  # the new machine's node id, once it is there

        def internal():  # _move_internal
            sim_find(sim, lambda: internal_moves_off(
                {t: sim.partition_infos(t) for t in INTERNAL_TOPICS}, broker, self.up, rng),
                patience, lambda moves: sim_move_all(
                    sim, [(t, p, r) for t, m in moves.items() for p, r in m.items()], broker,
                    patience, lambda: stop(0.0)),
                f"an internal topic's partition on n{broker} had no leader or nowhere to go "
                f"for {patience:.0f} s")

        def stop(waited):
            sim.kill([broker], clean=True)
            ask(waited)

        def ask(waited):  # UnregisterBroker; one whose answer is lost is asked again
            heard = [False]

            def answered(error):
                if not heard[0]:
                    heard[0] = True
                    unregistered(error, waited)

            def unanswered():
                if not heard[0]:
                    heard[0] = True
                    unregistered("REQUEST_TIMED_OUT", waited + ANSWER_S)
            sim.unregister_broker(broker, answered)
            sim.after(ANSWER_S, unanswered)

        def unregistered(error, waited):
            if error in RETRIABLE and waited < patience:
                sim.after(1.0, ask, waited + 1.0)
            elif error is not None and error != "BROKER_ID_NOT_REGISTERED":
                sim.restart([broker])
                sim.not_reached(f"UnregisterBroker {broker} was refused: {error}")
            else:
                self._sim_lists(sim, lambda ls: lists_none(ls, broker), gone)

        def gone(waited):
            if waited is None:
                sim.restart([broker])
                sim.not_reached(f"n{broker} was still listed {patience:.0f} s after it was "
                                f"unregistered")
                return
            infos = sim.partition_infos()
            holding = [p for p, _, replicas, _ in infos if broker in replicas]
            if holding or not infos:
                sim.restart([broker])
                sim.not_reached(f"n{broker} is a replica of partitions {holding} again (or "
                                f"no metadata is known): its disk is kept")
                return
            if sim.running(broker):  # another fault's end started it again meanwhile
                sim.kill([broker], clean=True)
            if self.replacement == "none":
                sim.retire(broker)
                return
            if self.replacement == "new-id":
                new[0] = sim.add_broker(broker)
            else:
                sim.wipe(broker)
                sim.restart([broker])
            self._sim_join(sim, new[0], rng)

        def ask_moves(waited):
            if set(moves) & sim.busy() and waited < patience:  # another step moves them
                sim.after(POLL_S, ask_moves, waited + POLL_S)
                return
            if set(moves) & sim.busy():
                sim.not_reached(f"partitions {sorted(set(moves) & sim.busy())} were being "
                                f"moved by another step for {patience:.0f} s")
                return
            sim.claim(moves)
            sim_move_all(sim, [(None, p, t) for p, t in moves.items()], broker, patience,
                          internal, first=True)
        ask_moves(0.0)


    def _sim_join(self, sim, broker: int, rng, then=None) -> None:
        """``_join`` on the simulated cluster; ``then(partition, replicas)`` once done."""
        patience = self.PATIENCE_S

        def back(waited):
            if waited is None:
                sim.not_reached(f"the new n{broker} was not listed by every broker "
                                f"{patience:.0f} s after it started")
            else:
                onto(0.0)

        def onto(_waited):
            sim_find(sim, lambda: move_onto(sim.partition_infos(), broker, rng, sim.busy()),
                      patience, onto_chosen, f"no partition could move onto the new "
                      f"n{broker} within {patience:.0f} s")

        def onto_chosen(chosen):
            partition, target = chosen
            sim.claim([partition])

            def reached(row, w):
                if row is not None:
                    joined(partition, target, w)
                    return
                sim.release([partition])
                sim.not_reached(f"partition {partition} had not reached {target} {w:.0f} s "
                                f"after its move was accepted")
            sim_reassign(sim, partition, target, patience, reached, first=False)

        def joined(partition, target, waited):
            def done(row, w):
                sim.release([partition])
                if row is None:
                    sim.not_reached(f"n{broker} not in partition {partition}'s ISR")
                elif then is not None:
                    then(partition, target)
            sim.await_partition(partition, lambda r: broker in r[3], patience - waited, done)
        self._sim_lists(sim, lambda ls: lists_all(ls, broker), back)


PACKAGE = Decommission
