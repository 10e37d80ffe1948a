"""Admin APIs asked by real clients' admin interfaces (librdkafka's AdminClient and
kafka-python's KafkaAdminClient) on three real node processes: DescribeConfigs of topics
and brokers, DescribeCluster, and ListGroups with its state filter, and an emptied group
keeping its protocol type."""
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from conftest import create_topic_everywhere, local_brokers, wait_for


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("admin"),
                       extra_config={"min.insync.replicas": "1"}) as c:
        yield c


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap(), "error_cb": lambda e: None})


def create(cluster, name, config):
    create_topic_everywhere(cluster, name, 2, config, timeout_s=60)


def wire(cluster, host: str, api: int, version: int, body):
    """One request on its own connection to `host`, as a client that knows `version` sends
    it, and the answer decoded."""
    import socket

    from node_image import kafka_codec as kc
    with socket.create_connection((host, cluster.kafka_port), timeout=10) as s:
        s.sendall(kc.encode_request(api, version, body))
        return kc.decode_response(api, version, kc.recv_frame(s))


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


def test_describe_configs_of_a_broker_are_its_static_settings_read_only(cluster):
    res = ConfigResource(ConfigResource.Type.BROKER, "2")
    a = admin(cluster)
    configs = a.describe_configs([res])[res].result(15)
    mir = configs["min.insync.replicas"]
    assert (mir.value, mir.is_read_only) == ("1", True)
    assert configs["broker.session.timeout.ms"].value == "9000"
    assert configs["broker.session.timeout.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_describe_cluster_lists_the_brokers_and_the_cluster_id(cluster):
    a = admin(cluster)
    desc = a.describe_cluster(request_timeout=15).result(15)
    assert desc.cluster_id == "local"
    assert sorted(n.id for n in desc.nodes) == cluster.ids
    assert {n.port for n in desc.nodes} == {cluster.kafka_port}
    assert desc.controller is not None and desc.controller.id in cluster.ids


def test_list_groups_filters_by_state_and_an_emptied_group_stays_a_consumer_group(cluster):
    create(cluster, "grouped", {})
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "listed",
                  "session.timeout.ms": 6000, "error_cb": lambda e: None})
    c.subscribe(["grouped"])
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "the consumer never got its partitions"
        c.poll(0.5)

    a = admin(cluster)

    def listed(states):
        out = a.list_consumer_groups(states=states, request_timeout=15).result(15)
        return {g.group_id: g for g in out.valid}
    stable = listed({ConsumerGroupState.STABLE})
    assert "listed" in stable and stable["listed"].state == ConsumerGroupState.STABLE
    assert "listed" not in listed({ConsumerGroupState.EMPTY})
    c.close()  # leaves the group: it empties

    def emptied():
        g = listed({ConsumerGroupState.EMPTY}).get("listed")
        return g if g is not None else None
    g = wait_for("the group listed as Empty", emptied, timeout_s=30)
    assert not g.is_simple_consumer_group, "an emptied consumer group keeps its protocol type"


def test_kafka_python_creates_a_topic_and_sees_it_exists(cluster):
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import TopicAlreadyExistsError
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        kp.create_topics([KpNewTopic("made-by-kafka-python", 2, 3,
                                     topic_configs={"min.insync.replicas": "2"})])
        with pytest.raises(TopicAlreadyExistsError):
            kp.create_topics([KpNewTopic("made-by-kafka-python", 2, 3)])
    finally:
        kp.close()
    res = ConfigResource(ConfigResource.Type.TOPIC, "made-by-kafka-python")
    a = admin(cluster)
    configs = wait_for("the topic on the broker asked",
                       lambda: a.describe_configs([res])[res].result(15))
    assert configs["min.insync.replicas"].value == "2"


