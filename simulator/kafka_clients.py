"""The simulated Kafka clients of the queue workload: an admin that creates the topic,
idempotent producers, consumers that ``assign`` every partition, and a final reader.

They speak the Kafka protocol to the brokers: each request is a frame encoded with the
same codec real clients' requests are decoded with (``node_image.kafka_codec``), and each
response is decoded from the bytes the broker encoded. Their operations go to the history
in the shape of the Docker queue workload's (``workloads/queue_workload.py``), so the same
queue checker reads both.

- **Producers** are idempotent (or, where the seed draws Kafka's default campaign mix, the
  odd-numbered ones are without retries: no producer id, one attempt, a definite error
  ``fail``, any other or no answer ``info``); idempotent ones as Kafka's with
  ``enable.idempotence=true`` and ``max.in.flight.requests.per.connection=1``:
  InitProducerId first; each send is one record in one batch with the partition's next
  sequence, sent to the partition's leader with ``acks=all``; a retriable error or a
  request without an answer sends the same batch again (same sequence) after refreshing
  metadata, until the delivery timeout, when the send is indeterminate (``info``) and the
  producer starts over with a new producer id, as Kafka's does when a batch expires.
- **Consumers** are assigned every partition and fetch from each partition's leader, at
  their position, with the leader epoch they know (Fetch v11); a poll is one round of
  fetches. Now and then one re-assigns and reads every partition from offset 0 again (as
  ``workloads.queue``'s processes do).
- **The final reader**, after the faults end and every node is back, reads every
  partition from 0 to its high watermark (``final-poll``). Producers and consumers go on
  for a while after the faults end, so that a cluster that no longer takes writes shows.

One seeded ``random.Random`` draws every choice.

A stored Docker run's twin (``simulator.twin``) runs them scripted instead: each process
both sends and polls, the operations its generator made in the Docker run, one every
1/rate seconds, as ``workloads.queue_workload``'s processes do.
"""
from __future__ import annotations

import random

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import records
from workloads.queue import REASSIGN_EVERY, VALUE_STRIDE, key_name, key_partition
from workloads.queue_client import DEFINITE_SEND_ERRORS

from .kafka_txn import TxnProducers, read_records

TOPIC = "queue"
REQUEST_TIMEOUT_MS = 3_000  # a request without an answer by then is given up (and retried)
DELIVERY_TIMEOUT_MS = 10_000  # a send not acknowledged by then is indeterminate
PRODUCE_TIMEOUT_MS = 2_000  # the Produce request's own timeout_ms (acks=all wait)
FETCH_MAX_WAIT_MS = 100
BACKOFF_MS = 100
STABLE_END_MS = 1_000
FINAL_STUCK_MS = 20_000  # see _final_read
# After the faults end every node restarts; producers and consumers go on until a send made
# since then is acknowledged (at least FINAL_READ_AFTER_MS, at most WRITES_BACK_WITHIN_MS:
# after a restart of every node, registering brokers wait out their old sessions), and then
# the final reader reads, once no send is in progress (one acknowledged after the final
# read would look lost).
FINAL_READ_AFTER_MS = 15_000
WRITES_BACK_WITHIN_MS = 45_000
RETRIABLE = {m.NOT_LEADER_OR_FOLLOWER, m.UNKNOWN_TOPIC_OR_PARTITION, m.LEADER_NOT_AVAILABLE,
             m.NOT_ENOUGH_REPLICAS, m.NOT_ENOUGH_REPLICAS_AFTER_APPEND, m.REQUEST_TIMED_OUT,
             m.FENCED_LEADER_EPOCH, m.UNKNOWN_LEADER_EPOCH, m.KAFKA_STORAGE_ERROR}
# The broker no longer knows the producer's state in a way the producer can go on from:
# the send is indeterminate and the producer starts over with a new id.
PRODUCER_RESET = {m.OUT_OF_ORDER_SEQUENCE_NUMBER, m.UNKNOWN_PRODUCER_ID,
                  m.INVALID_PRODUCER_EPOCH}


