"""Partition reassignment driven by real admin clients on three node processes, while a
confluent-kafka idempotent acks=all producer writes: kafka-python's
``alter_partition_reassignments`` grows a partition from one replica to three (one of
them killed mid-move: the move waits for it, ``list_partition_reassignments`` shows it,
and it completes once the broker is back), shrinks it to two (the removed leader hands
over and deletes its copy), reorders it, and ``elect_leaders`` moves leadership to the new
preferred replica; every acknowledged record is then read once, in order."""
import threading

import pytest

from conftest import create_topic_everywhere, local_brokers, wait_for
from node_clients import wire


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("reassign"), extra_config={
            "min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"}) as c:
        yield c


def partition_state(cluster, via: int, topic: str):
    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc
    r = wire(cluster, cluster.host(via), kc.METADATA, 8, MetadataRequest[8](
        topics=[MetadataRequest[8].MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))
    [p] = r.topics[0].partitions
    return p.leader_id, list(p.replica_nodes), sorted(p.isr_nodes)


class Writer:
    """One idempotent acks=all producer writing 0, 1, 2, ... until stopped; ``acked`` holds
    the values the cluster acknowledged, ``failed`` the delivery errors."""

    def __init__(self, cluster, topic: str) -> None:
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap(),
                                  "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120_000})
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


def read_all(cluster, topic: str) -> list[int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "reassign-check",
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


def test_reassignments_and_a_preferred_election_under_a_producer_lose_nothing(cluster):
    from kafka import KafkaAdminClient, TopicPartition
    topic = "moved"
    create_topic_everywhere(cluster, topic, 1, None, replication_factor=1)
    _, [first], _ = partition_state(cluster, 1, topic)
    y, z = [b for b in cluster.ids if b != first]
    tp = TopicPartition(topic, 0)
    writer = Writer(cluster, topic)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        wait_for("records acknowledged", lambda: len(writer.acked) >= 200)
        cluster.kill(z)  # z is down: the move to it waits
        try:
            assert wait_for("the controller's answer", lambda: kp.alter_partition_reassignments(
                {tp: [y, first, z]})) == {tp: None}
            moving = wait_for("the move listed", lambda: kp.list_partition_reassignments())
            assert moving == {tp: {"replicas": [y, first, z], "adding_replicas": sorted([y, z]),
                                   "removing_replicas": []}}
            wait_for("y in the ISR", lambda: y in partition_state(cluster, first, topic)[2])
            assert kp.list_partition_reassignments([tp])[tp]["adding_replicas"] == sorted(
                [y, z]), "the move is not done until z has caught up too"
        finally:
            cluster.start(z)
        wait_for("the move completed", lambda: kp.list_partition_reassignments() == {},
                 timeout_s=90)
        assert partition_state(cluster, y, topic)[1:] == ([y, first, z], sorted(cluster.ids))
        n = len(writer.acked)
        # the leader (first) is removed: leadership goes to z, and first's copy is deleted
        assert kp.alter_partition_reassignments({tp: [z, y]}) == {tp: None}
        wait_for("first removed", lambda: partition_state(cluster, y, topic)[:2] == (z, [z, y]))
        gone = cluster.root / f"data{first}" / f"{topic}-0"
        wait_for("first's copy deleted", lambda: not gone.exists() or not any(gone.iterdir()))
        # reordered: the same replicas, y now preferred; a preferred election moves the leader
        assert kp.alter_partition_reassignments({tp: [y, z]}) == {tp: None}
        wait_for("the new order", lambda: partition_state(cluster, z, topic)[1] == [y, z])
        assert partition_state(cluster, z, topic)[0] == z, "a reorder alone moves no leader"
        r = kp.elect_leaders(0, {topic: [0]}, raise_errors=False)
        assert [(t, [(x[0], x[1]) for x in ps]) for t, ps in r.replica_election_results] == [
            (topic, [(0, 0)])]
        wait_for("y leading", lambda: partition_state(cluster, z, topic)[0] == y)
        wait_for("more records acknowledged", lambda: len(writer.acked) >= n + 200)
    finally:
        kp.close()
        writer.stop()
    assert writer.failed == [], writer.failed[:5]
    got = read_all(cluster, topic)
    assert len(got) == len(set(got)), "a record was written twice"
    assert got == sorted(got), "records out of order"
    missing = set(writer.acked) - set(got)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert len(writer.acked) >= 400