def test_create_partitions_grows_a_topic_that_clients_then_write_and_read(cluster):
    from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition
    from confluent_kafka.admin import NewPartitions
    create(cluster, "grown", {})
    a = admin(cluster)
    a.create_partitions([NewPartitions("grown", 5)])["grown"].result(15)
    with pytest.raises(KafkaException, match="must be larger|INVALID_PARTITIONS"):
        a.create_partitions([NewPartitions("grown", 3)])["grown"].result(15)
    with pytest.raises(KafkaException, match="does not exist|UNKNOWN_TOPIC"):
        a.create_partitions([NewPartitions("no-such", 3)])["no-such"].result(15)

    def five():
        t = a.list_topics("grown", timeout=10).topics["grown"]
        return len(t.partitions) == 5 and all(p.leader >= 0 for p in t.partitions.values())
    wait_for("5 partitions with leaders", five)
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "error_cb": lambda e: None})
    acked = []
    for i in range(5):
        p.produce("grown", f"v{i}".encode(), partition=i,
                  on_delivery=lambda err, msg: acked.append((err, msg.partition())))
    assert p.flush(30) == 0
    assert sorted(part for err, part in acked if err is None) == [0, 1, 2, 3, 4]
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "grown-reader",
                  "error_cb": lambda e: None})
    c.assign([TopicPartition("grown", i, OFFSET_BEGINNING) for i in range(5)])
    read = set()
    deadline = time.monotonic() + 30
    while len(read) < 5 and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            read.add((msg.partition(), msg.value().decode()))
    c.close()
    assert read == {(i, f"v{i}") for i in range(5)}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_on_the_wire_in_every_version(cluster, version):
    """DescribeCluster itself (librdkafka's describe_cluster asks Metadata instead), each
    version as a client that knows it would send it, and a controller endpoint type refused."""
    from kafka.protocol.admin import DescribeClusterRequest

    from node_image import kafka_codec as kc

    def ask(**fields):
        return wire(cluster, cluster.host(1), kc.DESCRIBE_CLUSTER, version,
                    DescribeClusterRequest[version](**fields))
    fields = {"include_cluster_authorized_operations": False}
    if version >= 1:
        fields["endpoint_type"] = 1
    if version >= 2:
        fields["include_fenced_brokers"] = True
    r = wait_for("a DescribeCluster answer naming every broker",
                 lambda: (lambda r: r if len(r.brokers) == 3 else None)(ask(**fields)))
    assert (r.error_code, r.cluster_id) == (0, "local")
    assert sorted(b.broker_id for b in r.brokers) == cluster.ids
    if version >= 1:
        refused = ask(**{**fields, "endpoint_type": 2})
        assert refused.error_code == 114 and "endpoint type 2" in refused.error_message


def test_open_transactions_and_producers_are_listed_and_described(cluster):
    """kafka-python's admin client, the way a person looks for a hanging transaction:
    ListTransactions on every broker, DescribeTransactions at the coordinator,
    DescribeProducers at the partition leader."""
    from confluent_kafka import Producer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TransactionalIdNotFoundError
    create(cluster, "txn-admin", {})
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "looked-at",
                  "error_cb": lambda e: None})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-admin", b"open", partition=1)
    assert p.flush(30) == 0  # written, and the transaction still open
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        def mine(**filters):  # {broker: listings} from every broker: its coordinators' ids
            return [(b, t) for b, ts in kp.list_transactions(**filters).items() for t in ts
                    if t.transactional_id == "looked-at"]
        listed = mine()
        assert len(listed) == 1 and str(listed[0][1].state.value) == "Ongoing", listed
        coordinator, listing = listed[0]
        assert not mine(state_filters=["CompleteCommit"])
        assert mine(producer_id_filters=[listing.producer_id])
        assert not mine(producer_id_filters=[listing.producer_id + 1])
        desc = kp.describe_transactions(["looked-at"])["looked-at"]
        print("describe_transactions:", desc)
        assert str(getattr(desc.state, "value", desc.state)) == "Ongoing"
        assert desc.producer_id == listing.producer_id
        assert set(desc.topic_partitions) == {KpTopicPartition("txn-admin", 1)}
        tp = KpTopicPartition("txn-admin", 1)
        [state] = kp.describe_producers([tp])[tp].active_producers
        print("describe_producers:", state)
        assert state.producer_id == desc.producer_id and state.current_transaction_start_offset == 0
        p.commit_transaction(30)

        def completed():
            state = kp.describe_transactions(["looked-at"])["looked-at"].state
            return str(getattr(state, "value", state)) == "CompleteCommit"
        wait_for("the transaction described as committed", completed, timeout_s=30)
        [state] = kp.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset == -1, "no transaction open any more"
        with pytest.raises(TransactionalIdNotFoundError):
            kp.describe_transactions(["never-used"])
    finally:
        kp.close()


