"""Decommissioning a broker (UnregisterBroker) on four node processes (combined roles), while
a confluent-kafka idempotent acks=all producer writes: the broker is killed, unregistered
(it leaves the ISR and the cluster's metadata at once, without waiting for its session to
time out), its replica moved away with kafka-python's ``alter_partition_reassignments``,
and every acknowledged record is read back once, in order. Unregistering it again, or a
broker never seen, is BROKER_ID_NOT_REGISTERED; the node started again registers as a new
broker."""
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition

from conftest import wait_for
from harness import quorum_admin
from reassign_scenario import Brokers, Writer, read_all, state

TOPIC = "decommissioned"


@pytest.fixture
def cluster(tmp_path):
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=4, brokers=True,
                     extra_config={"auto.leader.rebalance.enable": "false"})
    c.start_all()
    try:
        yield c
    finally:
        c.close()


def test_the_record_removes_exactly_the_registration_it_names():
    from node_image import metadata_records as mr
    from node_image.metadata_image import MetadataDelta, MetadataImage
    delta = MetadataDelta(MetadataImage())
    delta.replay(mr.RegisterBrokerRecord(4, "inc", 17, (("PLAINTEXT", "h", 9092),), None,
                                         False, False))
    img = delta.apply(1)
    stale = MetadataDelta(img)
    with pytest.raises(AssertionError, match="does not match registration"):
        stale.replay(mr.UnregisterBrokerRecord(4, 16))  # an older registration of broker 4
    gone = MetadataDelta(img)
    record = mr.UnregisterBrokerRecord(4, 17)
    assert mr.decode(mr.encode(record)) == record
    gone.replay(record)
    assert 4 not in gone.apply(2).brokers and gone.changed_brokers == {4}


def described_brokers(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": lambda e: None})
    return sorted(n.id for n in admin.describe_cluster().result(30).nodes)


def test_an_unregistered_broker_leaves_the_isr_and_the_cluster_and_nothing_is_lost(cluster):
    brokers = Brokers({i: f"{cluster.host(i)}:{cluster.kafka_port}" for i in cluster.ids},
                      cluster.kill, cluster.start, lambda b, d: False)
    rest = Brokers({i: a for i, a in brokers.addresses.items() if i != 4}, cluster.kill,
                   cluster.start, lambda b, d: False)
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap, "error_cb": lambda e: None})

    def made():
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 4, config={"min.insync.replicas": "2"})])[
                TOPIC].result(30)
        except Exception as exc:  # an earlier attempt that timed out may have made it
            if "already exists" not in str(exc):
                raise
        return all(len(state(brokers, i, TOPIC)[2]) == 4 for i in brokers.addresses)
    wait_for("the topic on four brokers, all in sync", made, timeout_s=90)
    writer = Writer(brokers.bootstrap, TOPIC)
    kp = None
    try:
        wait_for("records acknowledged", lambda: len(writer.acked) >= 200)
        cluster.kill(4)
        quorum_admin.retrying(quorum_admin.unregister_broker, rest.bootstrap, 4, done=(102,))
        for i in rest.addresses:  # every broker's metadata: gone from the ISR and the cluster
            wait_for(f"broker {i} without broker 4", lambda i=i: (
                lambda s: 4 not in s[2] and s[0] != 4)(state(rest, i, TOPIC)), timeout_s=30)
        assert described_brokers(rest.bootstrap) == [1, 2, 3]
        for gone in (4, 9):
            with pytest.raises(quorum_admin.QuorumChangeError) as e:
                quorum_admin.unregister_broker(rest.bootstrap, gone)
            assert e.value.code == 102 and f"Broker ID {gone} is not currently registered" \
                in str(e.value)
        n = len(writer.acked)
        # (a client made now has metadata without broker 4, which it would otherwise try)
        kp = KafkaAdminClient(bootstrap_servers=rest.bootstrap, request_timeout_ms=30_000)
        tp = TopicPartition(TOPIC, 0)
        _, replicas, _ = state(rest, 1, TOPIC)
        target = [b for b in replicas if b != 4]
        assert kp.alter_partition_reassignments({tp: target}) == {tp: None}
        wait_for("the replica moved off broker 4", lambda: state(rest, 1, TOPIC)[1] == target
                 and kp.list_partition_reassignments() == {}, timeout_s=60)
        wait_for("more records acknowledged", lambda: len(writer.acked) >= n + 200)
    finally:
        if kp is not None:
            kp.close()
        writer.stop()
    assert writer.failed == [], writer.failed[:5]
    got = read_all(rest.bootstrap, TOPIC)
    assert len(got) == len(set(got)) and got == sorted(got), "a record twice or out of order"
    assert not set(writer.acked) - set(got), "an acknowledged record lost"
    cluster.start(4)  # the same node again: a new broker, with no replica of the topic
    wait_for("broker 4 registered again", lambda: described_brokers(rest.bootstrap) == [
        1, 2, 3, 4], timeout_s=60)
    assert 4 not in state(brokers, 4, TOPIC)[1]
    logs = "".join(cluster.log_path(i).read_text() for i in cluster.ids)
    assert "Traceback" not in logs and "unregistering broker 4" in logs