class _Producer:
    def __init__(self, process: int, idempotent: bool = True, transactional: bool = False) -> None:
        self.process = process
        self.idempotent = idempotent or transactional
        self.transactional = transactional
        self.txn_id = f"sim-txn-{process}"
        self.coordinator: int | None = None  # of its transactional id, as last found
        self.resume = None  # what a transactional producer does at its next txn_resume
        self.producer_id: int | None = None
        self.epoch = -1
        self.sequence: dict[int, int] = {}
        self.count = 0
        self.op: dict | None = None  # the send in progress


class _Consumer:
    def __init__(self, process: int) -> None:
        self.process = process
        self.position: dict[int, int] = {}
        self.poll: dict | None = None  # the poll in progress: fetches out, messages so far
        self.assigned = False  # a scripted process's first assign is done


class SimKafkaClients(TxnProducers):
    """The queue workload in the simulator: ``sim`` gives time, the event queue, the nodes
    and the network; events for the clients come back through :meth:`event` and
    :meth:`reply`."""
    TOPIC, BACKOFF_MS, DELIVERY_TIMEOUT_MS = TOPIC, BACKOFF_MS, DELIVERY_TIMEOUT_MS

    def __init__(self, sim, rng: random.Random, producers: int, consumers: int,
                 partitions: int, replication: int, op_interval_ms: int, stop_at_ms: int,
                 final_at_ms: int, idempotent=lambda process: True,
                 scripts: dict[int, list[dict]] | None = None, start_at_ms: int = 0,
                 topic_configs: dict[str, str] | None = None,
                 transactional: bool = False) -> None:
        """``idempotent(process)``: whether that producer is (else it has no retries).
        ``transactional``: every producer sends in transactions (``kafka_txn``) and every
        consumer, the final reader included, is read_committed.
        ``scripts``: process -> its operations ({f, key, value}); then each of the
        ``producers`` processes also consumes, starting at ``start_at_ms`` and stepping
        every ``op_interval_ms`` exactly."""
        self.sim = sim
        self.rng = rng
        self.partitions = partitions
        self.replication = replication
        self.op_interval_ms = op_interval_ms
        self.stop_at_ms = stop_at_ms
        self.final_at_ms = final_at_ms
        self.scripts = {p: iter(ops) for p, ops in scripts.items()} if scripts is not None \
            else None
        self.start_at_ms = start_at_ms
        self.topic_configs = topic_configs or {"min.insync.replicas": "2"}
        self.transactional = transactional
        self.isolation_level = 1 if transactional else 0  # read_committed
        self.producers = [_Producer(p, idempotent(p), transactional) for p in range(producers)]
        base = 0 if scripts is not None else producers
        self.consumers = [_Consumer(base + c) for c in range(consumers)]
        self.final_process = base + consumers if scripts is None else producers
        self._producer = {p.process: p for p in self.producers}
        self._consumer = {c.process: c for c in self.consumers}
        self.history: list[dict] = []
        self.topic_ready = False
        self.leaders: dict[int, tuple[int, int]] = {}  # partition -> (leader, leader epoch)
        self._pending: dict[int, tuple] = {}  # correlation id -> (api, version, on_reply, on_lost)
        self._correlation = 0
        self._metadata_out = False
        self._final: dict | None = None
        self.acked_after_faults = 0  # sends invoked after the faults stopped and acknowledged
        self.final_stuck: dict[int, tuple[int, int]] = {}  # partition -> (read to, its HW)

    # ------------------------------------------------------------ plumbing

    def start(self) -> None:
        self.sim.push(500, "kafka", "create_topic")
        self.sim.push(self.final_at_ms, "kafka", "final_read")

    def event(self, kind: str, *args) -> bool:
        """A client event of the simulation's queue; True if something happened."""
        if kind in ("timeout", "reset"):
            entry = self._pending.pop(args[0], None)
            if entry is None:
                return False
            entry[3]()
            return True
        getattr(self, "_" + kind)(*args)
        return True

    def _later(self, delay_ms: int, kind: str, *args) -> None:
        self.sim.push(self.sim.now + max(1, delay_ms), "kafka", kind, *args)

    def _request(self, process: int, node: int, api: int, version: int, body, on_reply,
                 on_lost) -> None:
        """Send a request to ``node``; ``on_reply(body)`` with the decoded response, or
        ``on_lost()`` if none came within REQUEST_TIMEOUT_MS."""
        self._correlation += 1
        corr = self._correlation
        frame = kc.encode_request(api, version, body, correlation_id=corr,
                                  client_id=f"sim-{process}")[4:]
        self._pending[corr] = (api, version, on_reply, on_lost, node)
        self.sim.send(("kafka", process), node, frame)
        self._later(REQUEST_TIMEOUT_MS, "timeout", corr)

    def refused(self, nodes: set[int]) -> None:
        """Those nodes reset every client connection: each request out to them fails, after
        the client's reconnect back-off (a request sent to them later fails likewise:
        ``reset``)."""
        for corr, entry in sorted(self._pending.items()):
            if entry[4] in nodes:
                self._later(BACKOFF_MS, "reset", corr)

    def reset(self, process: int, frame: bytes) -> None:
        """The node reset the connection that carried this request frame."""
        self._later(BACKOFF_MS, "reset", int.from_bytes(frame[4:8], "big", signed=True))

    def reply(self, process: int, frame: bytes) -> None:
        corr = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._pending.pop(corr, None)
        if entry is None:
            return  # too late: given up already
        api, version, on_reply = entry[:3]
        on_reply(kc.decode_response(api, version, frame))

    def _any_node(self) -> int:
        return self.rng.choice(sorted(self.sim.nodes))

    def _record(self, process, type_: str, f: str, key=None, value=None, error=None) -> dict:
        row = {"index": len(self.history), "time": self.sim.now, "process": process,
               "type": type_, "f": f, "key": key, "value": value, "node": None}
        if error is not None:
            row["error"] = error
        self.history.append(row)
        return row

    # ------------------------------------------------------------ topic and metadata

    def _create_topic(self) -> None:
        T = CreateTopicsRequest[4].CreatableTopic
        body = CreateTopicsRequest[4](
            topics=[T(name=TOPIC, num_partitions=self.partitions,
                      replication_factor=self.replication, assignments=[],
                      configs=[T.CreatableTopicConfig(name=k, value=v)
                     for k, v in sorted(self.topic_configs.items())])],
            timeout_ms=5000, validate_only=False)

        def on_reply(resp) -> None:
            error = resp.topics[0].error_code
            if error in (m.NONE, m.TOPIC_ALREADY_EXISTS):
                self._refresh_metadata()
                self._later(BACKOFF_MS, "wait_for_leaders")
            else:
                self._later(1000, "create_topic")
        self._request(-1, self._any_node(), kc.CREATE_TOPICS, 4, body, on_reply,
                      lambda: self._later(BACKOFF_MS, "create_topic"))

    def _wait_for_leaders(self) -> None:
        if len(self.leaders) == self.partitions:
            self.topic_ready = True
            if self.scripts is not None:
                for p in sorted(self.scripts):
                    self._later(self.start_at_ms - self.sim.now, "step", p)
                return
            for c in self.producers + self.consumers:
                self._later(1 + self.rng.randrange(self.op_interval_ms), "step", c.process)
            return
        self._refresh_metadata()
        self._later(200, "wait_for_leaders")

    def _refresh_metadata(self, node: int | None = None, done=None) -> None:
        """Ask ``node`` (any, by default) for the topic's partitions; the leader of the
        highest epoch seen is kept, as clients discard older metadata. ``done()`` after the
        answer or its loss (then several may be out at once)."""
        if done is None:
            if self._metadata_out:
                return
            self._metadata_out = True
        body = MetadataRequest[8](topics=[MetadataRequest[8].MetadataRequestTopic(name=TOPIC)],
                                  allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)

        def on_reply(resp) -> None:
            for t in resp.topics:
                if t.name != TOPIC or t.error_code != m.NONE:
                    continue
                for p in t.partitions:
                    known = self.leaders.get(p.partition_index)
                    if p.leader_id >= 0 and (known is None or p.leader_epoch >= known[1]):
                        self.leaders[p.partition_index] = (p.leader_id, p.leader_epoch)
            on_lost()

        def on_lost() -> None:
            if done is None:
                self._metadata_out = False
            else:
                done()
        self._request(-1, self._any_node() if node is None else node, kc.METADATA, 8, body,
                      on_reply, on_lost)

    # ------------------------------------------------------------ operations

    def _step(self, process: int) -> None:
        if self.sim.now >= self.stop_at_ms or self._final is not None:
            return
        if self.scripts is not None:
            self._scripted(process)
        elif process < len(self.producers):
            self._send(self.producers[process])
        else:
            self._consume(self.consumers[process - len(self.producers)])

    def _scripted(self, process: int) -> None:
        """The process's next operation of its script (a Docker run's generator)."""
        c = self._consumer[process]
        if not c.assigned:  # as a Docker queue process, it assigns before its first op
            c.assigned = True
            self._assign(c)
            return
        op = next(self.scripts[process], None)
        if op is None:
            return
        if op["f"] == "send":
            self._send(self._producer[process], key_partition(op["key"]), op["value"])
        elif op["f"] == "assign":
            self._assign(c)
        else:
            self._consume(c, reassign=False)

    def _next(self, process: int) -> None:
        if self.scripts is not None:
            self._later(self.op_interval_ms, "step", process)
            return
        self._later(1 + self.rng.randrange(self.op_interval_ms), "step", process)

    # producers

    def _send(self, p: _Producer, partition: int | None = None, value: int | None = None) -> None:
        if p.transactional:
            self._txn_begin(p)
            return
        if p.producer_id is None and p.idempotent:
            self._init_producer_id(p, partition, value)
            return
        if partition is None:
            partition = self.rng.randrange(self.partitions)
            p.count += 1
            value = p.process * VALUE_STRIDE + p.count
        row = self._record(p.process, "invoke", "send", key_name(partition), {"value": value})
        p.op = {"partition": partition, "value": value, "key": row["key"],
                "invoked_at": self.sim.now,
                "deadline": self.sim.now + DELIVERY_TIMEOUT_MS,
                "sequence": p.sequence.get(partition, 0)}
        self._attempt(p)

    def _init_producer_id(self, p: _Producer, partition: int | None, value: int | None) -> None:
        """InitProducerId, then the send (a scripted one: the same send, once it has an id)."""
        body = InitProducerIdRequest[1](transactional_id=None, transaction_timeout_ms=60000)

        def again(delay_ms: int) -> None:
            if partition is None:
                self._later(delay_ms, "step", p.process)
            else:
                self._later(delay_ms, "send_scripted", p.process, partition, value)

        def on_reply(resp) -> None:
            if resp.error_code == m.NONE:
                p.producer_id, p.epoch, p.sequence = resp.producer_id, resp.producer_epoch, {}
                if partition is None:
                    self._next(p.process)
                else:
                    self._send(p, partition, value)
            else:
                again(BACKOFF_MS)
        self._request(p.process, self._any_node(), kc.INIT_PRODUCER_ID, 1, body, on_reply,
                      lambda: again(BACKOFF_MS))

    def _send_scripted(self, process: int, partition: int, value: int) -> None:
        if self.sim.now < self.stop_at_ms:
            self._send(self._producer[process], partition, value)

    def _attempt(self, p: _Producer) -> None:
        op = p.op
        if op is None:
            return
        if self.sim.now >= op["deadline"]:
            if "txn" in op:
                self._txn_sent(p, op, None, "delivery timeout")
                return
            if not p.idempotent:  # never sent: no leader was known all along
                self._send_done(p, "fail", {"value": op["value"]}, "no leader known")
                return
            self._send_done(p, "info", {"value": op["value"]}, "delivery timeout")
            p.producer_id = None  # the batch expired: start over with a new producer id
            return
        leader = self.leaders.get(op["partition"])
        if leader is None:
            self._refresh_metadata()
            self._later(BACKOFF_MS, "retry", p.process)
            return
        if p.idempotent:
            batch = records.build_batch(0, 0, [(None, str(op["value"]).encode())], self.sim.now,
                                        transactional=p.transactional,
                                        producer_id=p.producer_id, producer_epoch=p.epoch,
                                        base_sequence=op["sequence"])
        else:
            batch = records.build_batch(0, 0, [(None, str(op["value"]).encode())], self.sim.now)
        TD = ProduceRequest[8].TopicProduceData
        body = ProduceRequest[8](transactional_id=p.txn_id if p.transactional else None,
                                 acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS,
                                 topic_data=[TD(name=TOPIC, partition_data=[
                                     TD.PartitionProduceData(index=op["partition"],
                                                             records=batch)])])
        sent = op

        def on_reply(resp) -> None:
            if p.op is not sent:
                return
            r = resp.responses[0].partition_responses[0]
            if r.error_code != m.NONE and not p.idempotent:  # no retries: the send is over
                name = m.ERROR_NAMES.get(r.error_code, str(r.error_code))
                self._refresh_metadata()
                self._send_done(p, "fail" if r.error_code in DEFINITE_SEND_ERRORS else "info",
                                {"value": op["value"]}, name)
                return
            if r.error_code == m.NONE:
                p.sequence[op["partition"]] = op["sequence"] + 1
            if "txn" in op and (r.error_code == m.NONE or r.error_code in PRODUCER_RESET):
                self._txn_sent(p, op, r.base_offset if r.error_code == m.NONE else None,
                               m.ERROR_NAMES.get(r.error_code, str(r.error_code)))
            elif r.error_code == m.NONE:
                if op["invoked_at"] >= self.sim.duration_ms:
                    self.acked_after_faults += 1
                self._send_done(p, "ok", {"value": op["value"], "offset": r.base_offset})
            elif r.error_code in PRODUCER_RESET:
                self._send_done(p, "info", {"value": op["value"]},
                                m.ERROR_NAMES.get(r.error_code, str(r.error_code)))
                p.producer_id = None
            else:
                if r.error_code not in RETRIABLE:
                    raise AssertionError(f"Produce answered {r.error_code}, which the "
                                         "simulated producer does not expect")
                self._refresh_metadata()
                self._later(BACKOFF_MS, "retry", p.process)

        def on_lost() -> None:
            if p.op is sent:
                self._refresh_metadata()
                if p.idempotent:
                    self._attempt(p)
                else:
                    self._send_done(p, "info", {"value": op["value"]}, "no answer")
        self._request(p.process, leader[0], kc.PRODUCE, 8, body, on_reply, on_lost)

    def _retry(self, process: int) -> None:
        self._attempt(self.producers[process])

    def _send_done(self, p: _Producer, type_: str, value, error: str | None = None) -> None:
        op, p.op = p.op, None
        self._record(p.process, type_, "send", op["key"], value, error)
        self._next(p.process)

    # consumers

    def _consume(self, c: _Consumer, reassign: bool = True) -> None:
        if reassign and self.rng.random() < 1 / REASSIGN_EVERY:
            self._assign(c)
            return
        self._record(c.process, "invoke", "poll")
        by_leader: dict[int, list[int]] = {}
        for partition in range(self.partitions):
            leader = self.leaders.get(partition)
            if leader is None:
                self._refresh_metadata()
                continue
            by_leader.setdefault(leader[0], []).append(partition)
        c.poll = {"out": set(), "msgs": {}}
        for node, parts in sorted(by_leader.items()):
            self._fetch(c, node, parts, c.poll)
        if not c.poll["out"]:
            self._poll_done(c)

    def _assign(self, c: _Consumer) -> None:
        """Assigned every partition again: read each from offset 0 anew."""
        self._record(c.process, "invoke", "assign")
        c.position = {}
        self._record(c.process, "ok", "assign", value=list(map(key_name, range(self.partitions))))
        self._next(c.process)

    def _fetch_body(self, positions: dict[int, int], max_wait_ms: int, partition_max_bytes: int):
        """A consumer's Fetch v11 of ``positions`` (partition -> offset), each at the leader
        epoch known, read_committed in transactions mode."""
        FT = FetchRequest[11].FetchTopic
        return FetchRequest[11](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
            topics=[FT(topic=TOPIC, partitions=[FT.FetchPartition(
                partition=p, current_leader_epoch=self.leaders[p][1], fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                for p, offset in positions.items()])],
            forgotten_topics_data=[], rack_id="")

    def _aborted(self, pd):
        """What ``read_records`` skips of a fetched partition: its aborted transactions
        when read_committed, else nothing."""
        return (pd.aborted_transactions or []) if self.transactional else None

    def _fetch(self, c: _Consumer, node: int, parts: list[int], poll: dict) -> None:
        body = self._fetch_body({p: c.position.get(p, 0) for p in parts}, FETCH_MAX_WAIT_MS,
                                1 << 16)
        poll["out"].add(node)

        def on_reply(resp) -> None:
            if c.poll is not poll:
                return
            for t in resp.responses:
                for pd in t.partitions:
                    if pd.error_code == m.OFFSET_OUT_OF_RANGE:
                        c.position[pd.partition_index] = max(pd.log_start_offset, 0)
                    elif pd.error_code != m.NONE:
                        self._refresh_metadata()
                    else:
                        self._take(c, pd.partition_index, pd.records, poll,
                                   self._aborted(pd))
            self._fetch_done(c, node, poll)

        self._request(c.process, node, kc.FETCH, 11, body, on_reply,
                      lambda: self._fetch_done(c, node, poll))

    def _take(self, c: _Consumer, partition: int, data, poll: dict, aborted) -> None:
        got = poll["msgs"].setdefault(key_name(partition), [])
        c.position[partition] = read_records(data, c.position.get(partition, 0), got, aborted)
        if not got:
            del poll["msgs"][key_name(partition)]

    def _fetch_done(self, c: _Consumer, node: int, poll: dict) -> None:
        if c.poll is not poll:
            return
        poll["out"].discard(node)
        if not poll["out"]:
            self._poll_done(c)

    def _poll_done(self, c: _Consumer) -> None:
        poll, c.poll = c.poll, None
        self._record(c.process, "ok", "poll", value=poll["msgs"])
        self._next(c.process)

    # the final reader

    def _final_read(self) -> None:
        """Read every partition from 0 to its high watermark, once the cluster is back.
        Read_committed (transactions mode), a partition whose last stable offset stays
        below its high watermark (an open transaction) for FINAL_STUCK_MS after the final
        read began, when every producer has stopped and the coordinators abort what is left
        open after TXN_TIMEOUT_MS, is read only that far: what lies beyond it no consumer
        can read (``final_stuck`` says where)."""
        if self._final is None:
            back = self.acked_after_faults or \
                self.sim.now >= self.sim.duration_ms + WRITES_BACK_WITHIN_MS
            if not back or any(p.op is not None for p in self.producers):
                self._later(BACKOFF_MS, "final_read")
                return
            self._record(self.final_process, "invoke", "final-poll")
            self._final = {"end": {}, "position": {}, "msgs": {}, "confirm": {}, "done": set(),
                           "started": self.sim.now}
            self._survey()
            return
        f = self._final
        # A partition is read once its end (the high watermark) was read to and a second
        # ListOffsets a moment later says the same: a new leader's high watermark can be
        # below its predecessor's until its followers fetch again, as in Kafka.
        missing = [p for p in range(self.partitions) if p not in f["done"]]
        for p in missing:
            if p in f["end"] and f["position"].get(p, 0) >= f["end"][p] and \
                    p not in f["confirm"]:
                f["confirm"][p] = f["end"].pop(p)
                self._later(STABLE_END_MS, "final_read")
                return
        if not missing:
            self._record(self.final_process, "ok", "final-poll",
                         value={key_name(p): f["msgs"].get(p, []) for p in range(self.partitions)})
            self._final = {"done": True}
            return
        p = missing[0]
        leader = self.leaders.get(p)
        if leader is None:
            self._refresh_metadata()
            self._later(BACKOFF_MS, "final_read")
            return
        if p not in f["end"]:
            self._list_end(p, leader)
            return
        body = self._fetch_body({p: f["position"].get(p, 0)}, 0, 1 << 20)

        def on_reply(resp) -> None:
            pd = resp.responses[0].partitions[0]
            before = f["position"].get(p, 0)
            if pd.error_code != m.NONE:
                self._refresh_metadata()
            else:
                f["position"][p] = read_records(pd.records, before, f["msgs"].setdefault(p, []),
                                                self._aborted(pd))
            if pd.error_code != m.NONE or f["position"][p] > before:
                self._later(1, "final_read")
            elif self.sim.now >= f["started"] + FINAL_STUCK_MS:
                self.final_stuck[p] = (before, f["end"][p])
                self.sim.stats["final_stuck_partitions"] = len(self.final_stuck)
                f["done"].add(p)
                self._later(1, "final_read")
            else:  # read_committed, below an open transaction: wait for its end
                self._later(BACKOFF_MS, "final_read")
        self._request(self.final_process, leader[0], kc.FETCH, 11, body, on_reply,
                      lambda: self._later(BACKOFF_MS, "final_read"))

    def _survey(self) -> None:
        """Metadata from every node, then the final read: the leader of each partition's
        highest epoch any node knows, not a deposed one that has not heard of its successor
        (it would answer with its own, older high watermark)."""
        out = set(self.sim.nodes)

        def done(node: int) -> None:
            out.discard(node)
            if not out:
                self._later(1, "final_read")
        for node in sorted(self.sim.nodes):
            self._refresh_metadata(node, lambda node=node: done(node))

    def _list_end(self, p: int, leader: tuple[int, int]) -> None:
        LT = ListOffsetsRequest[5].ListOffsetsTopic
        body = ListOffsetsRequest[5](replica_id=-1, isolation_level=0, topics=[LT(
            name=TOPIC, partitions=[LT.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=leader[1], timestamp=-1)])])

        def on_reply(resp) -> None:
            pd = resp.topics[0].partitions[0]
            f = self._final
            if pd.error_code == m.NONE:
                if f["confirm"].get(p) == pd.offset:
                    f["done"].add(p)
                else:
                    f["confirm"].pop(p, None)
                    f["end"][p] = pd.offset
            else:
                self._refresh_metadata()
            self._later(1 if pd.error_code == m.NONE else BACKOFF_MS, "final_read")
        self._request(self.final_process, leader[0], kc.LIST_OFFSETS, 5, body, on_reply,
                      lambda: self._later(BACKOFF_MS, "final_read"))


def check_history(history: list[dict], allowed: tuple[str, ...] = ()) -> \
        tuple[str, str, list | None] | None:
    """The queue checker (``checkers.queue``, in process, allowing the anomaly classes
    ``allowed``: none for idempotent producers, duplicates where some have no retries) on
    the history, written as the typed Parquet file a Docker run's history becomes: None
    when it is valid, else (invariant, detail, counterexample)."""
    import tempfile
    from pathlib import Path

    from checkers.queue import history as queue_history
    from checkers.queue import check_local
    with tempfile.TemporaryDirectory(prefix="chaoskraft-sim-") as d:
        path = Path(d) / "queue.parquet"
        queue_history.write(history, path)
        result = check_local(path, allowed=tuple(allowed))
    if result["valid"] is True:
        return None
    bad = result["bad_anomalies"]
    if not bad:
        return "QueueUnknown", "queue checker: no final poll succeeded, durability unknown", None
    return ("QueueAnomaly",
            "queue checker: " + ", ".join(f"{name} ({result['anomalies'][name]['count']})"
                                          for name in bad),
            [{"anomaly": name, "example": result["anomalies"][name]["examples"][0]}
             for name in bad])