def test_a_kafka_listener_that_cannot_bind_stops_the_node_saying_so(tmp_path):
    """A broker whose Kafka port is taken must not run on unreachable (it once did, logging
    only asyncio's 'Task exception was never retrieved')."""
    import socket

    from harness.local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=1, brokers=True)
    with socket.socket() as taken:
        taken.bind((c.host(1), c.kafka_port))
        taken.listen()
        c.start(1)
        try:
            code = c.procs[1].wait(60)
        finally:
            c.close()
    assert code == 71
    assert "cannot open the Kafka listener on 127.0.0.1:" in c.log_path(1).read_text()


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


def test_delete_topics_removes_the_data_everywhere_and_a_new_topic_of_the_name_is_empty(cluster):
    """DeleteTopics (librdkafka by name, kafka-python too): the topic is gone from every
    broker's metadata and disk, and one created again under the name is a new, empty topic
    with no committed offsets of the old one (Kafka removes a deleted topic's offsets)."""
    from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import UnknownTopicOrPartitionError
    create(cluster, "doomed", {})
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                  "error_cb": lambda e: None})
    for i in range(10):
        p.produce("doomed", f"old-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    dirs = [cluster.root / f"data{i}" / f"doomed-{k}" for i in cluster.ids for k in (0, 1)]
    assert all(any(d.glob("*.log")) for d in dirs), "every replica has the records on disk"
    parts = [TopicPartition("doomed", k) for k in (0, 1)]
    reader = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "doomed-reader",
                       "enable.auto.commit": False, "error_cb": lambda e: None})
    reader.commit(offsets=[TopicPartition("doomed", 0, 4), TopicPartition("doomed", 1, 3)],
                  asynchronous=False)
    assert [tp.offset for tp in reader.committed(parts, timeout=10)] == [4, 3]
    reader.close()
    a = admin(cluster)
    a.delete_topics(["doomed"], operation_timeout=15)["doomed"].result(15)
    with pytest.raises(KafkaException, match="does not exist|UNKNOWN_TOPIC"):
        a.delete_topics(["doomed"], operation_timeout=15)["doomed"].result(15)

    def gone_everywhere():
        for i in cluster.ids:
            one = AdminClient({"bootstrap.servers": f"{cluster.host(i)}:{cluster.kafka_port}"})
            if "doomed" in one.list_topics(timeout=10).topics:
                return False
        return all(not any(d.iterdir()) for d in dirs if d.exists())
    wait_for("the topic gone from every broker and disk", gone_everywhere, timeout_s=30)
    create(cluster, "doomed", {})
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "doomed-reader",
                  "enable.partition.eof": True, "error_cb": lambda e: None})
    c.assign([TopicPartition("doomed", k, OFFSET_BEGINNING) for k in (0, 1)])
    eof, read = set(), []
    deadline = time.monotonic() + 30
    while len(eof) < 2 and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            eof.add(msg.partition())
        else:
            read.append(msg.value())
    committed = [tp.offset for tp in c.committed(parts, timeout=10)]
    c.close()
    assert eof == {0, 1} and read == [], "the new topic holds nothing of the old one"
    assert all(o < 0 for o in committed), f"the group's offsets went with the topic: {committed}"
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        kp.delete_topics(["doomed"])
        with pytest.raises(UnknownTopicOrPartitionError):
            kp.delete_topics(["doomed"])
    finally:
        kp.close()


