"""A stored Docker run's twin: its fault plan and generated operations in the simulator
(``chaoskraft sim --from RUN_DIR``).

A Docker run keeps what decides it apart from timing: its resolved config (``config.yaml``:
nodes, controllers, node properties, planted bugs, workload settings), its fault plan
(``plan.json``: each step's time, package, target or shape, mode and length) and what the
generator handed each process (``generated.jsonl``). The twin runs the same cluster (node
ids 1..controllers controllers and brokers, the rest brokers, with the run's properties),
the same operations per process at the run's rate, and the same fault steps at the same
seconds of the workload, each acted by its package's ``simulate`` on the simulated cluster
(:class:`PlanFaults`, the simulator's side of ``nemesis.package.FaultContext``). A symbolic
target (the partition leader, the active controller, a minority) is resolved when the step
fires, with the random stream the Docker run used for that step
(``{seed}-fault-{index}``), against the simulated cluster's state of that moment.

The network is quiet apart from the plan (no loss, 1-2 ms per message), so a seed only
moves the timing of messages, elections and clients: ``--seeds A-B`` explores the timings
around one schedule. Faults the simulator has no form of (disk errors, a full disk, slow
fsyncs, bandwidth limits) are reported per step, never silently dropped.
"""
from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

from nemesis.faults import aimed_at, target_partition
from nemesis.package import NotSimulated, Skipped
from nemesis.packages import PACKAGES
from nemesis.schedule import package_options
from node_image.config import NodeConfig, load_config
from node_image import messages as m

from .kafka_state import TOPIC
from .network import Inbound

POLL_S = 0.5  # how often a scenario phase asks the metadata again (as Scenario.await_partition)


@dataclass
class Twin:
    """What a stored run gives the simulator. ``cfg``: its resolved config
    (``harness.config.RunConfig``); ``steps``: its plan (``nemesis.schedule.FaultStep``);
    ``ops``: process -> the generator's operations ({f, key, value}) in order;
    ``properties``: the node properties of every node (``harness.config.node_config``)."""
    cfg: object
    steps: list
    ops: dict[int, list[dict]]
    properties: dict[str, str]
    source: str = ""
    # step -> (status, nodes) of the Docker run's own steps (its faults.json), where stored
    docker_steps: dict[int, tuple[str, list]] = field(default_factory=dict)
    # The workload starts this long into the simulated run (the cluster elects, brokers
    # register, the topic is made; its simulated form says how long: ``forms``); plan times
    # and the time limit count from here, as a Docker run's count from its workload's start.
    start_ms: int = 3_000
    # process -> its operations, for a process the run's file does not hold: a crashed
    # client's successor that the twin reaches and the Docker run did not (crash_clients)
    more_ops: object = None

    @property
    def voter_ids(self) -> list[int]:
        return list(range(1, self.cfg.controllers + 1))

    def node_config(self, node_id: int, log_dir: str) -> NodeConfig:
        """The node's config as the Docker backend writes it (its properties parsed by the
        node's own ``load_config``), on the simulator's disk."""
        roles = ("controller", "broker") if node_id in self.voter_ids else ("broker",)
        props = {"node.id": str(node_id), "process.roles": ",".join(roles),
                 "controller.quorum.voters": ",".join(f"{v}@sim:9093" for v in self.voter_ids),
                 "listeners": "CONTROLLER://0.0.0.0:9093,PLAINTEXT://0.0.0.0:9092",
                 "log.dirs": log_dir, **self.properties}
        if self.cfg.bugs:
            props["chaoskraft.bugs"] = ",".join(self.cfg.bugs)
        return dataclasses.replace(load_config(props), power_loss=False)


@dataclass
class StepOutcome:
    """What became of one planned step in the twin (as faults.json says of the Docker run)."""
    step: int
    kind: str
    spec: str
    at_s: float
    status: str  # happened | not-reached | skipped | not simulated
    why: str = ""
    nodes: list[int] = field(default_factory=list)
    label: str = ""


