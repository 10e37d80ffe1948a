"""Kafka's topic configs and KIP-848's group configs: which values the controller takes
(``node_image.topic_configs``, ``node_image.group_configs``), and, on three real node
processes, what librdkafka's admin client and producer see of them."""
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource

from conftest import wait_for
from node_clients import admin, create, three_brokers, wire
from node_image import messages as m
from node_image import config_control as cc
from node_image import replication_control as rc
from test_replication import cluster_image, image_with


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from three_brokers(tmp_path_factory, "configs")


def test_every_kafka_topic_config_is_taken_at_a_value_kafka_takes():
    """Kafka's topic configs, the ones the node does not act on too (retention, compaction,
    segments), are checked and stored as Kafka takes them, and APPEND and SUBTRACT work on
    each list config."""
    from node_image.topic_configs import TOPIC_CONFIGS
    given = {"cleanup.policy": "delete,compact", "retention.ms": "10000",
             "retention.bytes": "1048576", "file.delete.delay.ms": "12345",
             "segment.ms": "100", "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.1",
             "leader.replication.throttled.replicas": "0:1,1:2", "compression.zstd.level": "-5",
             "compression.gzip.level": "9", "preallocate": "true", "local.retention.ms": "-2"}
    recs, [result] = rc.create_topics(cluster_image(), [("t", 1, 3, tuple(given.items()))],
                                      salt=1)
    assert result.error == m.NONE, result.message
    image = image_with(recs, cluster_image())
    assert image.topic_config("t") == given
    for name, config in TOPIC_CONFIGS.items():  # every default passes its own check
        assert config.default is None or config.check(config.default), name
    recs, [row] = cc.alter_configs(image, [(2, "t", (
        ("cleanup.policy", cc.SUBTRACT, "delete"),
        ("follower.replication.throttled.replicas", cc.APPEND, "0:3")))], True)
    assert row[2] == m.NONE, row
    assert {k: v for k, v in image_with(recs, image).topic_config("t").items()
            if k in ("cleanup.policy", "follower.replication.throttled.replicas")} == {
        "cleanup.policy": "compact", "follower.replication.throttled.replicas": "0:3"}


def test_a_groups_own_configs_are_set_bounded_and_used_for_its_members():
    """KIP-848's group configs: set for any group id (it need not exist yet), within
    Kafka's default bounds, and what the coordinator then gives the group's members in
    place of the broker's settings."""
    from types import SimpleNamespace

    from node_image.group_configs import GROUP_RESOURCE, timing
    from node_image.group_configs import bounds as group_bounds
    image = cluster_image()
    recs, [row] = cc.alter_configs(image, [(GROUP_RESOURCE, "g", (
        ("consumer.session.timeout.ms", cc.SET, "50000"),))], True)
    assert row == (GROUP_RESOURCE, "g", m.NONE, None)
    after = image_with(recs, image)
    broker = SimpleNamespace(group_consumer_session_timeout_ms=45000,
                             group_consumer_heartbeat_interval_ms=5000)
    assert timing(after, "g", broker) == (50000, 5000)
    assert timing(after, "other", broker) == (45000, 5000)
    bad = [(("consumer.session.timeout.ms", cc.SET, "30000"), "from 45000 to 60000"),
           (("consumer.heartbeat.interval.ms", cc.SET, "often"), "invalid value 'often'"),
           (("share.record.lock.duration.ms", cc.SET, "1000"), "from 15000 to 60000"),
           (("share.auto.offset.reset", cc.SET, "none"), "one of latest, earliest"),
           (("streams.session.timeout.ms", cc.SET, "45000"), "unknown group config"),
           (("consumer.session.timeout.ms", cc.APPEND, "1"), "not a list")]
    for op, words in bad:
        recs, [row] = cc.alter_configs(after, [(GROUP_RESOURCE, "g", (op,))], True)
        assert recs == [] and row[2] == m.INVALID_CONFIG and words in row[3], (op, row)
    # the broker's group.share.min/max.record.lock.duration.ms move the bounds
    lowered = SimpleNamespace(group_share_min_record_lock_duration_ms=1000,
                              group_share_max_record_lock_duration_ms=20000)
    short = (GROUP_RESOURCE, "g", (("share.record.lock.duration.ms", cc.SET, "3000"),))
    recs, [row] = cc.alter_configs(after, [short], True, group_bounds(lowered))
    assert row[2] == m.NONE and recs
    long = (GROUP_RESOURCE, "g", (("share.record.lock.duration.ms", cc.SET, "30000"),))
    _, [row] = cc.alter_configs(after, [long], True, group_bounds(lowered))
    assert row[2] == m.INVALID_CONFIG and "from 1000 to 20000" in row[3]
    recs, [row] = cc.alter_configs(after, [(GROUP_RESOURCE, "g", (
        ("consumer.session.timeout.ms", cc.DELETE, None),))], True)
    assert row[2] == m.NONE and timing(image_with(recs, after), "g", broker) == (45000, 5000)