def test_describe_quorum_names_the_leader_and_each_voters_progress(cluster):
    """DescribeQuorum through kafka-python's describe_metadata_quorum: a broker asks the
    quorum leader, which knows every voter's log end and last fetch."""
    from kafka.admin import KafkaAdminClient
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        def described():
            q = kp.describe_metadata_quorum()
            print("describe_metadata_quorum:", q)
            [topic] = q["topics"]
            [part] = topic["partitions"]
            voters = part["current_voters"]
            return (q, part) if part["error"] is None and len(voters) == 3 and all(
                v["log_end_offset"] >= 0 and v["last_fetch_timestamp"] > 0 for v in voters) \
                else None
        q, part = wait_for("a quorum whose three voters all fetched", described, timeout_s=30)
    finally:
        kp.close()
    assert q["topics"][0]["topic_name"] == "__cluster_metadata"
    assert part["leader_id"] in cluster.ids and part["leader_epoch"] >= 1
    assert sorted(v["replica_id"] for v in part["current_voters"]) == cluster.ids
    assert part["high_watermark"] > 0
    assert sorted(n["node_id"] for n in q.get("nodes", [])) == cluster.ids


def _earliest(cluster, tp, broker=None):
    from confluent_kafka.admin import OffsetSpec
    a = AdminClient({"bootstrap.servers": broker or cluster.bootstrap(), "error_cb": lambda e: None})
    return a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(15).offset


def test_delete_records_moves_every_replicas_start_and_reads_below_it_are_out_of_range(cluster):
    """DeleteRecords (librdkafka's and kafka-python's admin clients): the log start moves to
    the offset asked for (-1: the high watermark), the answer's low watermark is every live
    replica's start (so a new leader starts there too), a read below it is out of range,
    and an offset past the high watermark is refused OFFSET_OUT_OF_RANGE."""
    from confluent_kafka import Producer, TopicPartition
    create(cluster, "trimmed", {})
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "error_cb": lambda e: None})
    for i in range(50):
        p.produce("trimmed", value=f"v{i}".encode(), partition=0)
        p.produce("trimmed", value=f"w{i}".encode(), partition=1)
    assert p.flush(30) == 0
    a = admin(cluster)
    tp0 = TopicPartition("trimmed", 0, 20)
    assert a.delete_records([tp0])[tp0].result(30).low_watermark == 20
    assert _earliest(cluster, TopicPartition("trimmed", 0)) == 20

    # a consumer at an offset below the start is told it is out of range: reset to the
    # earliest, it reads from the start on
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "below-start",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "error_cb": lambda e: None})
    try:
        c.assign([TopicPartition("trimmed", 0, 5)])
        msg = wait_for("a record", lambda: (lambda m: m if m is not None and not m.error()
                                            else None)(c.poll(1)))
        assert (msg.offset(), msg.value()) == (20, b"v20")
    finally:
        c.close()

    past = TopicPartition("trimmed", 0, 51)
    with pytest.raises(KafkaException, match="OFFSET_OUT_OF_RANGE|out of range"):
        a.delete_records([past])[past].result(30)
    internal = TopicPartition("__consumer_offsets", 0, 1)
    with pytest.raises(KafkaException, match="INVALID_TOPIC|[Ii]nvalid topic"):
        a.delete_records([internal])[internal].result(30)
    hw = TopicPartition("trimmed", 0, -1)
    assert a.delete_records([hw])[hw].result(30).low_watermark == 50

    # kafka-python's admin client asks the same API
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition as KpPartition
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap())
    try:
        got = kp.delete_records({KpPartition("trimmed", 1): 10})
        print("kafka-python:", got)
        assert got[KpPartition("trimmed", 1)]["low_watermark"] == 10
    finally:
        kp.close()

    # every replica moved its start: whichever node answers for the partition next, after
    # its leader is killed, starts at the high watermark deleted up to
    meta = a.list_topics("trimmed", timeout=10).topics["trimmed"].partitions[0]
    victim = meta.leader
    cluster.kill(victim)
    try:
        def moved():
            leader = a.list_topics("trimmed", timeout=10).topics["trimmed"].partitions[0].leader
            return leader not in (victim, -1) and leader
        wait_for("a new leader of trimmed-0", moved)
        assert wait_for("the new leader's earliest offset",
                        lambda: _earliest(cluster, TopicPartition("trimmed", 0))) == 50
    finally:
        cluster.start(victim)


