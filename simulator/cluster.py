"""The deterministic simulator: one seed, one trace.

Theory of operation
-------------------
A :class:`Simulation` runs N voters (and the observers the seed draws) as
:class:`~node_image.node.Node` cores on :class:`~simulator.disk.SimDisk`
disks, with register clients and a nemesis, in simulated milliseconds. A
single priority queue orders every event (message delivery, node timer,
client step, fault); ties break by insertion order. Every random choice
comes from a ``random.Random`` derived from the seed and a purpose name, so
the same seed and arguments always give the same trace, and the trace hash
proves it.

As in TigerBeetle's simulator the seed also draws the fault *options* (swarm
testing): how lossy, duplicating and slow the network is, how often
partitions (one-way too) and power-loss crashes come, whether crashes tear
unsynced writes, whether a disk is wiped, clock drift per node and wall-clock
steps, segment and snapshot sizes. They are printed so a failure can be read.

Each simulated resource is a file of its own with its own seeded random
stream: ``network`` (loss, duplication, delay, blocked links), ``clock``
(offset and drift), ``disk``, ``workload`` (the register clients),
``nemesis`` (partitions, crashes and clock steps), ``twin`` (fault packages' steps: a
stored Docker run's plan, or the queue's drawn scenarios); this module holds the event
queue, the nodes and the dispatch of events to them. ``Simulation(seed, twin=...)``
replays a stored Docker run instead of drawing (``simulator.twin``).

After every event the invariants of ``simulator.invariants`` are
checked; a node core raising :class:`SafetyViolation` counts too. The
register history (invoke/ok/fail/info per client op) is returned for the
linearizability checker.
"""
from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field
from typing import Callable

from node_image import kafka_codec as kc
from node_image.config import BrokerConfig, NodeConfig, RaftConfig
from node_image.node import Node
from node_image.coverage import Reached
from node_image.fs import LogDirFailure
from node_image.raft.client import SafetyViolation
from node_image.raft.state import CandidateState, LeaderState, UnattachedState
from node_image.storage import ReplicaKey, format_storage, new_directory_id

from . import DEFAULT_WORKLOAD
from .clock import NodeClock
from .forms import FORMS
from .invariants import Invariants
from .journal import Journal
from .machines import CLUSTER_ID, LOG_DIR, SimNode as _SimNode
from .nemesis import SimNemesis
from .network import SimNetwork
from .options import QueueOptions, SimOptions, twin_options
from .twin import PlanFaults, Twin

RESTART_PAUSE_MS = 500  # the node supervisor's pause before it starts a halted node again


@dataclass
class SimResult:
    seed: int
    ok: bool
    invariant: str | None
    detail: str | None
    event_index: int | None
    trace_hash: str
    events: int
    sim_ms: int
    history: list[dict]
    options: SimOptions
    stats: dict = field(default_factory=dict)
    queue_options: "QueueOptions | None" = None
    workload: str = DEFAULT_WORKLOAD
    check_args: dict = field(default_factory=dict)  # for the workload's checker
    plan: list | None = None  # a twin's steps (simulator.twin.StepOutcome), in plan order
    coverage: dict = field(default_factory=dict)  # node_image.coverage event -> times reached

    def check_history(self) -> tuple[str, str, list | None] | None:
        """The workload's checker on the history: None, or (invariant, detail,
        counterexample)."""
        return FORMS[self.workload].check_history(self.history, **self.check_args)


