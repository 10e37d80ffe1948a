"""Controller scenarios as data (``tests/testdata/controller/*.txt``, run by
``tests/node/test_controller_scenarios.py``; the script format is ``datadriven``'s).

One node, the only voter, with the controller role on a simulated disk: brokers register,
heartbeat and ask for changes by the controller's own requests, as a broker's lifecycle
manager and replica manager send them, and time moves only with ``tick``. After each
command the output lists, in order, the node's events (``says: ...``), every metadata
record the quorum committed (``+ RecordType(...)``, topic ids shown as topic names) and the
controller's answers (``<- ResponseType(...)``).

Commands:
  start [bugs=a,b] [session=MS] [elr=1] [min-isr=N]
                               format the node and start it; it elects itself (``elr=1``:
                               eligible leader replicas on from the bootstrap)
  register B [clean]           broker B registers (incarnation ``inc-B``, or ``inc=X``);
                               ``clean``: after a clean shutdown of its last registration
  features NAME=LEVEL [downgrade]
                               UpdateFeatures of one feature (an upgrade unless ``downgrade``)
  heartbeat B [fence] [shutdown] [offset=N] [epoch=E]
                               B's heartbeat: its own broker epoch and the committed offset
                               (caught up) unless given
  create-topic NAME partitions=P rf=R [validate]
  alter-partition B TOPIC-P isr=1,2 [leader-epoch=E] [partition-epoch=E]
                               B, leading the partition, asks for a new ISR; the epochs are
                               the partition's current ones unless given
  allocate-pids B [epoch=E]    B asks for a block of producer ids (at its epoch unless given)
  reassign TOPIC-P replicas=1,2,3 | cancel [fixed-rf]
                               AlterPartitionReassignments of one partition, or its
                               cancellation (``fixed-rf``: a change of replication factor
                               is not allowed)
  list-reassignments [TOPIC-P ...]
                               the reassignments in progress (of every partition unless named)
  tick ms=T                    time moves T ms; the node polls (sessions expire, leaders
                               rebalance)
  image                        the committed image: brokers and partitions
"""
from __future__ import annotations

import dataclasses
import random

import datadriven
from node_image import messages as m
from node_image import metadata_records as mr
from node_image import records
from node_image.config import BrokerConfig, NodeConfig
from node_image.node import Node
from node_image.storage import ReplicaKey, format_storage, new_directory_id
from simulator.disk import SimDisk

LOG_DIR = "/data"
CLUSTER = "controller-scenarios"
WALL_MS = 1_800_000_000_000
CLIENT = "broker"  # where the controller's answers go
ENDPOINTS = lambda b: (("INTERNAL", f"n{b}", 9093), ("EXTERNAL", f"n{b}", 9092))  # noqa: E731
SHOWN = {
    m.BrokerRegistrationResponse: ("error", "broker_epoch"),
    m.BrokerHeartbeatResponse: ("error", "is_caught_up", "is_fenced", "should_shut_down"),
    m.CreateTopicsResponse: ("results",),
    m.AlterPartitionResponse: ("error", "topic", "partition", "leader", "leader_epoch", "isr",
                               "partition_epoch"),
    m.AllocateProducerIdsResponse: ("error", "producer_id_start", "producer_id_len"),
    m.AlterReassignmentsResponse: ("results",),
    m.ListReassignmentsResponse: ("error", "results"),
    m.UpdateFeaturesResponse: ("error", "message"),
}
# fields a record leaves at their default are not shown (the reassignment fields, mostly)
DEFAULTS = {t: {f.name: f.default for f in dataclasses.fields(t)
                if f.default is not dataclasses.MISSING} for t in mr.API_KEYS}