def test_offset_for_leader_epoch_says_where_each_epoch_ends_across_a_leader_change(cluster):
    """OffsetForLeaderEpoch as a consumer asks it after a leader change (KIP-320), in each
    version Kafka 4 answers: the leader's latest epoch ends at its log end, an older one
    where the next epoch starts, one never held is -1/-1; a stale or future current leader
    epoch is fenced or unknown, and a broker that does not lead says so."""
    from confluent_kafka import Producer
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest
    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc

    def call(node, api, version, body):
        return wire(cluster, cluster.host(node), api, version, body)

    def leader_and_epoch():
        T = MetadataRequest[8].MetadataRequestTopic
        for node in cluster.ids:
            try:
                md = call(node, kc.METADATA, 8, MetadataRequest[8](
                    topics=[T(name="epochs")], allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False))
            except OSError:
                continue
            p = next(p for p in md.topics[0].partitions if p.partition_index == 0)
            return p.leader_id, p.leader_epoch
        return None

    def ask(node, version, epoch, current):
        R = OffsetForLeaderEpochRequest[version]
        T = R.OffsetForLeaderTopic
        fields = {"replica_id": -1} if version >= 3 else {}
        r = call(node, kc.OFFSET_FOR_LEADER_EPOCH, version, R(**fields, topics=[T(
            topic="epochs", partitions=[T.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=epoch)])]))
        p = r.topics[0].partitions[0]
        assert (r.topics[0].topic, p.partition) == ("epochs", 0)
        return p.error_code, p.leader_epoch, p.end_offset

    def produce(n, first):
        p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                      "error_cb": lambda e: None})
        for i in range(first, first + n):
            p.produce("epochs", value=f"v{i}".encode(), partition=0)
        assert p.flush(30) == 0

    create(cluster, "epochs", {})
    produce(10, 0)
    leader, e0 = wait_for("partition 0's leader", leader_and_epoch)
    for v in (2, 3, 4):
        assert ask(leader, v, e0, e0) == (0, e0, 10), v
        assert ask(leader, v, e0, -1) == (0, e0, 10), v  # no current epoch: not checked
        assert ask(leader, v, e0 + 5, e0) == (0, -1, -1), v
        assert ask(leader, v, e0, e0 + 1)[0] == 75, v  # UNKNOWN_LEADER_EPOCH
        other = next(n for n in cluster.ids if n != leader)
        assert ask(other, v, e0, e0)[0] == 6, v  # NOT_LEADER_OR_FOLLOWER
    cluster.kill(leader)
    try:
        def moved():
            found = leader_and_epoch()
            return found if found and found[0] not in (leader, -1) and found[1] > e0 else None
        new, e1 = wait_for("a new leader of epochs-0", moved)
        produce(5, 10)
        for v in (2, 3, 4):
            assert ask(new, v, e1, e1) == (0, e1, 15), v
            assert ask(new, v, e0, e1) == (0, e0, 10), v  # e0 ends where e1 began
            assert ask(new, v, e1, e0)[0] == 74, v  # FENCED_LEADER_EPOCH
    finally:
        cluster.start(leader)


# (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup,
# DescribeGroups): the first flexible versions, the batched ones, and Kafka 4's newest
GROUP_VERSIONS = {"first-flexible": (3, 6, 4, 4, 8, 6, 4, 5),
                  "batched": (4, 7, 5, 4, 8, 8, 5, 5),
                  "newest": (5, 9, 5, 4, 9, 9, 5, 5)}