class PlanFaults:
    """Fault steps on the simulated cluster (a stored plan's, or the ones the seeded nemesis
    draws: ``start_now``), and what a package's ``simulate`` acts through: node lifecycle
    (``kill`` with or without losing unsynced writes, ``restart``, ``pause``/``resume``),
    partitions (``cut``/``heal_cut``), incoming link faults, clock skews, client refusals,
    disk faults, and the cluster's state (``ids``, ``partition_infos``,
    ``active_controller``). ``seed`` derives each step's random stream as a Docker run
    does (``{seed}-fault-{index}``); ``options``: the campaign's per-package options."""

    def __init__(self, sim, steps: list, seed: int, workload: str, partitions: int,
                 controllers: list[int], options: dict | None = None, start_ms: int = 0) -> None:
        self.sim = sim
        self.steps = steps
        self.seed = seed
        self.workload = workload
        self.partitions = partitions
        self.options = options or {}
        self.start_ms = start_ms
        self.ids = sorted(sim.nodes)
        self.controllers = set(controllers)
        self.outcomes: dict[int, StepOutcome] = {}
        self._callbacks: dict[int, tuple] = {}
        self._next_id = 0
        self._cuts: dict[str, set[tuple[int, int]]] = {}
        self._torn: dict[int, bool] = {}
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self._moving: dict[int, int] = {}  # partition -> the step moving it (``claim``)
        self.current: int | None = None  # the step whose code runs now
        self._over: set[int] = set()  # steps undone: their later phases do nothing

    # ----------------------------------------------------------- schedule

    @classmethod
    def of_twin(cls, sim, twin: Twin) -> "PlanFaults":
        cfg = twin.cfg
        return cls(sim, twin.steps, cfg.seed, cfg.workload, cfg.partitions, twin.voter_ids,
                   cfg.nemesis_options, twin.start_ms)

    def schedule(self) -> None:
        for step in self.steps:
            self._at(self.start_ms + int(step.at_s * 1000), step.index, "start", self._fire,
                     step)

    def start_now(self, step) -> None:
        """A step the seeded nemesis drew: it starts now (``step.at_s`` is now)."""
        self.steps.append(step)
        self.current = step.index  # its later phases belong to it (and stop when it is undone)
        try:
            self._fire(step)
        finally:
            self.current = None

    def _at(self, t: int, step: int, what: str, fn, *args) -> None:
        self._next_id += 1
        self._callbacks[self._next_id] = (step, what, fn, args)
        self.sim.push(t, "plan", self._next_id)

    def after(self, delay_s: float, fn, *args) -> None:
        """Run ``fn(*args)`` ``delay_s`` simulated seconds from now, unless the current step
        has been undone by then (a scenario's later phases)."""
        self._at(self.sim.now + max(1, int(delay_s * 1000)), self.current, "phase", fn, *args)

    def lasting(self, delay_s: float, fn, *args) -> None:
        """Run ``fn(*args)`` ``delay_s`` simulated seconds from now even if the current step
        has been undone or the faults are over by then: what a package must finish to leave
        the cluster whole (a voter it removed added back)."""
        self._at(self.sim.now + max(1, int(delay_s * 1000)), self.current, "lasting", fn, *args)

    def fire(self, callback_id: int) -> bool:
        step, what, fn, args = self._callbacks.pop(callback_id)
        if what == "phase" and (step in self._over or self.sim.now >= self.sim.duration_ms):
            return False  # undone, or the faults are over (the end healed everything)
        self.sim.trace(self.sim.now, "plan", step, what)
        self.current = step
        try:
            fn(*args)
        finally:
            self.current = None
        return True

    def _fire(self, step) -> None:
        sim = self.sim
        if sim.now >= sim.duration_ms:
            self._note(step, "skipped", "the workload ended before its time came")
            return
        rng = random.Random(f"{self.seed}-fault-{step.index}")
        package = PACKAGES[step.kind]()
        opts = package_options(step.kind, self.options.get(step.kind), self.workload)
        controller = leader = None
        aim = aimed_at(step.spec)
        if aim == "controller":
            controller = self.active_controller()
        elif aim == "leader":
            leader = self.partition_leader(rng, target_partition(step.spec))
        try:
            label, undo, nodes = package.simulate(self, step, opts, rng, controller, leader)
        except Skipped as why:
            self._note(step, "skipped", str(why))
            return
        except NotSimulated as why:
            self._note(step, "not simulated", str(why))
            return
        self._note(step, "happened", nodes=nodes, label=label)
        end = sim.now + int(step.duration_s * 1000)
        self._at(end, step.index, "undo", self._undo, step.index, undo)

    def _undo(self, index: int, undo) -> None:
        self._over.add(index)
        undo()

    def not_reached(self, why: str) -> None:
        """The scenario phase running now never saw the state it waited for (as
        ``nemesis.package.NotReached`` in a Docker run): its step is not reached."""
        o = self.outcomes[self.current]
        step = next(s for s in self.steps if s.index == self.current)
        self._note(step, "not-reached", why, nodes=o.nodes, label=o.label)

    def _note(self, step, status: str, why: str = "", nodes=None, label: str = "") -> None:
        self.outcomes[step.index] = StepOutcome(step.index, step.kind, step.spec, step.at_s,
                                                status, why, sorted(nodes or []), label)
        self.sim.trace(self.sim.now, "step", step.index, status, sorted(nodes or []))
        if self.sim.journal is not None:
            self.sim.journal.event(self.sim.now, "nemesis",
                                   f"step {step.index} {step.kind} {step.spec}: {status} "
                                   f"{label or why}")

    def missed(self) -> None:
        """Steps whose time never came (the run stopped first: a failure)."""
        for step in self.steps:
            if step.index not in self.outcomes:
                self.outcomes[step.index] = StepOutcome(
                    step.index, step.kind, step.spec, step.at_s, "not reached",
                    "the run stopped at a failure before its time")

    # ----------------------------------------------------------- the cluster's state

    @property
    def now_s(self) -> float:
        return self.sim.now / 1000

    def active_controller(self) -> int | None:
        leader = self.sim.leader()
        return None if leader is None else leader[0]

    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]:
        """Every partition of the topic (or of the internal ``topic``) as the freshest live
        node knows it (the highest partition epoch), as the Docker scenarios read the
        freshest broker's metadata."""
        best: dict[int, tuple] = {}
        name = topic or TOPIC
        for sn in self.sim.nodes.values():
            if sn.node is None or sn.node_id in self.paused:
                continue
            known = sn.node.controller.committed.topics.get(name)
            if known is None:
                continue
            for pid, p in known.partitions.items():
                if pid not in best or p.partition_epoch > best[pid][0]:
                    best[pid] = (p.partition_epoch, p)
        return [(pid, p.leader, list(p.replicas), list(p.isr))
                for pid, (_, p) in sorted(best.items())]

    def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None:
        if partition is None:
            partition = rng.randrange(self.partitions)
        row = next((p for p in self.partition_infos() if p[0] == partition), None)
        return row[1] if row is not None and row[1] >= 0 else None

    # ----------------------------------------------------------- faults

    def cut(self, g: dict[int, set[int]], name: str = "cut") -> None:
        """A partition: each node hears nothing from the nodes ``g`` names for it."""
        self._cuts[name] = {(src, dst) for dst, srcs in g.items() for src in srcs}
        self.sim.stats["partitions"] += 1
        self._blocked()

    def heal_cut(self, name: str = "cut") -> None:
        self._cuts.pop(name, None)
        self._blocked()

    def _blocked(self) -> None:
        # once the faults are over (the end healed everything) an undo cuts nothing again
        over = self.sim.now >= self.sim.duration_ms
        self.sim.network.plan_blocked = set().union(*self._cuts.values()) \
            if self._cuts and not over else set()

    def kill(self, nodes: list[int], lose_unsynced: bool = False, torn: bool = False,
             clean: bool = False) -> None:
        """Kill the nodes' processes: a process kill keeps what the page cache holds; a
        power loss (``lose_unsynced``) keeps only what was fsynced, with ``torn`` a random
        prefix of each file's unsynced tail. ``clean``: a shutdown first flushes the logs and
        says so on disk (the broker's clean-shutdown file; without a controlled shutdown's
        handing over of leadership, which the controller then does on fencing)."""
        for n in nodes:
            sn = self.sim.nodes[n]
            if sn.node is None:
                continue
            if clean:
                sn.node.shutdown(self.sim.now)
            self.sim.crash(sn, False, lose_unsynced=lose_unsynced,
                           torn_write_prob=0.5 if torn else 0.0)
            self.killed.add(n)
            self.paused.discard(n)
            self.sim.unpause(sn)

    def restart(self, nodes: list[int]) -> None:
        for n in sorted(set(nodes) & self.killed):
            self.killed.discard(n)
            sn = self.sim.nodes[n]
            if sn.node is None:
                self.sim.trace(self.sim.now, "restart", n)
                self.sim.start_node(sn)

    def pause(self, nodes: list[int]) -> None:
        for n in nodes:
            if self.sim.nodes[n].node is not None:
                self.paused.add(n)
                self.sim.nodes[n].paused = True

    def resume(self, nodes: list[int]) -> None:
        for n in sorted(set(nodes) & self.paused):
            self.paused.discard(n)
            self.sim.unpause(self.sim.nodes[n])

    def skew_clock(self, node: int, offset_s: float) -> None:
        self.sim.nodes[node].clock.step_ms = int(offset_s * 1000)

    def clock_rate(self, node: int, rate: float) -> None:
        """The node's wall clock runs at ``rate`` from now (1: its own pace again, keeping
        what the rate added); ``reset_clock`` brings it back to the node's own time."""
        self.sim.nodes[node].clock.set_rate(self.sim.now, rate)

    def reset_clock(self, node: int) -> None:
        self.sim.nodes[node].clock.reset()

    def inbound(self, nodes: list[int], **fault) -> None:
        """Incoming node-to-node traffic of ``nodes`` suffers ``fault`` (``Inbound``'s fields)
        until ``clear_inbound``."""
        for n in nodes:
            self.sim.network.inbound[n] = Inbound(**fault)

    def clear_inbound(self, nodes: list[int]) -> None:
        for n in nodes:
            self.sim.network.inbound.pop(n, None)

    def refuse_clients(self, nodes: list[int]) -> None:
        """The nodes reset every client connection (open ones too) until the step ends."""
        self.sim.network.refused.update(nodes)
        self.sim.workload.refused(set(nodes))

    def admit_clients(self, nodes: list[int]) -> None:
        self.sim.network.refused.difference_update(nodes)

    def disk(self, node: int):
        return self.sim.nodes[node].disk

    def disk_fault(self, nodes: list[int], name: str, request: dict) -> None:
        """The nodes' disks answer as faultfs with ``request`` in force (a disk error or a
        full disk): the node's next such call fails and it halts, as on the real disk."""
        for n in nodes:
            self.sim.nodes[n].disk.faults[name] = request

    def clear_disk_fault(self, nodes: list[int], name: str) -> None:
        for n in nodes:
            self.sim.nodes[n].disk.faults.pop(name, None)

    def reassign(self, partition: int, target: list[int], then, first: bool = True,
                 topic: str | None = None) -> None:
        """AlterPartitionReassignments of the topic's (or the internal ``topic``'s)
        ``partition`` to ``target``, sent to the active controller as a broker forwards it;
        ``then(error or None)`` with its answer (a reply that never comes: never). Without
        an active controller: ``Skipped`` the ``first`` time, else
        ``then("NOT_CONTROLLER: ...")``."""
        if first and self.active_controller() is None:
            raise Skipped("no active controller to send the reassignment to")
        self._ask_controller(lambda corr: m.AlterReassignmentsRequest(
            corr, ((topic or TOPIC, partition, False, tuple(target)),), True), then)

    def elect(self, partition: int, then) -> None:
        """ElectLeaders (PREFERRED) of the topic's ``partition``, sent to the active
        controller; ``then(error or None)`` with its answer, ``then("NOT_CONTROLLER: ...")``
        without an active controller."""
        self._ask_controller(lambda corr: m.ElectLeadersRequest(
            corr, "PREFERRED", False, ((TOPIC, partition),)), then)

    def _ask_controller(self, build, then) -> None:
        """An admin request of one partition (``build(correlation id)``) to the active
        controller; ``then`` gets its one result's error ("NAME: message") or None, within
        the step that asked."""
        def error_of(resp):
            [(_, _, error, message)] = resp.results
            return None if error == m.NONE else f"{m.ERROR_NAMES.get(error, error)}: {message}"
        self._to_controller(build, error_of, then, "NOT_CONTROLLER: no active controller")

    def _to_controller(self, build, error_of, then, absent: str) -> None:
        """An admin request (``build(correlation id)``) to the active controller; ``then``
        gets ``error_of(its answer)`` within the step that asked (an answer that never comes:
        never), or ``absent`` at once without an active controller (asked again later, by a
        scenario's phase)."""
        controller = self.active_controller()
        if controller is None:
            then(absent)
            return
        step = self.current

        def answered(resp) -> None:
            self.current = step
            try:
                then(error_of(resp))
            finally:
                self.current = None
        self.sim.admin_request(controller, build, answered)

    def unregister_broker(self, broker: int, then) -> None:
        """UnregisterBroker of ``broker``, sent to the active controller as a broker forwards
        it; ``then(error name or None)`` with its answer (a reply that never comes: never),
        ``then("NOT_CONTROLLER")`` without an active controller."""
        self._to_controller(
            lambda corr: m.UnregisterBrokerRequest(corr, broker),
            lambda resp: None if resp.error == m.NONE else m.ERROR_NAMES.get(resp.error,
                                                                             str(resp.error)),
            then, "NOT_CONTROLLER")

    def feature_levels(self) -> dict[int, tuple[int, dict[str, int], int]]:
        """The finalized feature levels each running node reports (its ApiVersions answer:
        its committed metadata's levels above 0 and its Raft log's kraft.version), with the
        metadata offset they are read at and the newest metadata.version it supports."""
        from node_image.features import METADATA_VERSION, SUPPORTED, finalized
        return {n: (sn.node.controller.committed.offset,
                    finalized(sn.node.controller.committed, sn.node.raft.kraft_version),
                    SUPPORTED[METADATA_VERSION][1])
                for n, sn in self.sim.nodes.items()
                if sn.node is not None and n not in self.paused}

    def update_features(self, updates: list[tuple[str, int, int]], then) -> None:
        """UpdateFeatures of (feature, level, upgrade type) rows, sent to the active controller
        as a broker forwards it; ``then(error or None)`` with its answer ("NAME: message"; a
        reply that never comes: never), ``then("NOT_CONTROLLER: ...")`` without an active
        controller."""
        self._to_controller(
            lambda corr: m.UpdateFeaturesRequest(corr, tuple(map(tuple, updates)), False),
            lambda resp: None if resp.error == m.NONE else
            f"{m.ERROR_NAMES.get(resp.error, resp.error)}: {resp.message}",
            then, "NOT_CONTROLLER: no active controller")

    def broker_lists(self) -> dict[int, tuple[int, ...]]:
        """The brokers each running broker's committed metadata lists (its Metadata answer)."""
        return {n: tuple(sorted(sn.node.controller.committed.brokers))
                for n, sn in self.sim.nodes.items()
                if sn.node is not None and n not in self.paused}

    def running(self, node: int) -> bool:
        return self.sim.nodes[node].node is not None

    def busy(self) -> set[int]:
        """The partitions a step still in force is moving (``claim``): another scenario
        leaves them alone, as in Docker (``Campaign.moving``)."""
        return {p for p, step in self._moving.items() if step not in self._over}

    def claim(self, partitions) -> None:
        for p in partitions:
            self._moving[p] = self.current

    def release(self, partitions) -> None:
        for p in partitions:
            self._moving.pop(p, None)

    def add_broker(self, replacing: int | None) -> int:
        """A new machine under a new node id (``machines.add_node``), in the place of the
        stopped ``replacing`` (None: beside the others), which leaves the cluster for good;
        the new node's id."""
        from . import machines
        new = machines.add_node(self.sim)
        if replacing is not None:
            self.retire(replacing)
        self.ids[:] = sorted(set(self.ids) | {new})
        return new

    def retire(self, node: int) -> None:
        """The stopped ``node`` leaves the cluster for good (``machines.retire``)."""
        from . import machines
        machines.retire(self.sim, node)
        self.killed.discard(node)
        self.ids[:] = sorted(set(self.ids) - {node})

    def wipe(self, node: int) -> None:
        """The stopped node's disk replaced by an empty one (it formats anew)."""
        self.sim.wipe(self.sim.nodes[node])

    def dynamic_quorum(self) -> bool:
        """Was the simulated cluster formatted as a dynamic quorum (KIP-853)?"""
        return self.sim.kraft_version >= 1

    def quorum_view(self) -> tuple[int, list[int], list[int]] | None:
        """(the quorum leader, its voter set, the voters in it whose disk was replaced since:
        they can never vote again), or None while no leader is known."""
        top = self.sim.leader()
        if top is None:
            return None
        voters = self.sim.nodes[top[0]].node.raft.voters
        stale = [v for v, key in voters.items() if key.directory_id != self.sim.dir_ids[v]]
        return top[0], sorted(voters), sorted(stale)

    def change_voter(self, kind: str, node: int, then, to: int | None = None) -> bool:
        """RemoveRaftVoter or AddRaftVoter (``kind`` "remove" / "add") of ``node`` sent to
        the quorum leader (or to the controller ``to``), an add with the node's directory id
        now, a removal with the one the leader's voter set names; ``then(error, message)``
        with its answer (a reply that never comes: never; ``error`` a Kafka error name, None
        when done). False when no leader is known."""
        top = self.sim.leader() if to is None else (to,)
        if top is None or self.sim.nodes[top[0]].node is None:
            return False
        step = self.current
        key = self.sim.nodes[top[0]].node.raft.voters.get(node)
        directory = self.sim.dir_ids[node] if kind == "add" or key is None else key.directory_id

        def answered(resp) -> None:
            self.current = step
            try:
                then(None if resp.error == m.NONE else m.ERROR_NAMES.get(resp.error, str(
                    resp.error)), resp.message)
            finally:
                self.current = None
        if kind == "add":
            build = (lambda corr: m.AddRaftVoterRequest(corr, "", node, directory, "sim", 0))
        else:
            build = (lambda corr: m.RemoveRaftVoterRequest(corr, "", node, directory))
        self.sim.admin_request(top[0], build, answered)
        return True

    def await_partition(self, partition: int, holds, patience_s: float, then,
                        waited: float = 0.0, topic: str | None = None) -> None:
        """``then(row, waited_s)`` once ``holds`` is true of the partition's row (of the
        internal ``topic``'s partition, if named), asking every POLL_S for at most
        ``patience_s`` (then ``then(None, waited_s)``)."""
        row = next((p for p in self.partition_infos(topic) if p[0] == partition), None)
        if row is not None and holds(row):
            then(row, waited)
        elif waited >= patience_s:
            then(None, waited)
        else:
            self.after(POLL_S, self.await_partition, partition, holds, patience_s, then,
                       waited + POLL_S, topic)