class Simulation:
    RECOVERY_MS = 20_000  # this workload's: its form's ``recovery_ms``

    def __init__(self, seed: int, nodes: int = 5, duration_s: float = 600,
                 bugs: frozenset[str] = frozenset(), options: SimOptions | None = None,
                 workload: str = DEFAULT_WORKLOAD, journal: "Journal | None" = None,
                 queue_options: "QueueOptions | None" = None, twin: "Twin | None" = None) -> None:
        """``workload``: the name of a simulated form (``simulator.forms``): "register"
        (every node a controller, the register clients) or "queue" (nodes 1-3 controllers
        and brokers, the others brokers, as in a Docker cluster, with the Kafka clients of
        ``kafka_clients``). ``twin``: a stored Docker run (``simulator.twin``) whose
        cluster, operations and fault plan replace what the seed would draw; the seed then
        decides the timing alone."""
        self.twin = twin
        if twin is not None:
            cfg = twin.cfg
            nodes, workload, bugs = cfg.nodes, cfg.workload, frozenset(cfg.bugs)
            duration_s = twin.start_ms / 1000 + cfg.time_limit_s
            options = twin_options(cfg)
        if nodes < 1:
            raise ValueError("--nodes must be at least 1")
        if workload not in FORMS:
            raise ValueError(f"workload must be one of {', '.join(FORMS)}, got {workload!r}")
        form = self.form = FORMS[workload]
        if nodes < form.min_nodes:
            raise ValueError(f"the {workload} workload needs at least {form.min_nodes} nodes")
        self.seed = seed
        self.workload_name = workload
        self.journal = journal  # records messages and events (--journal), or None
        self.RECOVERY_MS = form.recovery_ms
        # how far the end of the faults set a node's wall clock back (the Raft timers read
        # it: a clock stepped back holds them that long), added to the recovery time
        self.clock_set_back_ms = 0
        self.options = form.fit_options(options or SimOptions.draw(seed), twin)
        self.duration_ms = int(duration_s * 1000)
        self.bugs = bugs
        self.now = 0
        self._queue: list = []
        self._seq = 0
        self._hash = hashlib.blake2b(digest_size=16)
        self.events = 0
        o = self.options
        self.disk_rng = random.Random(f"{seed}-disk")
        clock_rng = random.Random(f"{seed}-clocks")
        self.voter_ids = twin.voter_ids if twin is not None else form.voter_ids(nodes)
        self.nodes = {i: _SimNode(i, i in self.voter_ids)
                      for i in range(1, nodes + o.observers + 1)}
        for sn in self.nodes.values():
            sn.clock = NodeClock.draw(clock_rng, o.clock_drift_ppm)
        dir_rng = random.Random(f"{seed}-dirs")
        self.dir_ids = {i: new_directory_id(dir_rng) for i in self.nodes}
        self.voters = tuple(ReplicaKey(i, self.dir_ids[i]) for i in self.voter_ids)
        self.coverage: dict[str, int] = {}  # node_image.coverage event -> times reached
        self.stats = {"crashes": 0, "partitions": 0, "wipes": 0, "clock_steps": 0,
                      "delivered": 0, "dropped": 0, **form.stats()}
        # one file per simulated resource, each with its own seeded random.Random
        self.network = SimNetwork(random.Random(f"{seed}-net"), o.drop_rate, o.duplicate_rate,
                                  o.max_delay_ms, self.stats)
        self.queue_options = form.own_options(seed, queue_options, twin)
        if twin is not None:
            self.workload = form.twin_clients(self, twin, random.Random(f"{seed}-clients"))
            self.check_args = form.twin_check_args(twin.cfg)
            self.plan = PlanFaults.of_twin(self, twin)
        else:
            self.workload, self.check_args, self.plan = form.clients(self, seed,
                                                                     self.queue_options)
        self.nemesis = SimNemesis(self, random.Random(f"{seed}-faults"), o, self.queue_options,
                                  workload)
        self._scenario_broker = self._scenario_settings()  # read once, used at every start
        # A dynamic quorum (KIP-853) where a package asks for one in its node properties
        # (format's kraft.version), or a stored run's cluster was formatted as one.
        props = {**(twin.properties if twin is not None else {}), **self._step_properties()}
        self.kraft_version = 1 if props.get("chaoskraft.bootstrap.kraft.version") == "1" else 0
        for i, sn in self.nodes.items():
            format_storage(sn.disk, LOG_DIR, CLUSTER_ID, i, self.voters, self.dir_ids[i],
                           kraft_version=self.kraft_version)
        self.invariants = Invariants(self)
        self.data_invariants = form.data_invariants(self)
        self.voter_wipes = 0
        self.retired: set[int] = set()  # nodes out of the cluster for good (machines.retire)
        self.failure: tuple[str, str] | None = None
        self._elections_seen: set[tuple[int, int]] = set()
        self._admin_next = 0  # the fault plan's admin requests: correlation id -> callback
        self._admin_waiting: dict[int, Callable] = {}

    @property
    def history(self) -> list[dict]:
        return self.workload.history

    # ----------------------------------------------------------------- queue

    def push(self, t: int, kind: str, *data) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, data))

    def trace(self, *parts) -> None:
        self._hash.update(("|".join(map(str, parts)) + "\n").encode())
        if self.journal is not None and parts[1] not in ("deliver", "reply", "timer", "kafka"):
            self.journal.event(parts[0], "nemesis", " ".join(map(str, parts[1:])))

    # ----------------------------------------------------------------- nodes

    def _config(self, node_id: int) -> NodeConfig:
        if self.twin is not None:
            return self.twin.node_config(node_id, LOG_DIR)
        o = self.options
        return NodeConfig(
            node_id=node_id, voters={v: ("sim", 0) for v in self.voter_ids}, log_dir=LOG_DIR,
            roles=self.form.roles(node_id in self.voter_ids),
            broker=self.form.broker_config(self),
            raft=RaftConfig(fetch_max_bytes=o.fetch_max_bytes, snapshot_chunk_bytes=4096),
            segment_bytes=o.segment_bytes, snapshot_max_bytes=o.snapshot_bytes,
            idle_interval_ms=500, bugs=self.bugs)

    def _step_properties(self) -> dict[str, str]:
        """The node properties of the packages whose plan steps the seed draws."""
        from nemesis.packages import PACKAGES
        from node_image.features import KRAFT_1_NEEDS
        props: dict[str, str] = {}
        for name in self.nemesis.step_packages():
            props.update(PACKAGES[name].node_properties({}))
        mv = "chaoskraft.bootstrap.metadata.version"
        if props.get("chaoskraft.bootstrap.kraft.version") == "1" and \
                int(props.get(mv, KRAFT_1_NEEDS)) < KRAFT_1_NEEDS:
            # features beside voters: formatted at the level a dynamic quorum needs, as a
            # campaign with both says (features' metadata_version: 21)
            props[mv] = str(KRAFT_1_NEEDS)
        return props

    def _scenario_settings(self) -> dict:
        """The broker settings the packages whose plan steps the seed draws need (their node
        properties, read by the node's own config parser), or none."""
        props = self._step_properties()
        if not props:
            return {}
        import dataclasses

        from node_image.config import load_config
        parsed = load_config({"node.id": "1", "controller.quorum.voters": "1@sim:9093",
                              "log.dirs": LOG_DIR, **props}).broker
        default = BrokerConfig()
        return {f.name: getattr(parsed, f.name) for f in dataclasses.fields(BrokerConfig)
                if getattr(parsed, f.name) != getattr(default, f.name)}

    def _start(self, sn: _SimNode) -> None:
        sn.incarnation += 1
        rng = random.Random(f"{self.seed}-node-{sn.node_id}-{sn.incarnation}")

        def on_event(msg: str, sn=sn) -> None:
            if isinstance(msg, Reached):
                self.coverage[msg.event] = self.coverage.get(msg.event, 0) + 1
            if self.journal is not None:
                self.journal.event(self.now, sn.node_id, msg)
            sn.log_lines.append(f"{self.now} {msg}")
            if len(sn.log_lines) > 200:
                del sn.log_lines[:100]
        sn.node = Node(self._config(sn.node_id), sn.disk, rng, sn.local(self.now), on_event,
                       wall_clock=lambda sn=sn: sn.clock.wall(self.now))
        sn.node.controller.register_publisher(
            lambda delta, image, nid=sn.node_id: self.invariants.on_applied(
                nid, image.offset, image.digest()))
        self.invariants.on_start(sn)
        self._after_node(sn)

    def start_node(self, sn: _SimNode) -> None:
        """Start the node; one whose disk fails while it opens its logs halts again."""
        try:
            self._start(sn)
        except LogDirFailure as exc:
            self._halt(sn, exc)

    def _halt(self, sn: _SimNode, exc: LogDirFailure) -> None:
        """The node's log directory failed: it halts (as the runtime's exit 74) before it
        answers or sends anything more, its page cache kept; its supervisor starts it again
        after RESTART_PAUSE_MS."""
        self.trace(self.now, "halt", sn.node_id, exc.call)
        self.stats["halts"] = self.stats.get("halts", 0) + 1
        self.coverage["log-dir-failed"] = self.coverage.get("log-dir-failed", 0) + 1
        if self.journal is not None:
            self.journal.event(self.now, sn.node_id, f"halted: log directory failed: {exc}")
        if sn.node is not None:
            sn.node.ready()  # what it had not sent dies with the process
            self.crash(sn, False, lose_unsynced=False)
        self.push(self.now + RESTART_PAUSE_MS, "restart", sn.node_id)

    def crash(self, sn: _SimNode, wipe: bool, lose_unsynced: bool = True,
              torn_write_prob: float | None = None) -> None:
        """The node stops: a power loss (``lose_unsynced``: the disk keeps what was fsynced,
        tearing the rest with ``torn_write_prob``, by default the seed's) or a process kill
        (the page cache keeps every write)."""
        if sn.node is None:
            return
        sn.durable_end_at_crash = sn.node.log.flushed_end_offset
        sn.node = None
        sn.timer_at = None
        sn.paused, sn.held, sn.timer_due = False, [], False
        if lose_unsynced:
            sn.disk.crash(self.disk_rng, self.options.torn_write_prob
                          if torn_write_prob is None else torn_write_prob)
        self.stats["crashes"] += 1
        if wipe:
            self.wipe(sn)
        self.invariants.on_crash(sn)

    def wipe(self, sn: _SimNode) -> None:
        """The stopped node's disk is replaced by an empty one, formatted anew (a new
        directory id), as an operator replaces a machine's disk."""
        assert sn.node is None, f"n{sn.node_id} wiped while running"
        sn.disk.wipe()
        self.dir_ids[sn.node_id] = new_directory_id(self.disk_rng)
        format_storage(sn.disk, LOG_DIR, CLUSTER_ID, sn.node_id, self.voters,
                       self.dir_ids[sn.node_id])
        sn.wiped = True
        sn.durable_end_at_crash = 0
        self.stats["wipes"] += 1
        if sn.voter:
            self.voter_wipes += 1

    def _after_node(self, sn: _SimNode, polled: bool = False) -> None:
        """Send what the node has ready and set its timer. ``polled``: it has just run its
        timers, so none of its deadlines may still be due (the runtime's event loop would
        re-arm its timer 1 ms ahead, again and again: TimerDueAfterPoll)."""
        node = sn.node
        if node is None:
            return
        st = node.raft.state
        if (self.nemesis.listens("voted") and isinstance(st, (CandidateState, UnattachedState))
                and self.now < self.duration_ms):
            voted = isinstance(st, CandidateState) or (
                st.voted_key is not None and st.voted_key.node_id != sn.node_id)
            if voted and (sn.node_id, st.epoch) not in self._elections_seen:
                self._elections_seen.add((sn.node_id, st.epoch))
                self.nemesis.on_event("voted", sn.node_id)
        for dest, msg in node.ready():
            name = None
            if isinstance(msg, kc.KafkaResponse):
                if msg.body is None:
                    continue  # acks=0: no answer
                if self.data_invariants is not None:
                    self.data_invariants.on_response(sn, msg)
                name = f"{msg.request.name} response #{msg.request.correlation_id}"
                msg = kc.encode_response(msg.request, msg.body)[4:]  # as the runtime writes it
            self.send(sn.node_id, dest, msg, name)
        due = sn.to_sim(node.next_deadline_ms())
        if polled and due <= self.now:
            raise SafetyViolation(
                "TimerDueAfterPoll", f"n{sn.node_id} ran its timers at {self.now} and still has "
                f"one due at {due}: the runtime would poll it every millisecond")
        deadline = max(due, self.now + 1)
        if sn.timer_at is None or deadline != sn.timer_at:
            sn.timer_at = deadline
            self.push(deadline, "timer", sn.node_id, sn.incarnation)

    def unpause(self, sn: _SimNode) -> None:
        """A paused node runs again: what reached it meanwhile is delivered, in order, and
        its timer fires if it came."""
        if not sn.paused:
            return
        sn.paused = False
        self.trace(self.now, "resume", sn.node_id)
        for src, msg in sn.held:
            self.push(self.now, "deliver", src, sn.node_id, msg)
        sn.held = []
        if sn.timer_due and sn.node is not None:
            sn.timer_due = False
            sn.timer_at = self.now
            self.push(self.now, "timer", sn.node_id, sn.incarnation)

    def send(self, src, dest, msg, name: str | None = None) -> None:
        delays = self.network.delays(src, dest, msg)
        if self.journal is not None:
            self.journal.message(self.now, src, dest, msg, [self.now + d for d in delays], name)
        for delay in delays:
            self.push(self.now + delay, "deliver", src, dest, msg)

    # ------------------------------------------------------------------- run

    def run(self) -> SimResult:
        try:
            self._run()
        except SafetyViolation as exc:
            self.failure = (exc.invariant, exc.detail)
        ok = self.failure is None
        plan = None
        if self.plan is not None:
            self.plan.missed()
            plan = [self.plan.outcomes[i] for i in sorted(self.plan.outcomes)]
        return SimResult(self.seed, ok, None if ok else self.failure[0],
                         None if ok else self.failure[1], None if ok else self.events,
                         self._hash.hexdigest(), self.events, self.now, self.history,
                         self.options, dict(self.stats), self.queue_options,
                         self.workload_name, self.check_args, plan, dict(self.coverage))

    def _run(self) -> None:
        for sn in self.nodes.values():
            self._start(sn)
        self.workload.start()
        if self.plan is not None:
            self.plan.schedule()
        self.nemesis.schedule()
        self.push(self.duration_ms, "end_faults")
        while self._queue:
            t, _, kind, data = heapq.heappop(self._queue)
            if t > self.duration_ms + self.RECOVERY_MS:  # longer once a clock is set back
                break
            self.now = t
            happened = self._dispatch(kind, data)
            if happened is False:
                continue
            self.events += 1
            # a node an event ran alone: only its own invariants can have changed
            self.invariants.check(self.events, None if happened is True else happened)
            if self.data_invariants is not None:
                self.data_invariants.check()
        self.invariants.check_final()
        if self.data_invariants is not None:
            self.data_invariants.check_final()
            if self.queue_options is None or self.queue_options.liveness:  # a twin: on
                self.data_invariants.check_liveness()

    # Every event kind and who acts it: (owner, method, always) -- the owner is the simulation
    # itself, the workload, the seeded nemesis or the twin's plan; ``always`` True means the
    # event may touch every node whatever the method returns, None means the method says
    # (False: nothing happened; a node: only that node ran). A fault the seed draws is acted
    # only while faults run (before end_faults); what undoes a fault always is.
    _EVENTS = {
        "deliver": ("sim", "_deliver", None),
        "timer": ("sim", "_timer", None),
        "restart": ("sim", "_restart", True),
        "heal": ("sim", "_heal", True),
        "end_faults": ("sim", "_end_faults", True),
        "client": ("workload", "step", True),
        "client_timeout": ("workload", "timeout", None),
        "kafka": ("workload", "event", None),
        "seeded": ("nemesis", "fire", True),
        "seeded_later": ("nemesis", "fire_later", True),
        "plan": ("plan", "fire", None),
    }
    _DRAWN_FAULTS = frozenset({"seeded"})

    def _dispatch(self, kind: str, data) -> "bool | _SimNode":
        """False: nothing happened; the node the event ran (a delivery, its timer); True:
        something that may touch every node (a start, crash, partition, client step)."""
        try:
            owner, method, always = self._EVENTS[kind]
        except KeyError:
            raise AssertionError(f"unknown event kind {kind}") from None
        if kind in self._DRAWN_FAULTS and self.now >= self.duration_ms:
            return True
        if kind == "kafka":
            self.trace(self.now, "kafka", *data)
        happened = getattr(self if owner == "sim" else getattr(self, owner), method)(*data)
        return True if always else happened

    def admin_request(self, dest: int, build, answered) -> None:
        """An admin request to node ``dest`` from the fault plan, as a broker forwards one
        to the controller: ``build(correlation id)`` is sent over the network (it may be
        lost or delayed as any message), ``answered(response)`` runs when the answer
        comes back."""
        self._admin_next += 1
        self._admin_waiting[self._admin_next] = answered
        self.send(("admin", self._admin_next), dest, build(self._admin_next))

    def _deliver(self, src, dest, msg) -> "bool | _SimNode":
        if isinstance(dest, tuple) and dest[0] == "admin":
            self.trace(self.now, "admin-reply", src, type(msg).__name__)
            answered = self._admin_waiting.pop(msg.correlation_id, None)
            if answered is not None:
                answered(msg)
            return True
        if isinstance(dest, tuple):
            self.trace(self.now, "reply", src, dest[1], type(msg).__name__,
                       len(msg) if isinstance(msg, bytes) else msg.outcome)
            self.workload.reply(dest[1], msg)
            return True
        sn = self.nodes[dest]
        if sn.node is not None and isinstance(src, tuple) and src[0] != "admin" and \
                dest in self.network.refused:
            self.trace(self.now, "refused", src[1], dest)
            self.workload.reset(src[1], msg)
            return True
        if sn.paused and self.network.passes(src, dest):
            sn.held.append((src, msg))  # in its socket buffers until it runs again
            self.stats["held_while_paused"] = self.stats.get("held_while_paused", 0) + 1
            return False
        if sn.node is None or not self.network.passes(src, dest):
            self.stats["dropped"] += 1
            if self.journal is not None:
                self.journal.event(self.now, dest, "down: dropped" if sn.node is None
                                   else f"cut off from {src}: dropped")
            return False
        self.stats["delivered"] += 1
        self.trace(self.now, "deliver", src, dest, type(msg).__name__)
        try:
            if isinstance(msg, bytes):  # a Kafka client's request frame
                sn.node.handle_kafka(src, kc.decode_request(msg), sn.local(self.now))
            else:
                sn.node.handle(src, msg, sn.local(self.now))
        except LogDirFailure as exc:
            self._halt(sn, exc)
            return True
        self._after_node(sn)
        return sn

    def _timer(self, node_id: int, incarnation: int) -> "bool | _SimNode":
        sn = self.nodes[node_id]
        if sn.node is None or sn.incarnation != incarnation or sn.timer_at != self.now:
            return False
        if sn.paused:
            sn.timer_due = True
            return False
        sn.timer_at = None
        self.trace(self.now, "timer", node_id)
        try:
            sn.node.poll(sn.local(self.now))
        except LogDirFailure as exc:
            self._halt(sn, exc)
            return True
        self._after_node(sn, polled=True)
        return sn

    def _restart(self, node_id: int) -> None:
        sn = self.nodes[node_id]
        if sn.node is None and node_id not in self.retired:
            self.trace(self.now, "restart", sn.node_id)
            self.start_node(sn)

    def _heal(self) -> None:
        self.network.heal()
        self.trace(self.now, "heal")

    def _end_faults(self) -> None:
        """Heal everything, the lossy network included, and see the cluster recover."""
        self.network.heal_all()
        back = 0
        for sn in self.nodes.values():
            before = sn.clock.wall(self.now)
            sn.clock.reset()
            back = max(back, before - sn.clock.wall(self.now))
            sn.disk.faults.clear()
            self.unpause(sn)
        self.trace(self.now, "end_faults")
        if back > 0:
            # Liveness is judged against what the faults allow (DESIGN section 9): the
            # cluster gets the recovery time after its timers run again, and so do the
            # clients
            self.clock_set_back_ms = self.stats["clock_set_back_ms"] = back
            self.RECOVERY_MS += back
            self.workload.stop_at_ms += back
            self.trace(self.now, "clock_set_back", back)
        for sn in self.nodes.values():
            if sn.node is None and sn.node_id not in self.retired:
                self.start_node(sn)

    def recovery_words(self) -> str:
        """The recovery time, as the liveness failures name it."""
        if not self.clock_set_back_ms:
            return f"{self.RECOVERY_MS} ms"
        return (f"{self.RECOVERY_MS} ms ({self.clock_set_back_ms} ms of them for the clock the "
                f"end of the faults set back)")

    # -------------------------------------------------------------- queries

    def leader(self) -> tuple[int, LeaderState] | None:
        best = None
        for sn in self.nodes.values():
            if sn.node is not None and isinstance(sn.node.raft.state, LeaderState):
                st = sn.node.raft.state
                if best is None or st.epoch > best[1].epoch:
                    best = (sn.node_id, st)
        return best