@pytest.mark.parametrize("versions", sorted(GROUP_VERSIONS))
def test_a_classic_group_on_the_wire_in_the_flexible_versions(cluster, versions):
    """The classic group protocol as a client that knows these versions sends it: a batch of
    keys to FindCoordinator (v4+), JoinGroup with MEMBER_ID_REQUIRED and the group's protocol
    type in the answer (v7+), SyncGroup checking the protocol named (v5+), a commit, a batch
    of groups to OffsetFetch (v8+), DescribeGroups, LeaveGroup with a reason (v5+)."""
    from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                         OffsetCommitRequest, OffsetFetchRequest,
                                         SyncGroupRequest)
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from node_image import kafka_codec as kc
    vf, vj, vs, vh, vc, vo, vl, vd = GROUP_VERSIONS[versions]
    group, topic = f"wired-{versions}", f"wired-{versions}"
    create(cluster, topic, {})

    def ask(host, api, version, body):
        return wire(cluster, host, api, version, body)

    def find():
        if vf >= 4:
            r = ask(cluster.host(1), kc.FIND_COORDINATOR, vf, FindCoordinatorRequest[vf](
                key_type=0, coordinator_keys=[group, "", "other"]))
            mine, empty, other = r.coordinators
            assert (mine.key, empty.key, empty.error_code) == (group, "", 42)
            assert other.key == "other"
        else:
            mine = ask(cluster.host(1), kc.FIND_COORDINATOR, vf,
                       FindCoordinatorRequest[vf](key=group, key_type=0))
        return mine.host if mine.error_code == 0 else None
    host = wait_for("the group's coordinator", find)

    def join(member_id):
        return ask(host, kc.JOIN_GROUP, vj, JoinGroupRequest[vj](
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id=member_id, protocol_type="consumer", reason="wire test",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                 metadata=b"sub")]))
    first = join("")
    assert first.error_code == 79 and first.member_id, "MEMBER_ID_REQUIRED, with the id"
    me = first.member_id
    joined = join(me)
    assert (joined.error_code, joined.leader, joined.protocol_name) == (0, me, "range")
    assert [(x.member_id, x.metadata) for x in joined.members] == [(me, b"sub")]
    if vj >= 7:
        assert joined.protocol_type == "consumer"
    if vj >= 9:
        assert joined.skip_assignment is False
    gen = joined.generation_id

    def sync(**named):
        return ask(host, kc.SYNC_GROUP, vs, SyncGroupRequest[vs](
            group_id=group, generation_id=gen, member_id=me, **named,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=me,
                                                                     assignment=b"all")]))
    if vs >= 5:
        assert sync(protocol_type="consumer", protocol_name="sticky").error_code == 23
        synced = sync(protocol_type="consumer", protocol_name="range")
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    else:
        synced = sync()
    assert (synced.error_code, synced.assignment) == (0, b"all")
    assert ask(host, kc.HEARTBEAT, vh, HeartbeatRequest[vh](
        group_id=group, generation_id=gen, member_id=me)).error_code == 0
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    committed = ask(host, kc.OFFSET_COMMIT, vc, OffsetCommitRequest[vc](
        group_id=group, generation_id_or_member_epoch=gen, member_id=me, topics=[C(
            name=topic, partitions=[C.OffsetCommitRequestPartition(
                partition_index=1, committed_offset=17, committed_leader_epoch=-1,
                committed_metadata="m")])]))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
    if vo >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        fetched = ask(host, kc.OFFSET_FETCH, vo, OffsetFetchRequest[vo](
            groups=[G(group_id=group, topics=[G.OffsetFetchRequestTopics(
                name=topic, partition_indexes=[0, 1])]), G(group_id="nobody", topics=None)],
            require_stable=True))
        mine, nobody = fetched.groups
        assert (mine.group_id, mine.error_code, nobody.topics) == (group, 0, [])
        parts = mine.topics[0].partitions
    else:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        fetched = ask(host, kc.OFFSET_FETCH, vo, OffsetFetchRequest[vo](
            group_id=group, require_stable=True,
            topics=[T(name=topic, partition_indexes=[0, 1])]))
        parts = fetched.topics[0].partitions
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
            for p in parts] == [(0, -1, "", 0), (1, 17, "m", 0)]
    [described] = ask(host, kc.DESCRIBE_GROUPS, vd, DescribeGroupsRequest[vd](
        groups=[group])).groups
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable", "consumer", "range")
    left = ask(host, kc.LEAVE_GROUP, vl, LeaveGroupRequest[vl](group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=me, reason="done")]))
    assert [(x.member_id, x.error_code) for x in left.members] == [(me, 0)]
    [after] = ask(host, kc.DESCRIBE_GROUPS, vd, DescribeGroupsRequest[vd](groups=[group])).groups
    assert (after.group_state, after.protocol_type) == ("Empty", "consumer")


