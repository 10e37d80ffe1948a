"""DescribeTopicPartitions (paged by a cursor), DescribeLogDirs, AlterReplicaLogDirs and
ElectLeaders on three real node processes: on the wire in the versions Kafka 4 answers, and
from the admin clients of kafka-python and confluent-kafka."""
import pytest

from conftest import local_brokers, wait_for
from node_clients import admin, create, wire


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """No automatic leader rebalance: only ElectLeaders moves a leader back."""
    with local_brokers(tmp_path_factory.mktemp("describe"), extra_config={
            "min.insync.replicas": "1", "auto.leader.rebalance.enable": "false"}) as c:
        yield c


def test_describe_topic_partitions_pages_through_topics_in_name_order(cluster):
    """Topics asked in name order, an unknown one UNKNOWN_TOPIC_OR_PARTITION, at most the
    partition limit per answer; ``next_cursor`` names the partition to go on from, also where
    the limit falls between two topics; a cursor on a topic not asked is INVALID_REQUEST."""
    from kafka import KafkaAdminClient
    from kafka.protocol.admin import DescribeTopicPartitionsRequest as Req

    from node_image import kafka_codec as kc
    for name in ("pages-a", "pages-b"):
        create(cluster, name, {})  # 2 partitions, replication factor 3

    def ask(names, limit, cursor=None):
        return wire(cluster, cluster.host(1), kc.DESCRIBE_TOPIC_PARTITIONS, 0, Req[0](
            topics=[Req.TopicRequest(name=n) for n in names], response_partition_limit=limit,
            cursor=None if cursor is None else Req.Cursor(topic_name=cursor[0],
                                                          partition_index=cursor[1])))

    def seen(r):
        return [(t.name, t.error_code, [p.partition_index for p in t.partitions])
                for t in r.topics]

    def cursor(r):
        c = r.next_cursor
        return None if c is None else (c.topic_name, c.partition_index)
    first = ask(["pages-b", "pages-a", "missing"], 3)
    assert seen(first) == [("missing", 3, []), ("pages-a", 0, [0, 1]), ("pages-b", 0, [0])]
    assert cursor(first) == ("pages-b", 1)
    a = first.topics[1]
    assert a.topic_id.int != 0 and a.is_internal is False
    for p in a.partitions:
        assert p.leader_id in cluster.ids and p.leader_epoch >= 0
        assert sorted(p.replica_nodes) == cluster.ids and set(p.isr_nodes) <= set(cluster.ids)
        assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ([], [], [])
    rest = ask(["pages-b", "pages-a", "missing"], 3, cursor=("pages-b", 1))
    assert (seen(rest), cursor(rest)) == ([("pages-b", 0, [1])], None)
    between = ask(["pages-a", "pages-b"], 2)
    assert (seen(between), cursor(between)) == ([("pages-a", 0, [0, 1])], ("pages-b", 0))
    refused = ask(["pages-a"], 10, cursor=("pages-b", 0))
    assert seen(refused) == [("pages-a", 42, [])]
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        paged = kp.describe_topic_partitions(["pages-a", "pages-b"], response_partition_limit=3)
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]])
                for t in paged["topics"]] == [("pages-a", [0, 1]), ("pages-b", [0])]
        assert paged["next_cursor"]["topic_name"] == "pages-b"
        assert paged["next_cursor"]["partition_index"] == 1
    finally:
        kp.close()


def test_log_dirs_list_each_replica_with_its_size_and_a_move_in_place_is_accepted(cluster):
    """DescribeLogDirs: each broker's one log directory with the replicas it holds and the
    bytes of their logs (growing as records are written); AlterReplicaLogDirs: a replica
    asked to stay where it is is NONE, another directory LOG_DIR_NOT_FOUND, an unknown
    partition UNKNOWN_TOPIC_OR_PARTITION. kafka-python's admin calls get the same."""
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient
    from kafka.protocol.admin import AlterReplicaLogDirsRequest as Alter
    from kafka.protocol.admin import DescribeLogDirsRequest as Describe
    from kafka.structs import TopicPartitionReplica

    from node_image import kafka_codec as kc
    create(cluster, "sized", {})
    data_dir = {i: str(cluster.root / f"data{i}") for i in cluster.ids}

    def sizes(node, version):
        r = wire(cluster, cluster.host(node), kc.DESCRIBE_LOG_DIRS, version, Describe[version](
            topics=[Describe.DescribableLogDirTopic(topic="sized", partitions=[0, 1])]))
        [d] = r.results
        assert (d.error_code, d.log_dir) == (0, data_dir[node])
        if version >= 4:
            assert (d.total_bytes, d.usable_bytes) == (-1, -1), "unknown: no volume figures"
        assert [t.name for t in d.topics] == ["sized"]
        return {p.partition_index: (p.partition_size, p.offset_lag) for p in d.topics[0].partitions}
    assert wait_for("both replicas on every broker",
                    lambda: all(len(sizes(i, 1)) == 2 for i in cluster.ids))
    before = {i: sizes(i, 4) for i in cluster.ids}
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all"})
    for _ in range(10):
        p.produce("sized", b"x" * 1000, partition=0)
    assert p.flush(30) == 0
    wait_for("partition 0's log to hold the records on every broker",
             lambda: all(sizes(i, 4)[0][0] >= before[i][0][0] + 10_000 for i in cluster.ids))
    assert all(sizes(i, 1)[1] == before[i][1] for i in cluster.ids), "partition 1 untouched"

    def alter(node, path, topic, partitions):
        r = wire(cluster, cluster.host(node), kc.ALTER_REPLICA_LOG_DIRS, 2, Alter[2](dirs=[
            Alter.AlterReplicaLogDir(path=path, topics=[
                Alter.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic,
                                                               partitions=partitions)])]))
        return [(t.topic_name, x.partition_index, x.error_code)
                for t in r.results for x in t.partitions]
    assert alter(1, data_dir[1], "sized", [0, 1]) == [("sized", 0, 0), ("sized", 1, 0)]
    assert alter(1, "/elsewhere", "sized", [0]) == [("sized", 0, 57)]  # LOG_DIR_NOT_FOUND
    assert alter(1, data_dir[1], "nothing", [0]) == [("nothing", 0, 3)]

    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        dirs = {r["broker"]: r["log_dirs"] for r in kp.describe_log_dirs()}
        assert sorted(dirs) == cluster.ids
        assert [d["log_dir"] for d in dirs[3]] == [data_dir[3]]
        replica = TopicPartitionReplica("sized", 0, 3)
        from kafka.errors import NoError
        assert kp.alter_replica_log_dirs({replica: data_dir[3]}) == {replica: NoError}
    finally:
        kp.close()


