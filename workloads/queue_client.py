"""Queue workload clients: real Kafka clients (confluent-kafka by default, kafka-python as an option).

Each logical process owns one client: a producer (acks=all) and a consumer
assigned every partition of the topic from its beginning, or (``consume:
subscribe``) a member of one consumer group, polling what the group gives
it. Calls are
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

from core.stats import FATAL as FATAL_PREFIX

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
GROUP = "chaoskraft-queue"  # the consumer group of subscribe(); transactional ids' prefix
TXN_TIMEOUT_MS = 20_000  # a transaction a client left open is aborted this soon
SESSION_TIMEOUT_MS = 6000  # the shortest a broker allows: a member cut off leaves quickly
# A send whose client crashed before its answer came (``give_up_s``): its fate is unknown
CRASHED_MID_OP = "client crashed mid-operation"


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


def fatal_name(err) -> str:
    """A librdkafka error's name, marked ``fatal:`` when the producer cannot go on (the
    history's stats count them: ``fatal_errors``; one Kafka would not cause is a bug)."""
    name = err.name() if hasattr(err, "name") else str(err)
    return f"{FATAL_PREFIX}{name}" if getattr(err, "fatal", lambda: False)() else name


def _drop_producer(producer) -> None:
    """End a producer now: what it still holds is dropped (those sends were already
    recorded as info), and its threads stop, so it sends nothing after the run."""
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # noqa: BLE001 - a producer after a fatal error may refuse; it still closes
        pass
    try:
        producer.close()
    except Exception:  # noqa: BLE001 - a transactional producer aborts its open transaction
        pass  # on close, which fails after a fatal error; it is closed all the same


