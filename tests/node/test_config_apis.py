"""Kafka's topic configs and KIP-848's group configs: which values the controller takes
(``node_image.topic_configs``, ``node_image.group_configs``), and, on three real node
processes, what librdkafka's admin client and producer see of them; DescribeConfigs of
topics and brokers, topic configs altered from both admin clients, and ListConfigResources."""
import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

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
    # the answer comes once the controller committed the change; the broker asked next may
    # not have applied it yet (as with Kafka's brokers), so it is asked until it has

    def applied():
        c = a.describe_configs([res])[res].result(60)
        return c if c["consumer.session.timeout.ms"].value == "50000" else None
    configs = wait_for("the group's configs on the broker asked", applied)
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
                R.AlterConfigsResource.AlterableConfig(name=k, config_operation=0 if v else 1,
                                                       value=v)
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
    # the cluster's defaults deleted again (the module's other tests see Kafka's)
    alter("", ("log.cleaner.threads", None), ("log.retention.ms", None))
    alter("1", ("sasl.kerberos.min.time.before.relogin", None))

    def unset(broker, key):  # a key with no value of its own is not described
        res = ConfigResource(ResourceType.BROKER, str(broker))
        return key not in a.describe_configs([res])[res].result(30)
    wait_for("the defaults back on every broker", lambda: all(
        unset(b, "log.retention.ms") for b in (1, 2, 3)))


