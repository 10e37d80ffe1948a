"""Kafka 4's request versions on the wire, each sent as a client that knows that version
would send it, to three real node processes: DescribeCluster, OffsetForLeaderEpoch across
a leader change, the classic group protocol in its flexible and batched versions,
ListOffsets by record timestamps, CreateTopics' fuller answer, topic ids in Metadata and
Fetch, and the leader hints of Produce and Fetch."""
import pytest

from conftest import wait_for
from node_clients import admin, create, three_brokers, wire


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from three_brokers(tmp_path_factory, "wire")


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
                  "newest": (6, 9, 5, 4, 9, 9, 5, 6)}


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
            if vf >= 6:  # share groups (KIP-932): the node has none
                [share] = ask(cluster.host(1), kc.FIND_COORDINATOR, vf, FindCoordinatorRequest[vf](
                    key_type=2, coordinator_keys=[f"{group}:x:0"])).coordinators
                assert (share.error_code, share.error_message) == (
                    42, "share groups (KIP-932) are not supported")
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
    [nobody] = ask(host, kc.DESCRIBE_GROUPS, vd, DescribeGroupsRequest[vd](
        groups=[f"{group}-nobody"])).groups
    if vd >= 6:  # KIP-1043
        assert (nobody.error_code, nobody.error_message, nobody.group_state) == (
            69, f"Group {group}-nobody not found.", "Dead")
    else:
        assert (nobody.error_code, nobody.group_state) == (0, "Dead")


@pytest.mark.parametrize("version", [5, 6, 9, 10])
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
                                       timestamp=timestamp)])],
            **({"timeout_ms": 5_000} if version >= 10 else {})))
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
    T = ListOffsetsRequest.ListOffsetsTopic
    twice = ask(kc.LIST_OFFSETS, version, ListOffsetsRequest[version](
        replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
            T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)
            for ts in (1000, 2000)])], **({"timeout_ms": 5_000} if version >= 10 else {})))
    assert [p.error_code for p in twice.topics[0].partitions] == [42, 42], \
        "a partition named twice: INVALID_REQUEST at each mention, as Kafka"


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


@pytest.mark.parametrize("version", [9, 10, 12, 13])
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
    answer = ask([R.MetadataRequestTopic(name="by-id", topic_id=zero)])
    if version >= 13:
        assert answer.error_code == 0, "v13's top-level error"
    [t] = answer.topics
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


@pytest.mark.parametrize("produce_version,fetch_version", [(10, 13), (11, 16), (12, 17)])
def test_produce_and_fetch_by_id_with_the_leader_hint(cluster, produce_version, fetch_version):
    """Produce v10-v12 and Fetch v13-v17 as Kafka 4 answers them: Fetch names topics by id
    (an id no topic has: UNKNOWN_TOPIC_ID), and a broker that does not lead the partition,
    or a stale leader epoch, is answered with where the leader is and its endpoint
    (KIP-951: Produce from v10, Fetch from v16), matching what Metadata says."""
    import uuid

    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    from node_image import kafka_codec as kc
    from node_image import records
    topic = f"by-id-{fetch_version}"
    create(cluster, topic, {})
    M = MetadataRequest[12]
    md = wire(cluster, cluster.host(1), kc.METADATA, 12, M(
        topics=[M.MetadataRequestTopic(name=topic, topic_id=uuid.UUID(int=0))],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    [t] = md.topics
    p0 = next(p for p in t.partitions if p.partition_index == 0)
    leader, epoch, tid = p0.leader_id, p0.leader_epoch, t.topic_id
    endpoint = next((b.host, b.port) for b in md.brokers if b.node_id == leader)
    follower = next(n for n in cluster.ids if n != leader)
    batch = records.build_batch(0, 0, [(None, b"a"), (None, b"b")], 1000)

    def produce(node):
        D = ProduceRequest.TopicProduceData
        r = wire(cluster, cluster.host(node), kc.PRODUCE, produce_version,
                 ProduceRequest[produce_version](
                     transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[D(
                         name=topic, partition_data=[D.PartitionProduceData(
                             index=0, records=batch)])]))
        return r, r.responses[0].partition_responses[0]

    def hint(resp, part):
        ends = {e.node_id: (e.host, e.port) for e in resp.node_endpoints or []}
        cl = part.current_leader
        return (cl.leader_id, cl.leader_epoch, ends.get(cl.leader_id)) if cl else None
    r, p = produce(leader)
    assert (p.error_code, p.base_offset) == (0, 0)
    r, p = produce(follower)
    assert p.error_code == 6, "NOT_LEADER_OR_FOLLOWER"
    assert hint(r, p) == (leader, epoch, endpoint)

    def fetch(node, topic_id, current_epoch=-1):
        F = FetchRequest.FetchTopic
        r = wire(cluster, cluster.host(node), kc.FETCH, fetch_version,
                 FetchRequest[fetch_version](
                     replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                     isolation_level=0, session_id=0, session_epoch=-1, topics=[F(
                         topic_id=topic_id, partitions=[F.FetchPartition(
                             partition=0, current_leader_epoch=current_epoch, fetch_offset=0,
                             last_fetched_epoch=-1, log_start_offset=-1,
                             partition_max_bytes=1 << 20)])],
                     forgotten_topics_data=[], rack_id=""))
        [answered] = r.responses
        assert answered.topic_id == topic_id
        return r, answered.partitions[0]
    r, p = fetch(leader, tid)
    assert p.error_code == 0 and p.high_watermark == 2
    got = [rec.value for rec in records.decode_records(bytes(p.records))[1]]
    assert got == [b"a", b"b"]
    stranger = uuid.uuid4()
    assert fetch(leader, stranger)[1].error_code == 100, "UNKNOWN_TOPIC_ID"
    # a follower: NOT_LEADER_OR_FOLLOWER, with the hint; a leader epoch newer than the
    # leader's: UNKNOWN_LEADER_EPOCH, with none (Kafka hints only where the leader moved)
    for node, current, error, hinted in ((follower, -1, 6, True), (leader, epoch + 1, 75, False)):
        r, p = fetch(node, tid, current)
        assert p.error_code == error
        want = (leader, epoch, endpoint) if hinted and fetch_version >= 16 else None
        assert (hint(r, p) if p.current_leader and p.current_leader.leader_id >= 0
                else None) == want


@pytest.mark.parametrize("version", [1, 4, 12])
def test_metadata_creates_a_topic_it_names_where_allowed(cluster, version):
    """auto.create.topics.enable (Kafka's default, true): a Metadata request naming a topic
    that does not exist creates it with num.partitions and default.replication.factor
    (LEADER_NOT_AVAILABLE until it exists) where it allows creation (always before v4, from
    v4 its flag); one that does not allow it gets UNKNOWN_TOPIC_OR_PARTITION and creates
    nothing; an illegal name is INVALID_TOPIC_EXCEPTION."""
    import uuid

    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc
    R = MetadataRequest[version]

    def ask(name, allow=True):
        fields = {"allow_auto_topic_creation": allow} if version >= 4 else {}
        if version >= 8:
            fields["include_topic_authorized_operations"] = False
        if 8 <= version <= 10:
            fields["include_cluster_authorized_operations"] = False
        topic = (R.MetadataRequestTopic(name=name, topic_id=uuid.UUID(int=0)) if version >= 10
                 else R.MetadataRequestTopic(name=name))
        [t] = wire(cluster, cluster.host(2), kc.METADATA, version, R(
            topics=[topic], **fields)).topics
        return t
    kept, made = f"kept-{version}", f"auto-{version}"
    # the module's cluster may still be coming up when this test is its first
    wait_for("a Metadata answer", lambda: ask("_" + kept, allow=False) if version >= 4
             else ask(made))
    if version >= 4:
        assert ask(kept, allow=False).error_code == 3, "UNKNOWN_TOPIC_OR_PARTITION"
        assert ask(made).error_code == 5, "LEADER_NOT_AVAILABLE while it is made"
    t = wait_for(f"{made} created", lambda: (lambda t: t if t.error_code == 0 else None)(
        ask(made)))
    assert [(p.partition_index, len(p.replica_nodes)) for p in t.partitions] == [(0, 1)]
    assert ask("bad name!").error_code == 17, "INVALID_TOPIC_EXCEPTION"
    if version >= 4:
        assert ask(kept, allow=False).error_code == 3, "asking without creation made nothing"