def test_a_compacted_topic_takes_kafkas_configs_and_refuses_records_without_a_key(cluster):
    """cleanup.policy compact and the configs the node stores without acting on them are
    taken and described as set; a compacted topic refuses a record without a key
    (INVALID_RECORD, as Kafka's LogValidator) and takes one with a key."""
    from confluent_kafka import KafkaError, Producer
    create(cluster, "compacted", {"cleanup.policy": "compact", "retention.ms": "10000",
                                  "file.delete.delay.ms": "12345"})
    res = ConfigResource(ConfigResource.Type.TOPIC, "compacted")
    a = admin(cluster)
    configs = a.describe_configs([res])[res].result(60)
    assert {k: configs[k].value for k in ("cleanup.policy", "retention.ms",
                                          "file.delete.delay.ms")} == {
        "cleanup.policy": "compact", "retention.ms": "10000", "file.delete.delay.ms": "12345"}
    assert configs["segment.bytes"].value == "1073741824", "Kafka's default"
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "retries": 0})
    outcomes = {}

    def report(name):
        return lambda err, msg: outcomes.__setitem__(name, err)
    p.produce("compacted", b"v", partition=0, on_delivery=report("keyless"))
    p.flush(30)
    p.produce("compacted", b"v", key=b"k", partition=0, on_delivery=report("keyed"))
    p.flush(30)
    assert outcomes["keyless"] is not None and \
        outcomes["keyless"].code() == KafkaError.INVALID_RECORD, outcomes
    assert outcomes["keyed"] is None, outcomes
    # one batch with some records without a key: those are named INVALID_RECORD, the others
    # fail with them (librdkafka's _INVALID_DIFFERENT_RECORD), as against Kafka
    batched = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                        "retries": 0, "linger.ms": 1000})
    for i in range(10):
        batched.produce("compacted", b"v", key=None if i % 4 == 0 else b"k", partition=0,
                        on_delivery=report(f"b{i}"))
    assert batched.flush(30) == 0
    assert {i: outcomes[f"b{i}"].code() for i in range(10)} == {
        i: KafkaError.INVALID_RECORD if i % 4 == 0 else KafkaError._INVALID_DIFFERENT_RECORD
        for i in range(10)}


