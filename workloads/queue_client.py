"""Queue workload clients: real Kafka clients (confluent-kafka by default, kafka-python as an option).

Each logical process owns one client: a producer (acks=all) and a consumer
assigned every partition of the topic from its beginning. Calls are
synchronous (they run in the process's own thread) and return a
:class:`Result` whose ``type`` follows Jepsen:

- ``ok``: it happened (a send's offset, a poll's messages);
- ``fail``: it certainly did not happen (a poll that returned nothing
  because of an error; a send refused before it could be appended, which
  can only be known without client retries, i.e. with idempotence off);
- ``info``: unknown (timeouts, lost connections, any send error after
  which the client may have retried).

Poll results map keys to ``[[offset, value], ...]`` in the order read.
"""
from __future__ import annotations

import logging

import time
from dataclasses import dataclass

from .queue import key_name, key_partition

# Errors a broker returns only before appending anything; with client retries off they are
# definite. Not NOT_LEADER_OR_FOLLOWER: a leader that appended the record and then lost its
# leadership while waiting for the ISR (acks=all) answers it too, as Kafka's DelayedProduce
# does, and the record may be committed by the next leader that had fetched it.
DEFINITE_SEND_ERRORS = {3: "UNKNOWN_TOPIC_OR_PARTITION", 10: "MESSAGE_TOO_LARGE",
                        19: "NOT_ENOUGH_REPLICAS", 21: "INVALID_REQUIRED_ACKS",
                        2: "CORRUPT_MESSAGE"}
CLIENTS = ("confluent-kafka", "kafka-python")
MESSAGE_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class Result:
    type: str  # ok | fail | info
    value: object = None  # send: offset; poll: {key: [[offset, value], ...]}
    error: str | None = None


# librdkafka's own log lines (connection refused while a node is down, and the like) go here,
# not to the terminal; a campaign writes them to its run directory (kafka-clients.log).
CLIENT_LOG = logging.getLogger("chaoskraft.kafka_clients")
CLIENT_LOG.propagate = False
CLIENT_LOG.addHandler(logging.NullHandler())


def _quiet(_err) -> None:
    pass  # librdkafka reports broker connection errors by itself; the history has what matters


def _drop_producer(producer) -> None:
    """End a producer now: what it still holds is dropped (those sends were already
    recorded as info), and its threads stop, so it sends nothing after the run."""
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # noqa: BLE001 - a producer after a fatal error may refuse; it still closes
        pass
    producer.close()


class ConfluentQueueClient:
    def __init__(self, bootstrap: str, topic: str, partitions: int, timeout_s: float,
                 idempotent: bool, process: int) -> None:
        from confluent_kafka import Producer
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.timeout_s = timeout_s
        self.idempotent = idempotent
        self.process = process
        timeout_ms = int(timeout_s * 1000)
        # librdkafka keeps retrying a message for message.timeout.ms. When one times out while
        # in flight an idempotent producer must reset its producer id and may then send again
        # what the broker already has (a duplicate the broker cannot recognise). So messages
        # live well past any fault (fail-over is bounded by the 9 s broker session); the
        # operation itself still ends after timeout_s, as info, while the client retries.
        conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": idempotent,
                "linger.ms": 0, "message.timeout.ms": max(timeout_ms, MESSAGE_TIMEOUT_MS),
                "request.timeout.ms": min(timeout_ms, 30000), "error_cb": _quiet, "logger": CLIENT_LOG,
                "socket.connection.setup.timeout.ms": max(1000, timeout_ms)}
        if not idempotent:
            conf["retries"] = 0
        self._producer_conf = conf
        self.producer = Producer(conf)
        self.consumer = None

    def _new_producer(self) -> None:
        """After a fatal error (e.g. an idempotent producer out of sequence) only a new
        producer can go on, as librdkafka documents."""
        from confluent_kafka import Producer
        _drop_producer(self.producer)
        self.producer = Producer(self._producer_conf)

    def assign(self) -> Result:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
        parts = [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
        if self.consumer is not None:
            # Again: the same consumer starts every partition over from offset 0.
            try:
                self.consumer.assign(parts)
            except KafkaException as exc:
                return Result("fail", None, exc.args[0].name() if exc.args else str(exc))
            return Result("ok", [key_name(p) for p in range(self.partitions)])
        self.consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": f"chaoskraft-{self.process}",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100, "error_cb": _quiet, "logger": CLIENT_LOG,
            "socket.connection.setup.timeout.ms": max(1000, int(self.timeout_s * 1000))})
        self.consumer.assign(parts)
        return Result("ok", [key_name(p) for p in range(self.partitions)])

    def send(self, key: str, value: int) -> Result:
        from confluent_kafka import KafkaException
        box: list = []
        try:
            self.producer.produce(self.topic, value=str(value).encode(),
                                  partition=key_partition(key),
                                  on_delivery=lambda err, msg: box.append((err, msg)))
        except BufferError as exc:
            return Result("fail", None, f"client queue full: {exc}")
        except KafkaException as exc:
            self._new_producer()  # nothing was queued, but the producer cannot go on
            return Result("fail", None, exc.args[0].name() if exc.args else str(exc))
        deadline = time.monotonic() + self.timeout_s + 1.0
        try:
            while not box and time.monotonic() < deadline:
                self.producer.poll(0.05)
        except KafkaException as exc:
            # A fatal producer error while this send was in flight: it may have been written.
            self._new_producer()
            return Result("info", None, exc.args[0].name() if exc.args else str(exc))
        if not box:
            return Result("info", None, "no delivery report")
        err, msg = box[0]
        if err is None:
            return Result("ok", msg.offset())
        name = err.name()
        if not self.idempotent and err.code() in DEFINITE_SEND_ERRORS:
            return Result("fail", None, name)
        return Result("info", None, name)

    def poll(self) -> Result:
        if self.consumer is None:
            return Result("fail", None, "not assigned")
        try:
            msgs = self.consumer.consume(500, min(self.timeout_s, 0.1))
        except Exception as exc:  # noqa: BLE001 - the client's own errors: nothing was read
            return Result("fail", None, f"{type(exc).__name__}: {exc}")
        out: dict[str, list] = {}
        for m in msgs:
            if m.error() is not None:
                continue  # partition EOF and transient errors: no message
            out.setdefault(key_name(m.partition()), []).append([m.offset(), int(m.value())])
        return Result("ok", out)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        _drop_producer(self.producer)