class ConfluentQueueClient:
    def __init__(self, bootstrap: str, topic: str, partitions: int, timeout_s: float,
                 idempotent: bool, process: int, transactions: bool = False,
                 compression: str = "none", group_protocol: str = "classic",
                 transactional_id: str | None = None) -> None:
        from confluent_kafka import Producer
        self.group_protocol = group_protocol
        # after a fatal error a new producer goes on (True), or none does and ``fenced`` is
        # set (a zombie, whose new producer would fence its successor: the workload says so)
        self.renew_on_fatal = True
        self.fenced = False
        self.transactions = transactions
        self._txn_ready = False
        # "commit" or "abort": the end of the last transaction is still unknown (it timed out
        # retriably); librdkafka wants the same call again before the next transaction
        self._unfinished: str | None = None
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
                "socket.connection.setup.timeout.ms": max(1000, timeout_ms),
                "compression.type": compression}
        if not idempotent and not transactions:
            conf["retries"] = 0
        if transactions:  # one transactional id per process (or as given: a slot's, whose
            # new producer fences the old)
            conf.update({"enable.idempotence": True,
                         "transactional.id": transactional_id or f"{GROUP}-{process}",
                         "transaction.timeout.ms": TXN_TIMEOUT_MS,
                         "message.timeout.ms": TXN_TIMEOUT_MS})  # librdkafka: no longer
        self._producer_conf = conf
        self.producer = Producer(conf)
        self.consumer = None

    def _new_producer(self) -> None:
        """After a fatal error (e.g. an idempotent producer out of sequence) only a new
        producer can go on, as librdkafka documents; a zombie's goes on no more."""
        from confluent_kafka import Producer
        if not self.renew_on_fatal:
            self.fenced = True
            return
        _drop_producer(self.producer)
        self.producer = Producer(self._producer_conf)
        self._txn_ready = False
        self._unfinished = None

    def _end(self, commit: bool) -> None:
        """commit_transaction or abort_transaction as librdkafka documents them: a retriable
        error (a timeout, a coordinator moving) is answered by the same call again, until the
        operation's time is up; any other error is raised."""
        from confluent_kafka import KafkaException
        end = self.producer.commit_transaction if commit else self.producer.abort_transaction
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                end(max(deadline - time.monotonic(), 0.1))
                self._unfinished = None
                return
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if (err is None or not err.retriable() or err.fatal() or err.txn_requires_abort()
                        or time.monotonic() >= deadline):
                    self._unfinished = "commit" if commit else "abort"
                    raise
            time.sleep(0.1)

    def _after_unknown_end(self, exc) -> None:
        """The transaction's end is unknown (the history says info): only a fatal error takes
        a new producer, as in Kafka; otherwise this one ends it at the next transaction."""
        err = exc.args[0] if getattr(exc, "args", None) else None
        if err is not None and hasattr(err, "fatal") and err.fatal():
            self._new_producer()

    def txn(self, mops: list, abort: bool = False) -> list[Result]:
        """Sends and polls (``("send", key, value)`` or ``("poll",)``) in one transaction,
        committed (or, with ``abort``, aborted on purpose): a result per micro-operation.
        Sends are ok (with their offsets) once the commit succeeded, fail once the
        transaction was aborted, info when its end is unknown; polls (read_committed) are
        what they read, whatever the transaction's end."""
        from confluent_kafka import KafkaException

        def name(exc) -> str:
            if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
                return fatal_name(exc.args[0])
            return str(exc)
        try:
            if not self._txn_ready:
                self.producer.init_transactions(self.timeout_s)
                self._txn_ready = True
            if self._unfinished is not None:  # the last one's end first, as librdkafka wants
                try:
                    self._end(self._unfinished == "commit")
                except KafkaException as exc:
                    if not (exc.args and exc.args[0].txn_requires_abort()):
                        raise
                    self._end(False)
            self.producer.begin_transaction()
        except KafkaException as exc:  # nothing was sent
            if exc.args and exc.args[0].fatal():
                self._new_producer()
            return [Result("fail", None, name(exc))] * len(mops)
        results: list = [None] * len(mops)
        boxes: dict[int, list] = {}
        failed = None
        for i, mop in enumerate(mops):
            if mop[0] == "poll":
                results[i] = self.poll()
                continue
            box: list = []
            try:
                self.producer.produce(self.topic, value=str(mop[2]).encode(),
                                      partition=key_partition(mop[1]),
                                      on_delivery=lambda err, msg, box=box: box.append((err, msg)))
                boxes[i] = box
            except (BufferError, KafkaException) as exc:
                failed = failed or f"produce: {exc}"
                results[i] = Result("fail", None, failed)  # never queued
        committed, error = None, failed
        try:
            if abort and not failed:
                # The records reach the log before the abort, so there is something for the
                # abort to hide: aborted at once, librdkafka purges what it has not sent yet.
                self.producer.flush(self.timeout_s)
            if failed or abort:
                raise RuntimeError(failed or "aborted on purpose")
            self._end(True)
            committed = True
        except (KafkaException, RuntimeError) as exc:
            error = error or name(exc)
            needs_abort = failed or abort or (isinstance(exc, KafkaException) and exc.args
                                              and exc.args[0].txn_requires_abort())
            last = exc
            if needs_abort:
                try:
                    self._end(False)
                    committed = False
                except KafkaException as again:
                    error = f"{error}; abort: {name(again)}"
                    last = again
            if committed is None:
                self._after_unknown_end(last)
        try:
            self.producer.poll(0)  # delivery reports
        except KafkaException:  # a fatal error a zombie's producer keeps: none came
            if self.renew_on_fatal:
                raise
        for i, box in boxes.items():
            if committed and box and box[0][0] is None:
                results[i] = Result("ok", box[0][1].offset())
            elif committed is False:
                results[i] = Result("fail", None, f"aborted: {error}")
            else:
                results[i] = Result("info", None, error or "no delivery report")
        return results

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

    def subscribe(self) -> Result:
        """Join the workload's consumer group (one for every process): the group's coordinator
        shares the partitions out, a rebalance moves them, and a partition resumes at the
        offsets the group committed (automatically, every second)."""
        from confluent_kafka import Consumer, KafkaException
        try:
            if self.consumer is None:
                # KIP-848's members take their session and heartbeat interval from the group
                # (the broker's group.consumer.* settings), not from the client
                timing = {"group.protocol": "consumer"} if self.group_protocol == "consumer" \
                    else {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 1000}
                self.consumer = Consumer({
                    "bootstrap.servers": self.bootstrap, "group.id": GROUP,
                    "enable.auto.commit": True, "auto.commit.interval.ms": 1000,
                    "auto.offset.reset": "earliest", **timing, "fetch.wait.max.ms": 100,
                    "error_cb": _quiet, "logger": CLIENT_LOG,
                    "socket.connection.setup.timeout.ms": max(1000, int(self.timeout_s * 1000))})
            else:  # again: leave the group and join it anew (a rebalance)
                self.consumer.unsubscribe()
            self.consumer.subscribe([self.topic])
        except KafkaException as exc:
            return Result("fail", None, exc.args[0].name() if exc.args else str(exc))
        return Result("ok", [key_name(p) for p in range(self.partitions)])

    def send(self, key: str, value: int, give_up_s: float | None = None) -> Result:
        """Produce one record and wait for its delivery report; ``give_up_s``: the client
        crashes that soon if no report came (info, ``CRASHED_MID_OP``; the caller closes
        it, dropping what it still holds)."""
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
            return Result("fail", None, fatal_name(exc.args[0]) if exc.args else str(exc))
        deadline = time.monotonic() + self.timeout_s + 1.0
        crash = None if give_up_s is None else time.monotonic() + give_up_s
        try:
            while not box and time.monotonic() < min(deadline, crash or deadline):
                self.producer.poll(min(0.05, max(0.0, (crash or deadline) - time.monotonic())))
        except KafkaException as exc:
            # A fatal producer error while this send was in flight: it may have been written.
            self._new_producer()
            return Result("info", None, fatal_name(exc.args[0]) if exc.args else str(exc))
        if not box:
            return Result("info", None, CRASHED_MID_OP if crash is not None and crash < deadline
                          else "no delivery report")
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
            try:
                # A group member leaves before it is destroyed: closing one that is still
                # subscribed while its coordinator is unknown trips librdkafka's assert
                # "rd_kafka_cgrp_destroy_final: !rkcg->rkcg_subscription" (2.16.0).
                self.consumer.unsubscribe()
                self.consumer.consume(100, 0.2)
            except Exception:  # noqa: BLE001 - an assigned (not subscribed) consumer
                pass
            self.consumer.close()
            self.consumer = None
        _drop_producer(self.producer)


