"""Partition reassignment driven by real admin clients on three node processes, while a
confluent-kafka idempotent acks=all producer writes (``reassign_scenario``; the same on
the Docker cluster: tests/docker/test_kafka_docker.py)."""
import pytest

from conftest import local_brokers
from reassign_scenario import Brokers, move_partition_under_a_producer


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("reassign"), extra_config={
            "min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"}) as c:
        yield c


# CI runs the same scenario on the Docker cluster (test_kafka_docker); here nightly
@pytest.mark.nightly
def test_reassignments_and_a_preferred_election_under_a_producer_lose_nothing(cluster):
    def holds_copy(broker, directory):
        d = cluster.root / f"data{broker}" / directory
        return d.exists() and any(d.iterdir())
    move_partition_under_a_producer(Brokers(
        {i: f"{cluster.host(i)}:{cluster.kafka_port}" for i in cluster.ids},
        cluster.kill, cluster.start, holds_copy), "moved")