class KafkaPythonQueueClient:
    def __init__(self, bootstrap: str, topic: str, partitions: int, timeout_s: float,
                 idempotent: bool, process: int) -> None:
        from kafka import KafkaProducer
        self.bootstrap = bootstrap.split(",")
        self.topic = topic
        self.partitions = partitions
        self.timeout_s = timeout_s
        self.idempotent = idempotent
        timeout_ms = int(timeout_s * 1000)
        self.producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=idempotent,
            retries=(5 if idempotent else 0), request_timeout_ms=timeout_ms,
            max_block_ms=timeout_ms, linger_ms=0)
        self.consumer = None

    def assign(self) -> Result:
        from kafka import KafkaConsumer, TopicPartition
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        if self.consumer is not None:
            # Again: the same consumer starts every partition over from offset 0.
            self.consumer.seek_to_beginning(*tps)
            return Result("ok", [key_name(p) for p in range(self.partitions)])
        self.consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                      auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                      request_timeout_ms=max(int(self.timeout_s * 1000), 1000))
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        return Result("ok", [key_name(p) for p in range(self.partitions)])

    def send(self, key: str, value: int) -> Result:
        from kafka.errors import KafkaError
        try:
            future = self.producer.send(self.topic, value=str(value).encode(),
                                        partition=key_partition(key))
            md = future.get(self.timeout_s + 1.0)
            return Result("ok", md.offset)
        except KafkaError as exc:
            code = getattr(exc, "errno", None)
            if not self.idempotent and code in DEFINITE_SEND_ERRORS:
                return Result("fail", None, DEFINITE_SEND_ERRORS[code])
            return Result("info", None, type(exc).__name__)

    def poll(self) -> Result:
        if self.consumer is None:
            return Result("fail", None, "not assigned")
        try:
            batches = self.consumer.poll(int(min(self.timeout_s, 0.1) * 1000), max_records=500)
        except Exception as exc:  # noqa: BLE001 - nothing was read
            return Result("fail", None, f"{type(exc).__name__}: {exc}")
        out: dict[str, list] = {}
        for tp, msgs in batches.items():
            out.setdefault(key_name(tp.partition), []).extend(
                [m.offset, int(m.value)] for m in msgs)
        return Result("ok", out)

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        self.producer.close(0)


def make_client(name: str, bootstrap: str, topic: str, partitions: int, timeout_s: float,
                idempotent: bool, process: int):
    cls = {"confluent-kafka": ConfluentQueueClient, "kafka-python": KafkaPythonQueueClient}[name]
    return cls(bootstrap, topic, partitions, timeout_s, idempotent, process)


def read_to_end(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> dict:
    """Every message of every partition, from offset 0 to its high watermark (confluent-kafka).
    Raises TimeoutError naming the partitions not read to the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaoskraft-final",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "error_cb": _quiet,
                  "logger": CLIENT_LOG})
    try:
        deadline = time.monotonic() + timeout_s
        ends = {}
        for p in range(partitions):
            while True:
                try:
                    ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    break
                except Exception:  # noqa: BLE001 - leader not known yet
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no high watermark for partition {p}") from None
                    time.sleep(0.5)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out: dict[str, list] = {key_name(p): [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        while len(done) < partitions:
            if time.monotonic() > deadline:
                missing = sorted(set(range(partitions)) - done)
                raise TimeoutError(f"partitions {missing} not read to their end {ends}")
            for m in c.consume(1000, 0.5):
                if m.error() is not None:
                    continue
                out[key_name(m.partition())].append([m.offset(), int(m.value())])
                if m.offset() + 1 >= ends[m.partition()]:
                    done.add(m.partition())
        return out
    finally:
        c.close()
