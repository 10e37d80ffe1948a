"""The partition reassignment scenario real admin clients drive, shared by the test on
three node processes (tests/node/test_reassignment_real_clients.py) and the one on the
5-node Docker cluster (tests/docker/test_kafka_docker.py): while a confluent-kafka
idempotent acks=all producer writes, kafka-python's ``alter_partition_reassignments``
grows a partition from one replica to three (one of them killed mid-move: the move waits
for it, ``list_partition_reassignments`` shows it, and it completes once the broker is
back), shrinks it to two (the removed leader hands over and deletes its copy), reorders it,
and ``elect_leaders`` moves leadership to the new preferred replica; every acknowledged
record is then read once, in order."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from conftest import wait_for


@dataclass
class Brokers:
    """What the scenario needs of a cluster: each broker's own bootstrap address, and how to
    kill and start one and see whether it still holds a copy of a partition."""
    addresses: dict[int, str]  # broker id -> host:port
    kill: Callable[[int], None]
    start: Callable[[int], None]
    holds_copy: Callable[[int, str], bool]  # (broker, "topic-partition directory") -> ?

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses[i] for i in sorted(self.addresses))


def state(brokers: Brokers, via: int, topic: str) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, sorted ISR) of partition 0 as broker ``via`` knows it."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": brokers.addresses[via],
                      "error_cb": lambda e: None}).list_topics(topic, timeout=10)
    t = md.topics[topic]
    assert t.error is None, t.error
    p = t.partitions[0]
    return p.leader, list(p.replicas), sorted(p.isrs)


def create_on_one(brokers: Brokers, topic: str) -> None:
    """The topic with one partition on one replica, listed by every broker."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap, "error_cb": lambda e: None})

    def made():
        try:
            admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "1"})])[
                topic].result(30)
        except Exception as exc:
            if "already exists" not in str(exc):
                raise
        return all(state(brokers, i, topic)[0] >= 0 for i in brokers.addresses)
    wait_for(f"topic {topic} on every broker", made, timeout_s=90)


class Writer:
    """One idempotent acks=all producer writing 0, 1, 2, ... until stopped; ``acked`` holds
    the values the cluster acknowledged, ``failed`` the delivery errors."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
                                  "error_cb": lambda e: None})
        self.topic = topic
        self.acked: list[int] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        def done(err, msg):
            if err is None:
                self.acked.append(int(msg.value()))
            else:
                self.failed.append(str(err))
        n = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, str(n).encode(), partition=0, on_delivery=done)
                n += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(120)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the producer did not flush"


def read_all(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reassign-check",
                  "enable.auto.commit": False, "error_cb": lambda e: None})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[int] = []
        offset = -1
        while offset < high - 1:
            msg = c.poll(10)
            assert msg is not None, f"stopped at offset {offset} of {high}"
            if msg.error() is None:
                out.append(int(msg.value()))
                offset = msg.offset()
        return out
    finally:
        c.close()


def move_partition_under_a_producer(brokers: Brokers, topic: str) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    create_on_one(brokers, topic)
    ids = sorted(brokers.addresses)
    _, [first], _ = state(brokers, ids[0], topic)
    y, z = [b for b in ids if b != first][:2]
    tp = TopicPartition(topic, 0)
    writer = Writer(brokers.bootstrap, topic)
    kp = KafkaAdminClient(bootstrap_servers=brokers.bootstrap, request_timeout_ms=30_000)
    try:
        wait_for("records acknowledged", lambda: len(writer.acked) >= 200)
        brokers.kill(z)  # z is down: the move to it waits
        try:
            assert wait_for("the controller's answer", lambda: kp.alter_partition_reassignments(
                {tp: [y, first, z]})) == {tp: None}
            moving = wait_for("the move listed", lambda: kp.list_partition_reassignments())
            assert moving == {tp: {"replicas": [y, first, z], "adding_replicas": sorted([y, z]),
                                   "removing_replicas": []}}
            wait_for("y in the ISR", lambda: y in state(brokers, first, topic)[2])
            assert kp.list_partition_reassignments([tp])[tp]["adding_replicas"] == sorted(
                [y, z]), "the move is not done until z has caught up too"
        finally:
            brokers.start(z)
        wait_for("the move completed", lambda: kp.list_partition_reassignments() == {},
                 timeout_s=120)
        # the controller's list is empty once the change is committed; broker y's own
        # metadata follows when it has applied it (a CI run read it a moment before)
        wait_for("the target in y's metadata", lambda: state(brokers, y, topic)[1:] == (
            [y, first, z], sorted([first, y, z])))
        n = len(writer.acked)
        # the leader (first) is removed: leadership goes to z, and first's copy is deleted
        assert kp.alter_partition_reassignments({tp: [z, y]}) == {tp: None}
        wait_for("first removed", lambda: state(brokers, y, topic)[:2] == (z, [z, y]))
        wait_for("first's copy deleted", lambda: not brokers.holds_copy(first, f"{topic}-0"))
        # reordered: the same replicas, y now preferred; a preferred election moves the leader
        assert kp.alter_partition_reassignments({tp: [y, z]}) == {tp: None}
        wait_for("the new order", lambda: state(brokers, z, topic)[1] == [y, z])
        assert state(brokers, z, topic)[0] == z, "a reorder alone moves no leader"
        r = kp.elect_leaders(0, {topic: [0]}, raise_errors=False)
        assert [(t, [(x[0], x[1]) for x in ps]) for t, ps in r.replica_election_results] == [
            (topic, [(0, 0)])]
        wait_for("y leading", lambda: state(brokers, z, topic)[0] == y)
        wait_for("more records acknowledged", lambda: len(writer.acked) >= n + 200)
    finally:
        kp.close()
        writer.stop()
    assert writer.failed == [], writer.failed[:5]
    got = read_all(brokers.bootstrap, topic)
    assert len(got) == len(set(got)), "a record was written twice"
    assert got == sorted(got), "records out of order"
    missing = set(writer.acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(writer.acked) >= 400
