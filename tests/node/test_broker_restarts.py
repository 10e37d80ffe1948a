"""Brokers restarting on three real processes (127.0.0.1-3) whose un-fsynced data dies with them.

A partition leader that loses its power (and with Kafka's default flush
policy, every record it held) must not come back as leader of its old
epoch: its followers would truncate committed records to match its empty
log. And a clean restart of every node keeps the high watermarks.
"""
import signal

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from local_cluster import LocalCluster
from conftest import wait_for


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path, nodes=3, brokers=True,
                     extra_config={"chaoskraft.power.loss.enable": "true"})
    c.start_all()
    try:
        yield c
    finally:
        c.close()


def leader_of(cluster, topic):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(topic, timeout=5)
    leader = md.topics[topic].partitions[0].leader
    return leader if leader > 0 else None


def produce(cluster, prefix, n):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", retries=20,
                      request_timeout_ms=5000)
    metas = [p.send("t", value=f"{prefix}{i}".encode(), partition=0) for i in range(n)]
    p.flush()
    offsets = [m.get(30).offset for m in metas]
    p.close()
    return offsets


def read_all(cluster):
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), enable_auto_commit=False,
                      consumer_timeout_ms=4000)
    tp = TopicPartition("t", 0)
    c.assign([tp])
    c.seek_to_beginning()
    end = c.end_offsets([tp])[tp]
    values = [m.value.decode() for m in c]
    c.close()
    return end, values


def test_power_lost_leader_does_not_lead_its_old_epoch_and_clean_restarts_keep_the_hw(cluster):
    wait_for("three brokers", lambda: KafkaAdminClient(
        bootstrap_servers=cluster.bootstrap(), request_timeout_ms=3000).create_topics(
            [NewTopic("t", 1, 3, topic_configs={"min.insync.replicas": "2"})]) or True)
    assert produce(cluster, "a", 100) == list(range(100))
    victim = wait_for("a leader", lambda: leader_of(cluster, "t"))
    cluster.kill(victim)  # power loss: never fsynced, so its copy of the partition is gone
    cluster.start(victim)
    produce(cluster, "b", 100)  # waits out the old session; a new leader is elected meanwhile
    end, values = read_all(cluster)
    assert end == 200 and values == [f"a{i}" for i in range(100)] + [f"b{i}" for i in range(100)]
    assert "truncated" not in "".join(cluster.log_path(i).read_text() for i in cluster.ids
                                      if i != victim), "a survivor truncated committed records"

    for i in list(cluster.procs):  # clean stop of every node, at once
        cluster.procs[i].send_signal(signal.SIGTERM)
    for i in list(cluster.procs):
        cluster.procs.pop(i).wait(30)
    cluster.start_all()
    end, values = wait_for("the partition after a clean restart", lambda: (lambda r: r[0] == 200 and r)(
        read_all(cluster)))
    assert len(values) == 200
    for i in cluster.ids:  # a cleanly stopped broker's next incarnation registers at once
        after = cluster.log_path(i).read_text().split("shutting down")[-1]
        assert "DUPLICATE_BROKER_REGISTRATION" not in after, f"node {i}"
