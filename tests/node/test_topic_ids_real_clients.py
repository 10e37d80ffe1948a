"""librdkafka (confluent-kafka) on Kafka 4's Produce and Fetch versions, against three node
processes that advertise Metadata up to v12 (``chaoskraft.metadata.max.version``): it learns
topic ids from Metadata and fetches by id (Fetch v16), and produces with v10, whose
NOT_LEADER_OR_FOLLOWER answers name the new leader (KIP-951). A cell of the compatibility
matrix in docs/compatibility.md."""
import logging
import re
import time
import uuid

import pytest

from conftest import create_topic_everywhere, local_brokers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("ids"),
                       extra_config={"chaoskraft.metadata.max.version": "12"}) as c:
        yield c


class SentVersions(logging.Handler):
    """The request versions librdkafka's protocol debug log says it sent ("Sent FetchRequest
    (v16, ..."), by request name."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, set[int]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        for name, v in re.findall(r"Sent (\w+)Request \(v(\d+)", record.getMessage()):
            self.sent.setdefault(name, set()).add(int(v))


def client_logger(name: str) -> tuple[logging.Logger, SentVersions]:
    log = logging.getLogger(f"chaoskraft.test.{name}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    handler = SentVersions()
    log.addHandler(handler)
    return log, handler


def test_librdkafka_produces_v10_and_fetches_by_id_through_a_leader_kill(cluster):
    """An idempotent librdkafka producer writes while the partition's leader is SIGKILLed
    and started again; a consumer then reads the partition by topic id: every acknowledged
    record once, in order, and the versions on the wire are Produce v10 and Fetch v16."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    topic = f"ids-{uuid.uuid4().hex[:6]}"
    create_topic_everywhere(cluster, topic, 1, {"min.insync.replicas": "2"}, timeout_s=60)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "error_cb": lambda e: None})
    victim = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    plog, produced = client_logger(f"producer-{topic}")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True,
                  "acks": "all", "linger.ms": 5, "debug": "protocol", "logger": plog,
                  "error_cb": lambda e: None})
    acked: list[bytes] = []

    def delivered(err, msg):
        if err is None:
            acked.append(msg.value())
    sent = 0

    def write_until(n):
        nonlocal sent
        deadline = time.monotonic() + 120
        while len(acked) < n:
            assert time.monotonic() < deadline, f"{len(acked)} of {n} records acknowledged"
            p.produce(topic, value=f"v{sent}".encode(), partition=0, on_delivery=delivered)
            sent += 1
            p.poll(0.01)
    write_until(200)
    cluster.kill(victim)
    try:
        write_until(len(acked) + 200)
    finally:
        cluster.start(victim)  # also when the test fails: the module's cluster goes on
    assert p.flush(60) == 0 and len(acked) == sent, "every record sent was acknowledged"
    clog, fetched = client_logger(f"consumer-{topic}")
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{topic}",
                  "enable.auto.commit": False, "debug": "protocol", "logger": clog,
                  "error_cb": lambda e: None})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(read) < len(acked):
            assert time.monotonic() < deadline, f"{len(read)} of {len(acked)} records read"
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                read.append(msg.value())
    finally:
        c.close()
    assert read == acked, "every acknowledged record once, in the order acknowledged"
    assert max(produced.sent["Produce"]) == 10
    assert max(fetched.sent["Fetch"]) == 16, "librdkafka fetches by topic id"
