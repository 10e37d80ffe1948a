"""Feature levels (KIP-584): UpdateFeatures' rules at the controller
(``node_image.features``), and on three node processes finalized from an older
metadata.version: kafka-python's ``describe_features`` reads each broker's ApiVersions,
``update_features`` raises the level through the controller, and what Kafka refuses is
refused with its error."""
import pytest

from node_image import features
from node_image import messages as m
from node_image import metadata_records as mr
from test_replication import cluster_image, image_with


def test_update_features_follows_kafkas_rules_all_or_nothing():
    image = image_with([mr.FeatureLevelRecord("metadata.version", 20)], cluster_image(3))

    def update(*rows):
        records, error, message = features.update_features(image, rows)
        return records, error, message or ""
    assert update(("metadata.version", 21, 1)) == (
        [mr.FeatureLevelRecord("metadata.version", 21)], m.NONE, "")
    assert update(("metadata.version", 20, 1))[:2] == ([], m.NONE), "already there: no record"
    for rows, words in [
            ((("metadata.version", 22, 1),), "only supports versions 7-21"),
            ((("metadata.version", 19, 1),), "without setting the upgrade type"),
            ((("metadata.version", 19, 2),), "downgrades are not supported"),
            ((("metadata.version", 21, 2),), "Can't downgrade to a newer version"),
            ((("metadata.version", 21, 9),), "does not support the given upgrade type"),
            ((("metadata.version", -1, 1),), "cannot be less than 0"),
            ((("no.such.feature", 1, 1),), "does not support the feature no.such.feature"),
            ((("group.version", 1, 1),), "only supports versions 0-0"),
            ((("metadata.version", 21, 1), ("kraft.version", 1, 1)), "kraft.version")]:
        records, error, message = update(*rows)
        assert (records, error) == ([], m.INVALID_UPDATE_VERSION), rows
        assert words in message, (rows, message)
    assert update(("group.version", 0, 1))[:2] == ([], m.NONE), "level 0: nothing finalized"
    assert features.finalized(image) == {"metadata.version": 20}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from conftest import local_brokers
    with local_brokers(tmp_path_factory.mktemp("features"), extra_config={
            "chaoskraft.bootstrap.metadata.version": "20"}) as c:
        yield c


def test_metadata_version_is_raised_while_the_cluster_runs(cluster):
    from kafka import KafkaAdminClient
    from kafka.errors import InvalidUpdateVersionError

    from conftest import create_topic_everywhere, wait_for

    def described(i):
        admin = KafkaAdminClient(bootstrap_servers=f"{cluster.host(i)}:{cluster.kafka_port}",
                                 request_timeout_ms=30_000)
        try:
            return admin.describe_features()
        finally:
            admin.close()
    before = wait_for("every broker's features", lambda: [described(i) for i in cluster.ids])
    for d in before:
        assert d["metadata.version"]["supported"] == (7, 21)
        assert d["metadata.version"]["finalized"] == (20, 20)
        assert d["kraft.version"] == {"supported": (0, 0)}, "nothing finalized at level 0"
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        assert kp.update_features({"metadata.version": 21}, validate_only=True) == {
            "metadata.version": "OK"}
        # a record written after the validation reaches every broker: had the validation
        # written the level, each would show it by then (a broker applies records in order)
        create_topic_everywhere(cluster, "after-validating", 1, timeout_s=60)
        assert [described(i)["metadata.version"]["finalized"] for i in cluster.ids] == [
            (20, 20)] * len(cluster.ids), "only validated"
        with pytest.raises(InvalidUpdateVersionError, match="only supports versions 7-21"):
            kp.update_features({"metadata.version": 22})
        assert wait_for("the controller's answer", lambda: kp.update_features(
            {"metadata.version": 21})) == {"metadata.version": "OK"}
        with pytest.raises(InvalidUpdateVersionError, match="downgrades are not supported"):
            kp.update_features({"metadata.version": ("SAFE_DOWNGRADE", 20)})
    finally:
        kp.close()
    wait_for("every broker at 21", lambda: all(
        described(i)["metadata.version"]["finalized"] == (21, 21) for i in cluster.ids))
    epochs = [described(i)["metadata.version"]["finalized_epoch"] for i in cluster.ids]
    assert all(e > before[0]["metadata.version"]["finalized_epoch"] for e in epochs), epochs
