"""Broker scenarios as data (``tests/testdata/broker/*.txt``, run by
``tests/node/test_broker_scenarios.py``; the script format is ``datadriven``'s).

One node with the controller and broker roles, the only voter, on a simulated disk; what
it sends itself (its broker's registration and heartbeats, topics created through its
controller) is handed back to it at once, and time moves only with ``tick``. A client
sends Kafka requests, encoded and decoded as on the wire; after each command the output
lists the client's answers (``<- Api(...)``) and, with ``events``, the node's events. The
coordinator requests (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn) are
asked again every 100 ms while the answer is one a client retries (``RETRIED``).

Commands:
  start [events] [bugs=a,b] [key=value ...]   format and start the node; it registers its
                                  broker and waits until it is unfenced (key=value: the
                                  node's server.properties; events: show its events)
  create-topic NAME [partitions=P] [key=value ...]   CreateTopics v5 (configs as given)
  produce TOPIC-P values=a,b [acks=-1] [pid=I epoch=E seq=S] [txn=ID] [v=9]
                                  one batch of the values (idempotent with pid)
  fetch TOPIC-P offset=N [committed] [v=12] [epoch=E]
                                  the values read, the high watermark and LSO, the
                                  aborted transactions (read_committed)
  list-offsets TOPIC-P ts=T [committed] [v=9]   -1 latest, -2 earliest, -3 max timestamp
  find-coordinator KEY [txn]      FindCoordinator v3 until it names one (a group's, or
                                  with txn a transactional id's)
  init-pid [txn=ID] [pid=I epoch=E]             InitProducerId v4
  add-partitions ID pid=I epoch=E TOPIC-P ...   AddPartitionsToTxn v3
  add-offsets ID pid=I epoch=E group=G          AddOffsetsToTxn v3
  end-txn ID pid=I epoch=E commit|abort          EndTxn v3
  tick ms=T                       time moves T ms; the node polls
"""
from __future__ import annotations

import dataclasses
import random

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
                                     EndTxnRequest, InitProducerIdRequest, ProduceRequest)

import datadriven
from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import records
from node_image.config import load_config
from node_image.node import Node
from node_image.storage import ReplicaKey, format_storage, new_directory_id
from simulator.disk import SimDisk

LOG_DIR = "/data"
CLUSTER = "broker-scenarios"
WALL_MS = 1_800_000_000_000
CLIENT = ("client", 1)
NODE = 1


def _error(code: int) -> str:
    return m.ERROR_NAMES.get(code, str(code))


def _partition(arg: str) -> tuple[str, int]:
    topic, _, p = arg.rpartition("-")
    if not topic or not p.isdigit():
        raise ValueError(f"{arg!r} is not TOPIC-PARTITION")
    return topic, int(p)