@pytest.mark.parametrize("version", [5, 6, 9])
def test_list_offsets_finds_records_by_their_own_timestamps(cluster, version):
    """ListOffsets by timestamp as Kafka's: the first record (not batch) stamped at or after
    the time asked; -3, the record with the greatest timestamp (KIP-734, asked from v7, read
    alike in every version as Kafka's); -4 the log start and -5 nothing tiered (v8, v9);
    v6+ flexible."""
    from kafka.protocol.consumer import ListOffsetsRequest
    from kafka.protocol.producer import ProduceRequest

    from node_image import kafka_codec as kc
    from node_image import records
    topic = f"stamped-{version}"
    create(cluster, topic, {})
    md = admin(cluster).list_topics(topic, timeout=10)
    leader = md.topics[topic].partitions[0].leader

    def ask(api, v, body):
        return wire(cluster, cluster.host(leader), api, v, body)
    # offsets 0-2 stamped 1000, 5000, 3000 in one batch; 3-4 both 2000 in another
    for batch in (records.build_batch(0, 0, [(None, b"a"), (None, b"b"), (None, b"c")], 1000,
                                      timestamp_deltas=[0, 4000, 2000]),
                  records.build_batch(0, 0, [(None, b"d"), (None, b"e")], 2000)):
        D = ProduceRequest.TopicProduceData
        r = ask(kc.PRODUCE, 8, ProduceRequest[8](
            transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[D(
                name=topic, partition_data=[D.PartitionProduceData(index=0, records=batch)])]))
        assert r.responses[0].partition_responses[0].error_code == 0

    def at(timestamp):
        T = ListOffsetsRequest.ListOffsetsTopic
        r = ask(kc.LIST_OFFSETS, version, ListOffsetsRequest[version](
            replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
                T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                       timestamp=timestamp)])]))
        [p] = r.topics[0].partitions
        assert p.error_code == 0
        return p.timestamp, p.offset
    assert at(1000) == (1000, 0)
    assert at(2000) == (5000, 1), "the first record at or after, inside its batch"
    assert at(4000) == (5000, 1)
    assert at(5001) == (-1, -1)
    assert at(-3) == (5000, 1), "the greatest timestamp, not the batch's last record"
    assert at(-1) == (-1, 5) and at(-2) == (-1, 0)
    assert at(-4) == (-1, 0) and at(-5) == (-1, -1)