class ControllerScenario(datadriven.Commands):
    def __init__(self, bugs: frozenset[str] = frozenset()) -> None:
        self.bugs = bugs  # planted bugs for every node the script starts
        self.now = 0
        self.node: Node | None = None
        self.out: list[str] = []
        self.shown_offset = 0  # records up to here were printed
        self.epochs: dict[int, int] = {}  # broker id -> its epoch, as its registration said
        self._asked: dict[int, int] = {}  # a registration's correlation id -> its broker
        self._talk = False  # show the node's events (not while it elects itself at start)
        self.corr = 0

    # ---------------------------------------------------------------- plumbing

    def _node(self) -> Node:
        if self.node is None:
            raise ValueError("no node: start it first")
        return self.node

    def _topic_names(self) -> dict[str, str]:
        return {t.topic_id: name for name, t in self._node().controller.current.topics.items()}

    def _show(self, obj, fields=None) -> str:
        names = self._topic_names()
        parts = []
        for name in fields or [f for f in obj.__slots__ if f != "correlation_id"]:
            v = getattr(obj, name)
            if name in DEFAULTS.get(type(obj), {}) and v == DEFAULTS[type(obj)][name]:
                continue
            if name == "error":
                if v == m.NONE:
                    continue
                v = m.ERROR_NAMES.get(v, v)
            elif name == "topic_id":
                name, v = "topic", names.get(v, v)
            elif name in ("incarnation_id", "endpoints", "rack"):
                continue
            elif isinstance(obj, mr.BrokerRegistrationChangeRecord) and name == "fenced":
                if v != mr.NO_FENCING_CHANGE:
                    parts.append("fence" if v == mr.FENCE else "unfence")
                continue
            elif isinstance(obj, mr.BrokerRegistrationChangeRecord) and \
                    name == "in_controlled_shutdown":
                if v:
                    parts.append("controlled-shutdown")
                continue
            elif isinstance(obj, mr.PartitionChangeRecord) and name == "leader":
                if v != mr.NO_LEADER_CHANGE:
                    parts.append(f"leader={v}")
                continue
            elif name == "results" and isinstance(obj, m.CreateTopicsResponse):
                # (name, error, message, id, partitions, rf)
                v = [(r[0], m.ERROR_NAMES.get(r[1], r[1]), r[4], r[5]) for r in v]
            elif name == "results" and isinstance(obj, m.AlterReassignmentsResponse):
                v = [(f"{r[0]}-{r[1]}", m.ERROR_NAMES.get(r[2], r[2])) for r in v]
            elif name == "results" and isinstance(obj, m.ListReassignmentsResponse):
                v = [(f"{r[0]}-{r[1]}", f"replicas={list(r[2])} adding={list(r[3])} "
                      f"removing={list(r[4])}") for r in v]
            datadriven.add_field(parts, name, v)
        return datadriven.shown(obj, parts)

    def _settle(self) -> None:
        """Poll until the node has nothing more to do now, then show what it committed and
        what it answered."""
        node = self._node()
        for _ in range(20):
            node.poll(self.now)
            if node.raft.high_watermark is None or \
                    self.shown_offset >= node.raft.high_watermark:
                break
            self._show_committed()
        self._show_committed()
        for dest, msg in node.outbox.take():
            if dest == CLIENT:
                if isinstance(msg, m.BrokerRegistrationResponse) and msg.error == m.NONE:
                    self.epochs[self._asked.pop(msg.correlation_id)] = msg.broker_epoch
                self.out.append(f"<- {self._show(msg, SHOWN.get(type(msg)))}")

    def _show_committed(self) -> None:
        node = self._node()
        hw = node.raft.high_watermark or 0
        while self.shown_offset < hw:
            data = node.log.read(self.shown_offset, 1 << 20)
            if not data:
                break
            for header, batch in records.iter_batches(data):
                if header.base_offset < self.shown_offset:
                    continue
                if header.base_offset >= hw:
                    self.shown_offset = hw
                    break
                if not header.is_control:
                    for rec in records.decode_records(batch)[1]:
                        self.out.append(f"+ {self._show(mr.decode(rec.value))}")
                self.shown_offset = header.next_offset

    def _ask(self, msg, broker: int | None = None) -> None:
        if broker is not None:
            self._asked[msg.correlation_id] = broker
        self._node().handle(CLIENT, msg, self.now)
        self._settle()

    def _next_corr(self) -> int:
        self.corr += 1
        return self.corr

    # ---------------------------------------------------------------- commands

    def start(self, args, kw) -> None:
        bugs = frozenset(b for b in kw.get("bugs", "").split(",") if b) | self.bugs
        disk = SimDisk()
        rng = random.Random("controller-scenarios")
        directory = new_directory_id(rng)
        format_storage(disk, LOG_DIR, CLUSTER, 1, (ReplicaKey(1, directory),), directory)
        config = NodeConfig(node_id=1, voters={1: ("n1", 9093)}, log_dir=LOG_DIR,
                            roles=("controller",), idle_interval_ms=0, bugs=bugs,
                            broker=BrokerConfig(session_timeout_ms=int(kw.get("session", 9000)),
                                                default_replication_factor=1,
                                                bootstrap_elr_version=int(kw.get("elr", 0)),
                                                min_insync_replicas=int(kw.get("min-isr", 1))))
        self.node = Node(config, disk, random.Random("node-1"), self.now,
                         on_event=lambda msg: self.out.append(f"says: {msg}") if self._talk
                         else None, wall_clock=lambda: WALL_MS + self.now)
        while not self.node.controller._ready():
            deadline = min(t for t in (self.node.raft.next_deadline_ms(),
                                       self.node.controller.next_deadline_ms()) if t is not None)
            self.now = max(self.now + 1, deadline)
            self.node.poll(self.now)
            if self.now > 60_000:
                raise AssertionError("the node did not become the active controller in 60 s")
        self.out.append(f"active controller in epoch {self.node.raft.epoch} at "
                        f"{self.now} ms")
        self._talk = True
        self._settle()

    def register(self, args, kw) -> None:
        b = int(args[0])
        self._ask(m.BrokerRegistrationRequest(self._next_corr(), b, kw.get("inc", f"inc-{b}"),
                                              ENDPOINTS(b), None,
                                              self.epochs.get(b, -1) if "clean" in args else -1),
                  broker=b)

    def features(self, args, kw) -> None:
        (name, level), = kw.items()
        self._ask(m.UpdateFeaturesRequest(self._next_corr(), ((name, int(level), 2 if
                                                               "downgrade" in args else 1),),
                                          False))

    def heartbeat(self, args, kw) -> None:
        b = int(args[0])
        offset = int(kw["offset"]) if "offset" in kw else (self._node().raft.high_watermark or 0)
        epoch = int(kw["epoch"]) if "epoch" in kw else self.epochs.get(b, -1)
        self._ask(m.BrokerHeartbeatRequest(self._next_corr(), b, epoch, offset, "fence" in args,
                                           "shutdown" in args))

    def create_topic(self, args, kw) -> None:
        self._ask(m.CreateTopicsRequest(self._next_corr(), (
            (args[0], int(kw.get("partitions", 1)), int(kw.get("rf", 1)), (), ()),),
            "validate" in args))

    def alter_partition(self, args, kw) -> None:
        b = int(args[0])
        topic, _, part = args[1].rpartition("-")
        p = self._node().controller.current.partition(topic, int(part))
        if p is None:
            raise ValueError(f"no partition {args[1]}")
        isr = tuple(int(x) for x in kw["isr"].split(","))
        self._ask(m.AlterPartitionRequest(
            self._next_corr(), b, self.epochs.get(b, -1), topic, int(part),
            int(kw.get("leader-epoch", p.leader_epoch)), isr,
            int(kw.get("partition-epoch", p.partition_epoch))))

    def allocate_pids(self, args, kw) -> None:
        b = int(args[0])
        epoch = int(kw["epoch"]) if "epoch" in kw else self.epochs.get(b, -1)
        self._ask(m.AllocateProducerIdsRequest(self._next_corr(), b, epoch))

    def _partition(self, name: str) -> tuple[str, int]:
        topic, _, part = name.rpartition("-")
        if self._node().controller.current.partition(topic, int(part)) is None:
            raise ValueError(f"no partition {name}")
        return topic, int(part)

    def reassign(self, args, kw) -> None:
        topic, part = self._partition(args[0])
        cancel = "cancel" in args
        replicas = () if cancel else tuple(int(x) for x in kw["replicas"].split(","))
        self._ask(m.AlterReassignmentsRequest(
            self._next_corr(), ((topic, part, cancel, replicas),), "fixed-rf" not in args))

    def list_reassignments(self, args, kw) -> None:
        self._ask(m.ListReassignmentsRequest(self._next_corr(), not args,
                                             tuple(self._partition(a) for a in args)))

    def tick(self, args, kw) -> None:
        self.now += int(kw["ms"])
        self._settle()

    def image(self, args, kw) -> None:
        img = self._node().controller.committed
        for b in sorted(img.brokers.values(), key=lambda b: b.broker_id):
            state = "fenced" if b.fenced else "unfenced"
            if b.in_controlled_shutdown:
                state += ", in controlled shutdown"
            self.out.append(f"broker {b.broker_id} epoch {b.broker_epoch}: {state}")
        for name in sorted(img.topics):
            for pid, p in sorted(img.topics[name].partitions.items()):
                moving = f" adding {list(p.adding)} removing {list(p.removing)}" \
                    if p.reassigning else ""
                if p.elr or p.last_known_elr:
                    moving += f" elr {list(p.elr)} last known elr {list(p.last_known_elr)}"
                self.out.append(f"{name}-{pid}: leader {p.leader} leader epoch {p.leader_epoch} "
                                f"replicas {list(p.replicas)} isr {list(p.isr)}{moving} "
                                f"partition epoch {p.partition_epoch}")

    COMMANDS = {"start": start, "register": register, "heartbeat": heartbeat,
                "create-topic": create_topic, "alter-partition": alter_partition,
                "allocate-pids": allocate_pids, "tick": tick, "image": image,
                "reassign": reassign, "list-reassignments": list_reassignments,
                "features": features}