class BrokerScenario(datadriven.Commands):
    def __init__(self, bugs: frozenset[str] = frozenset()) -> None:
        self.bugs = bugs
        self.now = 0
        self.node: Node | None = None
        self.out: list[str] = []
        self.corr = 0
        self.answers: list = []
        self.answered: set[int] = set()  # correlation ids: every request is answered once
        self.events = False

    # ---------------------------------------------------------------- plumbing

    def _node(self) -> Node:
        if self.node is None:
            raise ValueError("no node: start it first")
        return self.node

    def _pump(self) -> None:
        """Hand what the node sent itself back to it, until it sends nothing more; keep
        what it answered the client."""
        node = self._node()
        for _ in range(1000):
            node.poll(self.now)
            sent = node.outbox.take()
            if not sent:
                return
            for dest, msg in sent:
                if dest == CLIENT:
                    corr = msg.request.correlation_id
                    if corr in self.answered:
                        raise AssertionError(f"{msg.request.name} #{corr} answered twice "
                                             f"(a client drops the connection on the second)")
                    self.answered.add(corr)
                    self.answers.append(msg)
                elif dest == NODE:
                    node.handle(NODE, msg, self.now)
                else:
                    raise AssertionError(f"the node sent {type(msg).__name__} to {dest!r}")
        raise AssertionError("the node kept sending to itself")

    # answers a client retries after its back-off, as Kafka's clients do: the coordinator is
    # loading or moving, or a transaction's markers are still being written
    RETRIED = frozenset({m.COORDINATOR_LOAD_IN_PROGRESS, m.COORDINATOR_NOT_AVAILABLE,
                         m.NOT_COORDINATOR, m.CONCURRENT_TRANSACTIONS})

    def _ask_retrying(self, api: int, version: int, body, error_of):
        """``_ask`` again every 100 ms while the answer is one a client retries."""
        for _ in range(100):
            r = self._ask(api, version, body)
            if r is None or error_of(r) not in self.RETRIED:
                return r
            self.now += 100
            self._pump()
        return r

    def _ask(self, api: int, version: int, body):
        """One request as a client sends it; its answer's body (None: not answered now)."""
        self.corr += 1
        frame = kc.encode_request(api, version, body, correlation_id=self.corr,
                                  client_id="scenario")[4:]
        self.answers = []
        self._node().handle_kafka(CLIENT, kc.decode_request(frame), self.now)
        self._pump()
        for a in self.answers:
            if a.request.correlation_id == self.corr:
                return a.body
        return None

    # ---------------------------------------------------------------- commands

    def start(self, args, kw) -> None:
        bugs = frozenset(b for b in kw.pop("bugs", "").split(",") if b) | self.bugs
        disk = SimDisk()
        rng = random.Random("broker-scenarios")
        directory = new_directory_id(rng)
        format_storage(disk, LOG_DIR, CLUSTER, NODE, (ReplicaKey(NODE, directory),), directory)
        props = {"node.id": str(NODE), "controller.quorum.voters": f"{NODE}@n1:9093",
                 "log.dirs": LOG_DIR, "process.roles": "controller,broker",
                 "listeners": "CONTROLLER://n1:9093,PLAINTEXT://n1:9092",
                 "default.replication.factor": "1", "offsets.topic.num.partitions": "1",
                 "offsets.topic.replication.factor": "1",
                 "transaction.state.log.num.partitions": "1",
                 "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1", "metadata.max.idle.interval.ms": "0",
                 **kw}
        config = dataclasses.replace(load_config(props), bugs=bugs)
        self.node = Node(config, disk, random.Random("node-1"), self.now,
                         on_event=self._event, wall_clock=lambda: WALL_MS + self.now)
        while not self._serving():
            self.now += 10
            self._pump()
            if self.now > 60_000:
                raise AssertionError("the broker was not unfenced within 60 s")
        self.out.append(f"serving at {self.now} ms")
        self.events = "events" in args

    def _serving(self) -> bool:
        node = self._node()
        reg = node.controller.committed.brokers.get(NODE)
        return reg is not None and not reg.fenced and node.broker is not None and \
            node.broker.lifecycle.state == "RUNNING"

    def _event(self, msg) -> None:
        if self.events:
            self.out.append(f"says: {msg}")

    def create_topic(self, args, kw) -> None:
        T = CreateTopicsRequest[5].CreatableTopic
        partitions = int(kw.pop("partitions", 1))
        configs = [T.CreatableTopicConfig(name=k, value=v) for k, v in kw.items()]
        r = self._ask(kc.CREATE_TOPICS, 5, CreateTopicsRequest[5](
            timeout_ms=10_000, validate_only=False, topics=[T(
                name=args[0], num_partitions=partitions, replication_factor=1, assignments=[],
                configs=configs)]))
        t = r.topics[0]
        self.out.append(f"<- CreateTopics({t.name}: {_error(t.error_code)}"
                        + (f", {t.error_message}" if t.error_message else "") + ")")
        if t.error_code != m.NONE:
            return
        for _ in range(100):  # until the broker leads the new partitions
            if all(self._node().broker.rm.partitions.get((args[0], p)) is not None
                   for p in range(partitions)):
                return
            self.now += 10
            self._pump()
        raise AssertionError(f"the broker does not lead {args[0]}")

    def produce(self, args, kw) -> None:
        topic, p = _partition(args[0])
        values = [(None, v.encode()) for v in kw["values"].split(",")]
        idempotent = {}
        if "pid" in kw:
            idempotent = dict(producer_id=int(kw["pid"]), producer_epoch=int(kw["epoch"]),
                              base_sequence=int(kw.get("seq", 0)))
        batch = records.build_batch(0, 0, values, WALL_MS + self.now,
                                    transactional="txn" in kw, **idempotent)
        v = int(kw.get("v", 9))
        TD = ProduceRequest[v].TopicProduceData
        r = self._ask(kc.PRODUCE, v, ProduceRequest[v](
            transactional_id=kw.get("txn"), acks=int(kw.get("acks", -1)), timeout_ms=5000,
            topic_data=[TD(name=topic, partition_data=[TD.PartitionProduceData(
                index=p, records=batch)])]))
        if r is None:
            self.out.append("<- Produce not answered")
            return
        a = r.responses[0].partition_responses[0]
        shown = f"base_offset={a.base_offset}" if a.error_code == m.NONE else _error(a.error_code)
        self.out.append(f"<- Produce({shown})")

    def fetch(self, args, kw) -> None:
        topic, p = _partition(args[0])
        v = int(kw.get("v", 12))
        R = FetchRequest[v]
        fields = dict(partition=p, fetch_offset=int(kw["offset"]), log_start_offset=-1,
                      partition_max_bytes=1 << 20, current_leader_epoch=-1)
        if v >= 12:
            fields["last_fetched_epoch"] = int(kw.get("epoch", -1))
        r = self._ask(kc.FETCH, v, R(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
            isolation_level=1 if "committed" in args else 0, session_id=0, session_epoch=-1,
            topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                **fields)])], forgotten_topics_data=[], rack_id=""))
        a = r.responses[0].partitions[0]
        if a.error_code != m.NONE:
            self.out.append(f"<- Fetch({_error(a.error_code)})")
            return
        values = []
        for header, batch in records.iter_batches(a.records or b""):
            if header.is_control:
                values.append("commit" if records.decode_records(batch)[1][0].key
                              == records.control_key(1) else "abort")
                continue
            for rec in records.decode_records(batch)[1]:
                values.append(f"{rec.offset}:{rec.value.decode()}")
        parts = [f"hw={a.high_watermark}", f"lso={a.last_stable_offset}",
                 f"records=[{' '.join(values)}]"]
        if a.aborted_transactions:
            parts.append("aborted=" + ",".join(f"{t.producer_id}@{t.first_offset}"
                                               for t in a.aborted_transactions))
        if v >= 12 and a.diverging_epoch is not None and a.diverging_epoch.epoch != -1:
            parts.append(f"diverging={a.diverging_epoch.epoch}@{a.diverging_epoch.end_offset}")
        self.out.append(f"<- Fetch({', '.join(parts)})")

    def list_offsets(self, args, kw) -> None:
        topic, p = _partition(args[0])
        v = int(kw.get("v", 9))
        R = ListOffsetsRequest[v]
        r = self._ask(kc.LIST_OFFSETS, v, R(
            replica_id=-1, isolation_level=1 if "committed" in args else 0,
            topics=[R.ListOffsetsTopic(name=topic, partitions=[
                R.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=p, current_leader_epoch=-1, timestamp=int(kw["ts"]))])]))
        a = r.topics[0].partitions[0]
        if a.error_code != m.NONE:
            self.out.append(f"<- ListOffsets({_error(a.error_code)})")
        else:
            self.out.append(f"<- ListOffsets(offset={a.offset}, timestamp={a.timestamp})")

    def find_coordinator(self, args, kw) -> None:
        """FindCoordinator v3, asked again every 100 ms (as clients do while the internal
        topic is created) until it names a coordinator."""
        for _ in range(100):
            r = self._ask(kc.FIND_COORDINATOR, 3, FindCoordinatorRequest[3](
                key=args[0], key_type=1 if "txn" in args else 0))
            if r.error_code == m.NONE:
                self.out.append(f"<- FindCoordinator(node={r.node_id})")
                return
            self.now += 100
            self._pump()
        self.out.append(f"<- FindCoordinator({_error(r.error_code)})")

    def init_pid(self, args, kw) -> None:
        r = self._ask_retrying(kc.INIT_PRODUCER_ID, 4, InitProducerIdRequest[4](
            transactional_id=kw.get("txn"), transaction_timeout_ms=60_000,
            producer_id=int(kw.get("pid", -1)), producer_epoch=int(kw.get("epoch", -1))),
            lambda r: r.error_code)
        if r is None:
            self.out.append("<- InitProducerId not answered")
        elif r.error_code != m.NONE:
            self.out.append(f"<- InitProducerId({_error(r.error_code)})")
        else:
            self.out.append(f"<- InitProducerId(pid={r.producer_id}, epoch={r.producer_epoch})")

    def add_partitions(self, args, kw) -> None:
        R = AddPartitionsToTxnRequest[3]
        by_topic: dict[str, list[int]] = {}
        for a in args[1:]:
            topic, p = _partition(a)
            by_topic.setdefault(topic, []).append(p)
        r = self._ask_retrying(kc.ADD_PARTITIONS_TO_TXN, 3, R(
            v3_and_below_transactional_id=args[0], v3_and_below_producer_id=int(kw["pid"]),
            v3_and_below_producer_epoch=int(kw["epoch"]),
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in by_topic.items()]),
            lambda r: max(p.partition_error_code for t in r.results_by_topic_v3_and_below
                          for p in t.results_by_partition))
        errors = sorted({_error(p.partition_error_code) for t in r.results_by_topic_v3_and_below
                         for p in t.results_by_partition})
        self.out.append(f"<- AddPartitionsToTxn({', '.join(errors)})")

    def add_offsets(self, args, kw) -> None:
        r = self._ask_retrying(kc.ADD_OFFSETS_TO_TXN, 3, AddOffsetsToTxnRequest[3](
            transactional_id=args[0], producer_id=int(kw["pid"]),
            producer_epoch=int(kw["epoch"]), group_id=kw["group"]), lambda r: r.error_code)
        self.out.append("<- AddOffsetsToTxn not answered" if r is None
                        else f"<- AddOffsetsToTxn({_error(r.error_code)})")

    def end_txn(self, args, kw) -> None:
        r = self._ask_retrying(kc.END_TXN, 3, EndTxnRequest[3](
            transactional_id=args[0], producer_id=int(kw["pid"]),
            producer_epoch=int(kw["epoch"]), committed="commit" in args),
            lambda r: r.error_code)
        self.out.append("<- EndTxn not answered" if r is None
                        else f"<- EndTxn({_error(r.error_code)})")

    def tick(self, args, kw) -> None:
        self.now += int(kw["ms"])
        self._pump()

    COMMANDS = {"start": start, "create-topic": create_topic, "produce": produce,
                "fetch": fetch, "list-offsets": list_offsets, "init-pid": init_pid,
                "find-coordinator": find_coordinator,
                "add-partitions": add_partitions, "add-offsets": add_offsets, "end-txn": end_txn,
                "tick": tick}