def test_a_preferred_election_from_both_admin_clients_moves_leadership_back(cluster):
    """The preferred replica of a partition is stopped (leadership moves) and started again
    (it rejoins the ISR; the cluster rebalances no leaders by itself): kafka-python's
    ``elect_leaders`` moves the leader back, after which confluent-kafka's is told
    ELECTION_NOT_NEEDED; an unclean election of a partition that has a leader is not needed
    either, and an unknown partition is UNKNOWN_TOPIC_OR_PARTITION."""
    from confluent_kafka import ElectionType, TopicPartition
    from kafka import KafkaAdminClient
    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc
    create(cluster, "elected", {})

    def state(via):
        r = wire(cluster, cluster.host(via), kc.METADATA, 8, MetadataRequest[8](
            topics=[MetadataRequest[8].MetadataRequestTopic(name="elected")],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False))
        [p] = [p for p in r.topics[0].partitions if p.partition_index == 0]
        return p.leader_id, list(p.replica_nodes), list(p.isr_nodes)
    leader, replicas, _ = wait_for("a leader of elected-0", lambda: (
        lambda s: s if s[0] >= 0 else None)(state(1)))
    preferred = replicas[0]
    assert leader == preferred
    other = next(i for i in cluster.ids if i != preferred)
    cluster.stop(preferred)
    try:
        wait_for("leadership to move", lambda: state(other)[0] not in (-1, preferred))
    finally:
        cluster.start(preferred)
    wait_for("the preferred replica back in the ISR",
             lambda: preferred in state(other)[2], timeout_s=90)
    assert state(other)[0] != preferred
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        r = wait_for("an answer from the controller",
                     lambda: kp.elect_leaders(0, {"elected": [0]}, raise_errors=False))
        assert [(t, [(x[0], x[1]) for x in ps]) for t, ps in r.replica_election_results] == [
            ("elected", [(0, 0)])]
        r = kp.elect_leaders(1, {"elected": [0, 7]}, raise_errors=False)
        assert [(t, sorted((x[0], x[1]) for x in ps))
                for t, ps in r.replica_election_results] == [("elected", [(0, 84), (7, 3)])]
    finally:
        kp.close()
    wait_for("the preferred replica leading", lambda: state(other)[0] == preferred)
    a = admin(cluster)  # held until its future completes
    [(tp, error)] = a.elect_leaders(ElectionType.PREFERRED,
                                    [TopicPartition("elected", 0)]).result(30).items()
    assert (tp.topic, tp.partition, error.code()) == ("elected", 0, 84)


def test_acl_requests_are_answered_as_by_a_kafka_broker_without_an_authorizer(cluster):
    """No authorizer: DescribeAcls, CreateAcls and DeleteAcls are SECURITY_DISABLED with
    Kafka's message (the request as a whole, or each creation and filter), as both admin
    clients and the wire show."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, ResourcePatternType, ResourceType)
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError
    from kafka.protocol.admin import DeleteAclsRequest, DescribeAclsRequest

    from node_image import kafka_codec as kc
    a = admin(cluster)
    binding = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:x", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    [f] = a.create_acls([binding]).values()
    with pytest.raises(KafkaException) as made:
        f.result(30)
    assert made.value.args[0].code() == KafkaError.SECURITY_DISABLED
    # (librdkafka 2.16's describe_acls drops the answer's top-level error: an empty list)
    assert a.describe_acls(AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(30) == []
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    try:
        pattern = ResourcePattern(KpResourceType.TOPIC, "t")
        with pytest.raises(SecurityDisabledError, match="No Authorizer is configured"):
            kp.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                       permission_type=ACLPermissionType.ANY,
                                       resource_pattern=pattern))
        acl = ACL(principal="User:x", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)
        created = kp.create_acls([acl])
        assert created["succeeded"] == []
        assert created["failed"] == [SecurityDisabledError]
    finally:
        kp.close()
    d = wire(cluster, cluster.host(2), kc.DESCRIBE_ACLS, 1, DescribeAclsRequest[1](
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert (d.error_code, d.error_message, d.resources) == (
        54, "No Authorizer is configured on the broker", [])
    F = DeleteAclsRequest.DeleteAclsFilter
    r = wire(cluster, cluster.host(1), kc.DELETE_ACLS, 3, DeleteAclsRequest[3](filters=[F(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)] * 2))
    assert [(x.error_code, x.error_message, x.matching_acls) for x in r.filter_results] == [
        (54, "No Authorizer is configured on the broker", [])] * 2
