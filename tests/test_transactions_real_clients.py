"""Transactions with librdkafka on three real node processes (127.0.0.1-3).

A consume-transform-produce loop, as Kafka's exactly-once applications run
it: a read_committed consumer in a group reads ``in``, a transactional
producer writes each value to ``out`` and commits the consumer's offsets in
the same transaction; every fourth transaction is aborted and the consumer
rewound to the committed offsets. Midway the group's coordinator (where the
transaction's offsets go) is killed. At the end a read_committed reader of
``out`` sees every input exactly once and no aborted record, a
read_uncommitted one sees the aborted records too (so aborts happened and
reached the log), and the group's committed offsets are the end of ``in``.
"""
import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from node_image.broker.group_metadata import OFFSETS_TOPIC, partition_for
from tests.conftest import wait_for

INPUTS = 300
PARTITIONS = 2
GROUP = "eos"


@pytest.fixture
def cluster(brokers3):
    return brokers3


def create_topics(cluster, *names):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    for name in names:
        def create():
            try:
                admin.create_topics([NewTopic(name, PARTITIONS, 3, config={
                    "min.insync.replicas": "2"})])[name].result(10)
            except KafkaException as exc:  # an attempt that timed out may have made it
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
            return True
        wait_for(f"topic {name}", create)


def group_coordinator(cluster):
    md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(OFFSETS_TOPIC,
                                                                             timeout=5)
    leader = md.topics[OFFSETS_TOPIC].partitions[partition_for(GROUP, 50)].leader
    return leader if leader > 0 else None


def read_all(cluster, isolation):
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"reader-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition("out", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []
    idle_until = time.monotonic() + 5
    deadline = time.monotonic() + 60
    while time.monotonic() < min(idle_until, deadline):
        msgs = [x for x in c.consume(500, 0.5) if x.error() is None]
        if msgs:
            got += [x.value().decode() for x in msgs]
            idle_until = time.monotonic() + 5
    c.close()
    return got


def test_consume_transform_produce_is_exactly_once_across_a_coordinator_kill(cluster):
    create_topics(cluster, "in", "out")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "enable.idempotence": True})
    for i in range(INPUTS):
        p.produce("in", value=str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": GROUP,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 30000})
    consumer.subscribe(["in"])
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "proc",
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(60)

    def rewind():
        for tp in consumer.committed(consumer.assignment(), 30):
            consumer.seek(TopicPartition(tp.topic, tp.partition,
                                         tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    committed, aborted = set(), set()
    progress = {}  # partition -> the offset the last committed transaction consumed up to
    victim = None
    deadline = time.monotonic() + 240
    txn = 0
    done = False
    while not done:
        assert time.monotonic() < deadline, (len(committed), len(aborted))
        msgs = [x for x in consumer.consume(10, 1.0) if x.error() is None]
        if not msgs:
            continue
        txn += 1
        producer.begin_transaction()
        for x in msgs:
            producer.produce("out", value=f"{x.value().decode()}@{txn}".encode(),
                             partition=x.partition())
        try:
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                                 60)
            if txn % 4 == 0:
                producer.abort_transaction(60)
                aborted.add(txn)
                rewind()
                continue
            while True:
                try:
                    producer.commit_transaction(60)
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(60)
            aborted.add(txn)
            rewind()
            continue
        committed.add(txn)
        for tp in positions:  # -1001: nothing fetched since the last rewind
            if tp.offset >= 0:
                progress[tp.partition] = tp.offset
        done = sum(progress.values()) == INPUTS
        if victim is None and len(committed) == 8:
            victim = wait_for("the group's coordinator", lambda: group_coordinator(cluster))
            cluster.kill(victim)
    assert victim is not None
    consumer.close()
    cluster.start(victim)

    values = read_all(cluster, "read_committed")
    inputs = sorted(int(v.split("@")[0]) for v in values)
    assert inputs == list(range(INPUTS)), "every input exactly once"
    assert not {int(v.split("@")[1]) for v in values} & aborted, "no aborted record"
    raw = read_all(cluster, "read_uncommitted")
    assert {int(v.split("@")[1]) for v in raw} & aborted, "aborted records are in the log"

    check = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": GROUP})
    try:
        offsets = check.committed([TopicPartition("in", q) for q in range(PARTITIONS)], 30)
    finally:
        check.close()
    assert sum(tp.offset for tp in offsets) == INPUTS, offsets
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs
