"""Admin APIs asked by real clients' admin interfaces (librdkafka's AdminClient and
kafka-python's KafkaAdminClient) on three real node processes: DescribeCluster, ListGroups
with its state filter, an emptied group keeping its protocol type, and DeleteGroups and
OffsetDelete (on the wire and from both clients). The config APIs have their own module
(test_config_apis)."""
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource

from conftest import wait_for
from node_clients import admin, create, three_brokers, wire


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from three_brokers(tmp_path_factory, "admin")


def test_describe_cluster_lists_the_brokers_and_the_cluster_id(cluster):
    a = admin(cluster)
    # on a cluster just started (this test may be the first its worker runs on it) a broker
    # is listed once it has registered and been unfenced
    desc = wait_for("a DescribeCluster answer naming every broker", lambda: (
        lambda d: d if len(d.nodes) == len(cluster.ids) else None)(
            a.describe_cluster(request_timeout=15).result(15)))
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


def test_create_topics_takes_manual_replica_assignments_and_refuses_what_kafka_refuses(cluster):
    """librdkafka's NewTopic with a replica assignment (its own suite's 0081 creates topics
    so): each partition on the brokers named, the first leading; Kafka's refusals each
    name what is wrong."""
    from confluent_kafka.admin import NewTopic
    a = admin(cluster)
    placed = [[3, 1], [1, 2], [2, 3]]
    a.create_topics([NewTopic("placed", len(placed), replica_assignment=placed)])[
        "placed"].result(15)

    def as_placed():
        t = a.list_topics("placed", timeout=10).topics["placed"]
        return {p: (md.replicas, md.leader) for p, md in t.partitions.items()}
    wait_for("the partitions where they were placed", lambda: as_placed() == {
        i: (r, r[0]) for i, r in enumerate(placed)})
    for name, assignment, error in (
            ("twice", [[1, 1]], "includes the broker 1 more than once"),
            ("nowhere", [[1, 9]], "includes broker 9, but no such broker is registered"),
            ("uneven", [[1, 2], [3]], "not consistent with previous partitions")):
        with pytest.raises(KafkaException, match=error) as info:
            a.create_topics([NewTopic(name, len(assignment), replica_assignment=assignment)])[
                name].result(15)
        assert info.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    assert "twice" not in a.list_topics(timeout=10).topics


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

    from local_cluster import LocalCluster
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

    def internal_led():  # made when the consumer above found its group's coordinator
        t = a.list_topics("__consumer_offsets", timeout=10).topics.get("__consumer_offsets")
        return t is not None and t.error is None and 0 in t.partitions \
            and t.partitions[0].leader >= 0
    # librdkafka sends DeleteRecords only to a leader it knows: under load the internal
    # topic's first leader came after the request ("No leaders found", not the refusal)
    wait_for("a leader of __consumer_offsets partition 0", internal_led, timeout_s=30)
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


def test_offset_delete_and_delete_groups_on_the_wire_and_from_admin_clients(cluster):
    """OffsetDelete and DeleteGroups (v0 and v2) as Kafka answers them, then the admin calls
    of confluent-kafka and kafka-python that send them; a deleted group stays deleted on the
    coordinator that takes over when its coordinator is killed."""
    import struct

    from kafka import KafkaAdminClient
    from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
    from kafka.protocol.consumer import (JoinGroupRequest, LeaveGroupRequest,
                                         OffsetCommitRequest, OffsetDeleteRequest,
                                         OffsetFetchRequest, SyncGroupRequest)
    from kafka.protocol.metadata import FindCoordinatorRequest

    from node_image import kafka_codec as kc
    create(cluster, "kept", {})
    create(cluster, "dropped", {})
    group = "deletable"

    def coordinator(key, via=1):
        r = wire(cluster, cluster.host(via), kc.FIND_COORDINATOR, 3,
                 FindCoordinatorRequest[3](key=key, key_type=0))
        return (r.node_id, r.host) if r.error_code == 0 else None
    node, host = wait_for("the group's coordinator", lambda: coordinator(group))

    def ask(api, version, body):
        return wire(cluster, host, api, version, body)
    # one member subscribed to "kept" (a ConsumerProtocolSubscription v0)
    meta = struct.pack(">hih4si", 0, 1, 4, b"kept", -1)
    J = JoinGroupRequest[5]

    def join(member_id):
        return ask(kc.JOIN_GROUP, 5, J(
            group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name="range", metadata=meta)]))
    me = join("").member_id
    joined = join(me)
    gen = joined.generation_id
    synced = ask(kc.SYNC_GROUP, 3, SyncGroupRequest[3](
        group_id=group, generation_id=gen, member_id=me, group_instance_id=None,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=me,
                                                                 assignment=b"")]))
    assert synced.error_code == 0
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    committed = ask(kc.OFFSET_COMMIT, 8, OffsetCommitRequest[8](
        group_id=group, generation_id_or_member_epoch=gen, member_id=me,
        group_instance_id=None, topics=[C(name=t, partitions=[C.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=7, committed_leader_epoch=-1,
            committed_metadata="") for p in (0, 1)]) for t in ("kept", "dropped")]))
    assert {p.error_code for t in committed.topics for p in t.partitions} == {0}

    def committed_offsets():
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        r = ask(kc.OFFSET_FETCH, 6, OffsetFetchRequest[6](group_id=group, topics=[
            T(name=t, partition_indexes=[0, 1]) for t in ("kept", "dropped")]))
        return {(t.name, p.partition_index): p.committed_offset
                for t in r.topics for p in t.partitions}
    D = OffsetDeleteRequest.OffsetDeleteRequestTopic
    deleted = ask(kc.OFFSET_DELETE, 0, OffsetDeleteRequest[0](group_id=group, topics=[
        D(name=t, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])
        for t in ("kept", "dropped", "missing")]))
    assert deleted.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in deleted.topics} == {
        "kept": 86, "dropped": 0, "missing": 3}  # GROUP_SUBSCRIBED_TO_TOPIC, -, UNKNOWN_TOPIC
    assert committed_offsets() == {("kept", 0): 7, ("kept", 1): 7, ("dropped", 0): -1,
                                   ("dropped", 1): 7}
    [refused] = ask(kc.DELETE_GROUPS, 0, DeleteGroupsRequest[0](groups_names=[group])).results
    assert (refused.group_id, refused.error_code) == (group, 68), "NON_EMPTY_GROUP"
    left = ask(kc.LEAVE_GROUP, 3, LeaveGroupRequest[3](group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=me, group_instance_id=None)]))
    assert left.error_code == 0

    # kafka-python's delete_group_offsets sends OffsetDelete, its delete_groups and
    # confluent-kafka's delete_consumer_groups DeleteGroups
    from kafka.errors import NoError
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        assert kp.delete_group_offsets(group, [_tp("kept", 1)]) == {_tp("kept", 1): NoError}
        assert committed_offsets()[("kept", 1)] == -1 and committed_offsets()[("kept", 0)] == 7
        a = admin(cluster)  # held: a client collected before its future completes fails it
        [f] = a.delete_consumer_groups([group], request_timeout=30).values()
        f.result(30)
        assert committed_offsets() == dict.fromkeys(committed_offsets(), -1)
        [gone] = ask(kc.DELETE_GROUPS, 2, DeleteGroupsRequest[2](groups_names=[group])).results
        assert gone.error_code == 69, "GROUP_ID_NOT_FOUND"
        simple = "deletable-simple"
        wait_for("a simple group's coordinator", lambda: coordinator(simple))
        kp.alter_group_offsets(simple, {_tp("kept", 0): _om(3)})
        assert simple in [g["group_id"] for g in kp.list_groups()]
        assert kp.delete_groups([simple]) == {simple: "OK"}
        assert simple not in [g["group_id"] for g in kp.list_groups()]
        assert kp.delete_groups([simple]) == {simple: "GroupIdNotFoundError"}
    finally:
        kp.close()

    # the tombstones are what the next coordinator loads
    cluster.kill(node)
    try:
        def described():
            found = coordinator(group, via=next(i for i in cluster.ids if i != node))
            if found is None or found[0] == node:
                return None
            r = wire(cluster, found[1], kc.DESCRIBE_GROUPS, 6,
                     DescribeGroupsRequest[6](groups=[group]))
            return r.groups[0] if r.groups[0].error_code in (0, 69) else None
        g = wait_for("another coordinator's answer", described, timeout_s=60)
        assert (g.error_code, g.group_state) == (69, "Dead")
    finally:
        cluster.start(node)


def _tp(topic, partition):
    from kafka.structs import TopicPartition
    return TopicPartition(topic, partition)


def _om(offset):
    from kafka.structs import OffsetAndMetadata
    return OffsetAndMetadata(offset, "", -1)
