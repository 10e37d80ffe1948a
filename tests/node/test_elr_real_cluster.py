"""Kafka's eligible_leader_replicas_test on node processes: one controller and three
brokers with eligible leader replicas on and min.insync.replicas 2. Two followers shut
down cleanly one after the other, then the leader crashes; the second follower, in the
ELR, is elected when it is back, before the leader, which crashed and so left the ELR (it
stays the last known leader, elected only were the ELR empty too), and
before the first follower, which left the ISR while the ISR was at the minimum. Every
record confluent-kafka's idempotent acks=all producer was told is written is read back,
once and in order, although the crashed leader lost every record it had not flushed.
kafka-python's DescribeTopicPartitions shows each step."""
import pytest

from conftest import create_topic_everywhere, read_back, wait_for

TOPIC = "elr"


@pytest.fixture
def cluster(tmp_path):
    yield from four_nodes(tmp_path)


def four_nodes(tmp_path, **extra):
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=4, brokers=True, controllers=1, extra_config={
        "chaoskraft.bootstrap.eligible.leader.replicas.version": "1",
        "min.insync.replicas": "2", "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "3000", "auto.leader.rebalance.enable": "false",
        # unflushed records live in the process only: a killed broker loses them, as in a
        # power loss (nothing is fsynced unless a clean shutdown flushes it)
        "chaoskraft.power.loss.enable": "true", **extra})
    c.start_all()
    try:
        yield c
    finally:
        c.close()


def produce(cluster, start, count):
    from confluent_kafka import Producer
    acked, failed = [], []
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 30_000})

    def done(err, msg):
        (failed if err else acked).append(err or int(msg.value()))
    for i in range(start, start + count):
        p.produce(TOPIC, str(i).encode(), on_delivery=done)
    assert p.flush(60) == 0
    assert not failed, failed[:3]
    return acked


def partition(cluster, via):
    """(leader, ISR, ELR, last known ELR) of TOPIC-0 as broker ``via`` answers it."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=f"{cluster.host(via)}:{cluster.kafka_port}",
                             request_timeout_ms=10_000)
    try:
        [t] = admin.describe_topic_partitions([TOPIC])["topics"]
        [p] = t["partitions"]
        return (p["leader_id"], sorted(p["isr_nodes"]),  # kafka-python: None when empty
                sorted(p["eligible_leader_replicas"] or []), sorted(p["last_known_elr"] or []))
    finally:
        admin.close()


def settled(cluster, via, want):
    def now():
        return partition(cluster, via) == want
    wait_for(f"{TOPIC}-0 to be (leader, ISR, ELR, last known ELR) {want} as broker {via} "
             f"says", now, timeout_s=60)


def test_a_clean_replica_is_elected_from_the_elr_and_nothing_acknowledged_is_lost(cluster):
    create_topic_everywhere(cluster, TOPIC, 1, timeout_s=90)
    leader, isr, elr, _ = wait_for("a leader", lambda: (lambda p: p if p[0] > 0 else None)(
        partition(cluster, cluster.broker_ids[0])))
    assert isr == cluster.broker_ids and elr == []
    first, second = [b for b in cluster.broker_ids if b != leader]
    acked = produce(cluster, 0, 100)
    cluster.stop(first)  # the ISR drops to the minimum: no ELR
    settled(cluster, leader, (leader, sorted([leader, second]), [], []))
    acked += produce(cluster, 100, 100)
    cluster.stop(second)  # below the minimum: the high watermark stops, `second` is eligible
    settled(cluster, leader, (leader, [leader], [second], []))
    cluster.kill(leader)  # fenced after the session timeout: the ISR empties, and the
    cluster.start(first)  # leader then is the last known one (balanced recovery)
    settled(cluster, first, (-1, [], sorted([leader, second]), [leader]))
    cluster.start(leader)  # back from a crash: out of the ELR; not elected, the ELR is not empty
    settled(cluster, first, (-1, [], [second], [leader]))
    cluster.start(second)
    wait_for("the ELR member elected", lambda: partition(cluster, first)[0] == second)
    settled(cluster, first, (second, cluster.broker_ids, [], []))
    acked += produce(cluster, 200, 50)
    read = consume_all(cluster, len(acked))
    assert read == acked, (len(read), len(acked))


def consume_all(cluster, count):
    return read_back(cluster, TOPIC, count, "elr-check")