@pytest.mark.parametrize("version", [4, 5, 7])
def test_create_topics_answers_what_it_made_and_its_id_deletes_it(cluster, version):
    """CreateTopics as Kafka 4 answers it: from v5 the partitions and replication factor
    (defaults applied) and every config with its source; from v7 the topic's id, which
    DeleteTopics v6 then deletes by. A topic that exists is refused with none of these."""
    from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest

    from node_image import kafka_codec as kc
    name = f"made-v{version}"

    def ask(api, v, body):
        return wire(cluster, cluster.host(2), api, v, body)
    T = CreateTopicsRequest.CreatableTopic

    def create_once():
        return ask(kc.CREATE_TOPICS, version, CreateTopicsRequest[version](
            timeout_ms=30_000, validate_only=False, topics=[T(
                name=name, num_partitions=-1, replication_factor=3, assignments=[],
                configs=[T.CreatableTopicConfig(name="min.insync.replicas", value="2")])]))
    # until the broker listens and knows its controller (NOT_CONTROLLER changes nothing)
    [made] = wait_for("an answer from the controller", lambda: (
        lambda r: r.topics if r.topics[0].error_code != 41 else None)(create_once()))
    assert (made.name, made.error_code) == (name, 0)
    [again] = create_once().topics
    assert again.error_code == 36, "TOPIC_ALREADY_EXISTS"
    if version < 5:
        return
    assert (made.num_partitions, made.replication_factor) == (1, 3), "the default partitions"
    configs = {c.name: (c.value, c.config_source) for c in made.configs}
    assert configs["min.insync.replicas"] == ("2", 1), "set on the topic: DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"] == ("delete", 5), "not set: DEFAULT_CONFIG"
    assert (again.num_partitions, again.replication_factor, again.configs) == (-1, -1, None)
    if version < 7:
        return
    assert made.topic_id is not None and made.topic_id.int != 0
    assert again.topic_id is None or again.topic_id.int == 0
    D = DeleteTopicsRequest.DeleteTopicState
    deleted = ask(kc.DELETE_TOPICS, 6, DeleteTopicsRequest[6](
        topics=[D(name=None, topic_id=made.topic_id)], timeout_ms=10_000))
    [r] = deleted.responses
    assert (r.error_code, r.name) == (0, name), "deleted by the id CreateTopics gave"
@pytest.mark.parametrize("version", [9, 10, 12])
def test_metadata_flexible_versions_name_topics_by_id(cluster, version):
    """Metadata v9-v13 (flexible; librdkafka trusts leader epochs only from v9): each topic
    with its id from v10, asked by id from v10 (no name), an unknown id UNKNOWN_TOPIC_ID."""
    import uuid

    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc
    create(cluster, "by-id", {})
    R = MetadataRequest[version]

    def ask(topics):
        fields = {} if version >= 11 else {"include_cluster_authorized_operations": False}
        return wire(cluster, cluster.host(1), kc.METADATA, version, R(
            topics=topics, allow_auto_topic_creation=False,
            include_topic_authorized_operations=False, **fields))
    zero = uuid.UUID(int=0)
    [t] = ask([R.MetadataRequestTopic(name="by-id", topic_id=zero)]).topics
    assert (t.error_code, t.name, len(t.partitions)) == (0, "by-id", 2)
    assert all(p.leader_epoch >= 0 for p in t.partitions)
    if version < 10:
        return
    assert t.topic_id not in (None, zero)
    [again] = ask([R.MetadataRequestTopic(name=None, topic_id=t.topic_id)]).topics
    assert (again.error_code, again.name, again.topic_id) == (0, "by-id", t.topic_id)
    stranger = uuid.uuid4()
    [unknown] = ask([R.MetadataRequestTopic(name=None, topic_id=stranger)]).topics
    assert (unknown.error_code, unknown.name, unknown.topic_id) == (100, None, stranger)


def test_metadata_is_advertised_up_to_v8_unless_the_node_says_more(cluster):
    """The node answers Metadata v0-v12 but advertises v8 by default: librdkafka validates
    leader epochs from v9 and can deadlock doing it (docs/compatibility.md)."""
    from kafka.protocol.metadata import ApiVersionsRequest

    from node_image import kafka_codec as kc

    def advertised():
        r = wire(cluster, cluster.host(1), kc.API_VERSIONS, 3, ApiVersionsRequest[3](
            client_software_name="t", client_software_version="1"))
        return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert wait_for("an ApiVersions answer", advertised)[kc.METADATA] == (0, 8)
    body = kc.api_versions_body(3, caps={kc.METADATA: 12})
    assert {k.api_key: k.max_version for k in body.api_keys}[kc.METADATA] == 12