def test_a_groups_own_configs_are_altered_described_and_given_to_its_members(cluster):
    """KIP-848's group configs from librdkafka's admin client: set for a group that does
    not exist yet, described with source GROUP_CONFIG (the broker's otherwise), a value
    outside Kafka's bounds refused naming them, and the heartbeat interval the coordinator
    then gives a member of the group (ConsumerGroupHeartbeat on the wire)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType

    from node_image import kafka_codec as kc
    a = admin(cluster)

    def alter(**values):
        res = ConfigResource(ResourceType.GROUP, "configured", incremental_configs=[
            ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
            for k, v in values.items()])
        return a.incremental_alter_configs([res])[res].result(60)
    alter(consumer_session_timeout_ms="50000", consumer_heartbeat_interval_ms="6000")
    res = ConfigResource(ResourceType.GROUP, "configured")
    configs = a.describe_configs([res])[res].result(60)
    assert {k: (v.value, v.source) for k, v in configs.items()} == {
        "consumer.session.timeout.ms": ("50000", ConfigSource.GROUP_CONFIG.value),
        "consumer.heartbeat.interval.ms": ("6000", ConfigSource.GROUP_CONFIG.value),
        # a share group's (KIP-932), from the broker's configs or Kafka's defaults
        "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG.value),
        "share.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG.value),
        "share.record.lock.duration.ms": ("30000", ConfigSource.DEFAULT_CONFIG.value),
        "share.partition.max.record.locks": ("2000", ConfigSource.DEFAULT_CONFIG.value),
        "share.auto.offset.reset": ("latest", ConfigSource.DEFAULT_CONFIG.value),
        "share.isolation.level": ("read_uncommitted", ConfigSource.DEFAULT_CONFIG.value)}
    other = ConfigResource(ResourceType.GROUP, "not-configured")
    assert a.describe_configs([other])[other].result(60)[
        "consumer.session.timeout.ms"].value == "45000", "the broker's"
    with pytest.raises(KafkaException, match="from 45000 to 60000"):
        alter(consumer_session_timeout_ms="1000")
    create(cluster, "cfg-topic", {})
    # a FindCoordinator, which creates __consumer_offsets (not awaited: on a busy machine
    # its 150 replicas take longer than the client's wait)
    a.describe_consumer_groups(["configured"], request_timeout=120)

    def join():  # the answer of the group's coordinator (the others: NOT_COORDINATOR)
        answers = [wire(cluster, cluster.host(i), kc.CONSUMER_GROUP_HEARTBEAT, 0,
                        kc.ConsumerGroupHeartbeatRequest(
                            group_id="configured", member_id=str(uuid.uuid4()),
                            member_epoch=0, instance_id=None, rack_id=None,
                            rebalance_timeout_ms=30000, subscribed_topic_names=["cfg-topic"],
                            server_assignor=None, topic_partitions=[]))
                   for i in cluster.ids]
        return next((r for r in answers if r.error_code == 0), None)
    joined = wait_for("a member joined at the group's coordinator", join, timeout_s=180)
    assert joined.heartbeat_interval_ms == 6000, "the group's own interval"


def test_brokers_dynamic_configs_are_set_described_and_acted_on(cluster):
    """Kafka's dynamic broker configs from librdkafka's admin client (its own suite's 0081
    sets one): a broker's own value and the cluster's default, described with their
    sources on the brokers they apply to; one the node acts on (``message.max.bytes``)
    refuses a batch larger than the new value on that broker only; a setting Kafka reads
    only from server.properties, and a per-broker one set as the cluster's default, are
    refused naming them; deleting a value brings the static one back."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType
    a = admin(cluster)

    def alter(name, *entries):
        if not name:  # the cluster's default: librdkafka refuses an empty name itself
            return alter_cluster(dict(entries))
        res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                        else AlterConfigOpType.DELETE) for k, v in entries])
        return a.incremental_alter_configs([res])[res].result(30)

    def alter_cluster(configs):  # IncrementalAlterConfigs v1 on the wire, as Kafka's tools
        from node_image import kafka_codec as kc
        R = kc.IncrementalAlterConfigsRequest
        body = R(resources=[R.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[
                R.AlterConfigsResource.AlterableConfig(name=k, config_operation=0, value=v)
                for k, v in configs.items()])], validate_only=False)
        [r] = wire(cluster, cluster.host(1), kc.INCREMENTAL_ALTER_CONFIGS, 1, body).responses
        if r.error_code:
            raise KafkaException(f"{m.ERROR_NAMES.get(r.error_code)}: {r.error_message}")

    def described(broker, key):
        res = ConfigResource(ResourceType.BROKER, str(broker))
        e = a.describe_configs([res])[res].result(30)[key]
        return e.value, e.source, e.is_read_only
    alter("1", ("sasl.kerberos.min.time.before.relogin", "58000"))
    alter("", ("log.cleaner.threads", "2"), ("log.retention.ms", "3600000"))
    wait_for("each broker describing what applies to it", lambda: (
        described(1, "sasl.kerberos.min.time.before.relogin")[:2] == (
            "58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        and all(described(b, "log.cleaner.threads")[:2] == (
            "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value) for b in (1, 2, 3))))
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        alter("1", ("num.partitions", "7"))
    with pytest.raises(KafkaException, match="broker id must be specified"):
        alter("", ("sasl.kerberos.min.time.before.relogin", "1"))

    create(cluster, "dyn", {})
    topic = ConfigResource(ResourceType.TOPIC, "dyn")
    retention = a.describe_configs([topic])[topic].result(30)["retention.ms"]
    assert (retention.value, retention.source) == (
        "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value), \
        "a topic's default is the cluster's dynamic value"
    leader = a.list_topics("dyn", timeout=10).topics["dyn"].partitions[0].leader
    assert described(leader, "message.max.bytes")[2] is False, "dynamic: not read-only"
    alter(str(leader), ("message.max.bytes", "2000"))
    wait_for("the lower limit on the leader", lambda: described(
        leader, "message.max.bytes")[0] == "2000")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "retries": 0,
                  "compression.type": "none"})
    outcomes = []
    p.produce("dyn", b"x" * 5000, partition=0, on_delivery=lambda err, msg: outcomes.append(err))
    p.flush(30)
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    alter(str(leader), ("message.max.bytes", None))
    wait_for("the static limit back", lambda: described(leader, "message.max.bytes")[:2] == (
        "1048588", ConfigSource.DEFAULT_CONFIG.value))
    p.produce("dyn", b"x" * 5000, partition=0, on_delivery=lambda err, msg: outcomes.append(err))
    p.flush(30)
    assert outcomes[1] is None, outcomes
