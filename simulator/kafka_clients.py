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
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import records
from workloads.queue import VALUE_STRIDE, key_name, key_partition
from workloads.queue_client import DEFINITE_SEND_ERRORS

from .kafka_crashes import ClientCrashes
from .kafka_txn import TxnProducers
from .kafka_consumers import SimConsumers
from .kafka_state import (BACKOFF_MS, DELIVERY_TIMEOUT_MS, PRODUCER_RESET, PRODUCE_TIMEOUT_MS,
                          REQUEST_TIMEOUT_MS, RETRIABLE, TOPIC, _Consumer, _Producer)


class SimKafkaClients(SimConsumers, TxnProducers):
    """The queue workload in the simulator: ``sim`` gives time, the event queue, the nodes
    and the network; events for the clients come back through :meth:`event` and
    :meth:`reply`."""
    TOPIC, BACKOFF_MS, DELIVERY_TIMEOUT_MS = TOPIC, BACKOFF_MS, DELIVERY_TIMEOUT_MS

    def __init__(self, sim, rng: random.Random, producers: int, consumers: int,
                 partitions: int, replication: int, op_interval_ms: int, stop_at_ms: int,
                 final_at_ms: int, idempotent=lambda process: True,
                 scripts: dict[int, list[dict]] | None = None, start_at_ms: int = 0,
                 topic_configs: dict[str, str] | None = None,
                 transactional: bool = False, crash_interval_ms: int | None = None,
                 crash_seed=None, more_scripts=None, crash_mid_op: bool = False,
                 zombie_producers: bool = False) -> None:
        """``idempotent(process)``: whether that producer is (else it has no retries).
        ``crash_interval_ms``: Jepsen's crash-clients (``workloads.queue.client_lifetimes``,
        drawn from ``crash_seed``): each client slot's client is crashed between two of its
        operations after a life drawn uniform in 0 .. twice this, and a fresh one goes on as
        the next process number (the slot plus a multiple of the slots' count), as Docker's
        ``queue_worker`` does; ``more_scripts(process)``: a successor's script;
        ``crash_mid_op``: crashed when its life ends, in the middle of an operation if one
        is in flight (``kafka_crashes``); ``zombie_producers``: a transactional producer
        whose life ends goes on beside its successor until fenced.
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
        self._idempotent = idempotent
        self.crashes = ClientCrashes(self, crash_interval_ms, crash_seed,
                                     base + consumers if scripts is None else producers,
                                     more_scripts, crash_mid_op, zombie_producers)
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
        if self.crashes.gone(process) or self.crashes.crashed(process):
            return  # a crashed process's events die with it; its successor steps on
        if self.scripts is not None:
            self._scripted(process)
        elif process in self._producer:
            self._send(self._producer[process])
        else:
            self._consume(self._consumer[process])

    def _scripted(self, process: int) -> None:
        """The process's next operation of its script (a Docker run's generator)."""
        c = self._consumer[process]
        if not c.assigned:  # as a Docker queue process, it assigns before its first op
            c.assigned = True
            self._assign(c)
            return
        op = next(self.crashes.script(process), None)
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
        if self.sim.now < self.stop_at_ms and process in self._producer:
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
        if process in self._producer:  # not crashed since
            self._attempt(self._producer[process])

    def _crash_client(self, process: int) -> None:
        self.crashes.crash_now(process)

    def _send_done(self, p: _Producer, type_: str, value, error: str | None = None) -> None:
        op, p.op = p.op, None
        self._record(p.process, type_, "send", op["key"], value, error)
        self._next(p.process)


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