class KafkaPythonQueueClient:
    def __init__(self, bootstrap: str, topic: str, partitions: int, timeout_s: float,
                 idempotent: bool, process: int, compression: str = "none") -> None:
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
            max_block_ms=timeout_ms, linger_ms=0,
            compression_type=None if compression == "none" else compression)
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

    def subscribe(self) -> Result:
        from kafka import KafkaConsumer
        if self.consumer is None:
            self.consumer = KafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=GROUP, enable_auto_commit=True,
                auto_commit_interval_ms=1000, auto_offset_reset="earliest",
                session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=1000,
                fetch_max_wait_ms=100,
                request_timeout_ms=max(int(self.timeout_s * 1000), SESSION_TIMEOUT_MS + 1000))
        else:
            self.consumer.unsubscribe()
        self.consumer.subscribe([self.topic])
        return Result("ok", [key_name(p) for p in range(self.partitions)])

    def send(self, key: str, value: int, give_up_s: float | None = None) -> Result:
        """As ``ConfluentQueueClient.send``."""
        from kafka.errors import KafkaError, KafkaTimeoutError
        wait = self.timeout_s + 1.0
        try:
            future = self.producer.send(self.topic, value=str(value).encode(),
                                        partition=key_partition(key))
            md = future.get(wait if give_up_s is None else min(wait, give_up_s))
            return Result("ok", md.offset)
        except KafkaTimeoutError:
            return Result("info", None, CRASHED_MID_OP if give_up_s is not None
                          and give_up_s < wait else "KafkaTimeoutError")
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
                idempotent: bool, process: int, transactions: bool = False,
                compression: str = "none", group_protocol: str = "classic",
                transactional_id: str | None = None):
    """``compression``: the producer's compression.type (none, gzip, snappy, lz4, zstd);
    ``group_protocol``: subscribe()'s, classic or consumer (KIP-848); ``transactional_id``:
    a transactional client's, if not its process's own."""
    if transactions or group_protocol != "classic":
        if name != "confluent-kafka":
            raise ValueError(f"transactions and the consumer group protocol run with "
                             f"confluent-kafka only, not {name}")
        return ConfluentQueueClient(bootstrap, topic, partitions, timeout_s, idempotent,
                                    process, transactions=transactions, compression=compression,
                                    group_protocol=group_protocol,
                                    transactional_id=transactional_id)
    cls = {"confluent-kafka": ConfluentQueueClient, "kafka-python": KafkaPythonQueueClient}[name]
    return cls(bootstrap, topic, partitions, timeout_s, idempotent, process,
               compression=compression)


def read_to_end(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> dict:
    """Every committed message of every partition, from offset 0 to its high watermark
    (confluent-kafka, read_committed). The end is the high watermark, not the last stable
    offset: a transaction left open at the end of a run holds the LSO back until its
    coordinator aborts it, and a read that stopped at that LSO missed the committed
    transactions after it (read as lost). Raises TimeoutError naming the partitions not
    read to the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaoskraft-final",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "error_cb": _quiet,
                  "logger": CLIENT_LOG})
    # librdkafka asks the watermarks at its consumer's isolation level: read_committed's is
    # the LSO, so the high watermarks come from a read_uncommitted one
    w = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaoskraft-final",
                  "isolation.level": "read_uncommitted", "error_cb": _quiet,
                  "logger": CLIENT_LOG})
    try:
        deadline = time.monotonic() + timeout_s
        ends = {}
        for p in range(partitions):
            while True:
                try:
                    ends[p] = w.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                    break
                except Exception:  # noqa: BLE001 - leader not known yet
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no high watermark for partition {p}") from None
                    time.sleep(0.5)
        w.close()
        w = None
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
            # A transaction marker takes the last offset of a partition and is never handed
            # out: the consumer's position passes it.
            for tp in c.position([TopicPartition(topic, p) for p in set(ends) - done]):
                if tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        return out
    finally:
        if w is not None:
            w.close()
        c.close()
