"""What the real-client group tests share: a topic, writing records round-robin over a topic's
partitions, finding a group's coordinator, reading its committed offsets, and checking that
a consumer joining later starts where the group stopped."""
import time

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from conftest import wait_for
from node_image.broker.group_metadata import OFFSETS_TOPIC, partition_for


def produce(cluster, values, partitions, topic="t"):
    """Idempotent acks=all writes of ``values``, value i to partition i % ``partitions``."""
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "enable.idempotence": True, "message.timeout.ms": 60000})
    failed = []
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions,
                  on_delivery=lambda err, msg: err and failed.append(err))
        p.poll(0)
    assert p.flush(90) == 0 and not failed, failed


def coordinator(cluster, group):
    """The node leading ``group``'s partition of ``__consumer_offsets``, or None."""
    md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(OFFSETS_TOPIC,
                                                                             timeout=5)
    leader = md.topics[OFFSETS_TOPIC].partitions[partition_for(group, 50)].leader
    return leader if leader > 0 else None


def committed(cluster, group, partitions, topic="t"):
    """partition -> (committed offset, end offset), asked without joining the group."""
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id=group,
                      enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        ends = c.end_offsets(tps)
        return {tp.partition: (c.committed(tp), ends[tp]) for tp in tps}
    finally:
        c.close()


def reads_only_news(cluster, late, count, partitions):
    """``late`` (a librdkafka consumer just subscribed to the group) must start at the
    committed offsets: write ``count`` new records and return everything it reads until it
    has them, and for 3 s more (anything older would show up by then). Closes ``late``."""
    try:
        produce(cluster, [f"c{i}" for i in range(count)], partitions)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [x.value().decode() for x in late.consume(100, 0.5) if x.error() is None]
        end = time.monotonic() + 3
        while time.monotonic() < end:
            got += [x.value().decode() for x in late.consume(100, 0.5) if x.error() is None]
    finally:
        late.close()
    return got


def create_topic(cluster, partitions, topic="t"):
    """``topic`` with ``partitions`` partitions, 3 replicas, min.insync.replicas 2, once the
    three brokers are up."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})

    def create():
        try:
            admin.create_topics([NewTopic(topic, partitions, 3, config={
                "min.insync.replicas": "2"})])[topic].result(10)
        except KafkaException as exc:  # an earlier attempt that timed out may have made it
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        return True
    wait_for("three brokers", create)