def test_describe_configs_of_a_topic_says_what_was_set_and_what_is_a_default(cluster):
    create(cluster, "described", {"min.insync.replicas": "2", "compression.type": "zstd"})
    res = ConfigResource(ConfigResource.Type.TOPIC, "described")
    a = admin(cluster)  # kept: a future's client must outlive it
    configs = a.describe_configs([res])[res].result(15)
    assert configs["min.insync.replicas"].value == "2"
    assert configs["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["compression.type"].value == "zstd"
    # not set on the topic: the broker's setting (server.properties here) or Kafka's default
    assert configs["unclean.leader.election.enable"].value == "false"
    assert configs["unclean.leader.election.enable"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["retention.ms"].value == "-1", "records are kept forever, and it says so"
    assert (configs["retention.bytes"].value, configs["retention.bytes"].source) == (
        "-1", ConfigSource.DEFAULT_CONFIG.value), "by time and by size"
    missing = ConfigResource(ConfigResource.Type.TOPIC, "no-such-topic")
    with pytest.raises(KafkaException, match="does not exist|UNKNOWN_TOPIC"):
        a.describe_configs([missing])[missing].result(15)
    # kafka-python's admin client asks the same API and reads the same answer
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        got = kp.describe_configs([KpResource(ConfigResourceType.TOPIC, "described")])
        print("kafka-python:", got)
        [(_, by_name)] = got.items()
        [(_, keys)] = by_name.items()
        assert set(keys) == {"min.insync.replicas", "compression.type"}, \
            "kafka-python lists the values set on the topic (not the defaults)"
    finally:
        kp.close()


def test_describe_configs_of_a_broker_are_its_settings_read_only_but_kafkas_dynamic_ones(
        cluster):
    res = ConfigResource(ConfigResource.Type.BROKER, "2")
    a = admin(cluster)
    configs = a.describe_configs([res])[res].result(15)
    mir = configs["min.insync.replicas"]
    assert (mir.value, mir.is_read_only) == ("1", False), "dynamic in Kafka"
    assert configs["broker.session.timeout.ms"].is_read_only
    assert configs["broker.session.timeout.ms"].value == "9000"
    assert configs["broker.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    # the address clients are given, set in server.properties, as Kafka 4 lists it
    ads = configs["advertised.listeners"]
    assert (ads.value, ads.source, ads.is_read_only) == (
        f"PLAINTEXT://{cluster.host(2)}:{cluster.kafka_port}",
        ConfigSource.STATIC_BROKER_CONFIG.value, True)
    assert configs["node.id"].value == "2"
    # settings named in seconds are described in seconds
    assert configs["leader.imbalance.check.interval.seconds"].value == "300"
    assert configs["quota.window.size.seconds"].value == "1"
    assert configs["quota.window.num"].value == "11"


def test_list_config_resources_names_what_describe_configs_answers_for(cluster):
    """kafka-python's list_config_resources (ListConfigResources v1, KIP-1142): topics,
    brokers and groups with configs of their own, filtered by type; a broker logger's are
    not kept here (UNSUPPORTED_VERSION); v0, ListClientMetricsResources, lists none."""
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient
    from kafka.errors import UnsupportedVersionError
    from kafka.protocol.admin import ListConfigResourcesRequest

    from node_image import kafka_codec as kc
    create(cluster, "listed", {})
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        kp.alter_configs([KpResource(ConfigResourceType.GROUP, "listed-group",
                                     {"consumer.session.timeout.ms": "50000"})])

        def listed():
            r = kp.list_config_resources()
            return r if "listed-group" in r.get("group", ()) else None
        every = wait_for("the group's config on the broker asked", listed)
        assert "listed" in every["topic"]
        assert every["broker"] == ["1", "2", "3"]
        # the groups this module gave configs, not those without (a group is listed once it
        # has a config of its own)
        assert "listed-group" in every["group"] and "not-configured" not in every["group"]
        assert set(every["group"]) <= {"listed-group", "configured"}, every["group"]
        assert set(every) == {"topic", "broker", "group"}
        assert kp.list_config_resources(["BROKER"]) == {"broker": ["1", "2", "3"]}
        assert set(kp.list_config_resources(["TOPIC", "GROUP"])) == {"topic", "group"}
        with pytest.raises(UnsupportedVersionError):
            kp.list_config_resources(["BROKER_LOGGER"])
    finally:
        kp.close()
    r = wire(cluster, cluster.host(2), kc.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest[0]())
    assert (r.error_code, r.config_resources) == (0, [])


def test_topic_configs_altered_by_clients_take_effect_on_every_broker(cluster):
    """IncrementalAlterConfigs (librdkafka) and AlterConfigs (kafka-python) change a topic's
    configs through the controller; every broker's DescribeConfigs then says so, and the
    value is what every broker then reads (the replace-everything semantics of the legacy
    AlterConfigs are in tests/node/test_replication.py)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient
    create(cluster, "altered", {"min.insync.replicas": "2"})
    a = admin(cluster)
    res = ConfigResource(ConfigResource.Type.TOPIC, "altered", incremental_configs=[
        ConfigEntry("flush.messages", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([res])[res].result(15)

    def on_every_broker(want):
        def check():
            for i in cluster.ids:
                one = AdminClient({"bootstrap.servers": f"{cluster.host(i)}:{cluster.kafka_port}"})
                r = ConfigResource(ConfigResource.Type.TOPIC, "altered")
                got = one.describe_configs([r])[r].result(15)
                if any(got[k].value != v for k, v in want.items()):
                    return False
            return True
        wait_for(f"{want} on every broker", check, timeout_s=30)
    on_every_broker({"flush.messages": "1", "min.insync.replicas": "1"})  # back to the default
    bad = ConfigResource(ConfigResource.Type.TOPIC, "altered", incremental_configs=[
        ConfigEntry("min.insync.replicas", "4", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="larger than the replication factor"):
        a.incremental_alter_configs([bad])[bad].result(15)
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        # the legacy AlterConfigs (kafka-python asks the incremental one when it can)
        kp.alter_configs([KpResource(ConfigResourceType.TOPIC, "altered",
                                     {"min.insync.replicas": "3"})], incremental=False)
    finally:
        kp.close()
    # AlterConfigs replaces the whole set; kafka-python sends the topic's other dynamic
    # values along (it described them first), so flush.messages stays
    on_every_broker({"min.insync.replicas": "3", "flush.messages": "1"})
