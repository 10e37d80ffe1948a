"""ACLs with StandardAuthorizer: the bindings' rules without I/O, then three node processes
where kafka-python's and librdkafka's admin clients create, describe and delete them
(through the controller, into every broker's metadata) and the brokers enforce them on
what clients do."""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient,
                         ResourcePattern)
from kafka.admin import ResourceType as KResourceType
from kafka.errors import NoError

from conftest import create_topic_everywhere, wait_for
from node_image import acls
from node_image.acls import AclBinding as B
from node_image.acls import AclFilter as F


def binding(name="t", pattern=acls.LITERAL, principal="User:a", host="*", op=acls.READ,
            permission=acls.ALLOW, rtype=acls.TOPIC):
    return B(rtype, name, pattern, principal, host, op, permission)


@pytest.mark.parametrize("bad, message", [
    (binding(rtype=acls.ANY), "Invalid resourceType ANY"),
    (binding(pattern=acls.MATCH), "Invalid patternType MATCH"),
    (binding(op=acls.ANY), "Invalid operation ANY"),
    (binding(permission=acls.ANY), "Invalid permissionType ANY"),
    (binding(name=""), "Resource name should not be empty"),
    (binding(principal="alice"), "Invalid principal 'alice'"),
    (binding(host=""), "Host should not be empty"),
])
def test_a_binding_kafka_refuses_is_refused_naming_the_field(bad, message):
    new, results = acls.create({}, [bad, binding()])
    assert results[0].startswith(message) and results[1] is None
    assert [b for _, b in new] == [binding()]


def test_filters_match_as_kafkas_acl_binding_filter():
    lit, star, pre = binding("orders"), binding("*"), binding("ord", acls.PREFIXED)
    every = [lit, star, pre]
    assert [b for b in every if acls.matches(F(), b)] == every
    assert [b for b in every if acls.matches(F(name="orders", pattern_type=acls.MATCH), b)] \
        == every, "MATCH: what applies to a resource of that name"
    assert [b for b in every if acls.matches(F(name="other", pattern_type=acls.MATCH), b)] \
        == [star]
    assert [b for b in every if acls.matches(F(pattern_type=acls.PREFIXED), b)] == [pre]
    assert [b for b in every if acls.matches(F(name="orders", pattern_type=acls.LITERAL), b)] \
        == [lit]
    assert not acls.matches(F(resource_type=acls.GROUP), lit)
    assert not acls.matches(F(principal="User:b"), lit)
    assert not acls.matches(F(operation=acls.WRITE), lit)
    gone, results = acls.delete({"1": lit, "2": star, "3": pre},
                                [F(name="orders", pattern_type=acls.MATCH), F(name="*")])
    assert gone == ["1", "2", "3"] and [len(hit) for _, hit in results] == [3, 1]
    assert acls.delete({}, [F(operation=0)])[1] == [("Unknown entryFilter.", [])]


def test_the_authorizer_decides_as_standard_authorizer():
    def may(bindings, op=acls.READ, name="orders", principal="User:a", everyone=False,
            supers=frozenset()):
        return acls.authorize(bindings, principal, "10.0.0.1", op, acls.TOPIC, name, everyone,
                              supers)
    assert not may([]) and may([], everyone=True), "no binding names it: the default"
    assert may([binding("other")], everyone=True), "a binding of another topic says nothing"
    assert may([binding("orders")]) and not may([binding("orders")], principal="User:b")
    assert not may([binding("orders")], everyone=True, principal="User:b"), \
        "a resource with bindings is closed to everyone else"
    assert may([binding("orders")], op=acls.DESCRIBE), "READ implies DESCRIBE"
    assert not may([binding("orders", op=acls.DESCRIBE)], op=acls.READ)
    assert may([binding("ord", acls.PREFIXED, op=acls.ALL)], op=acls.WRITE)
    assert may([binding("*", principal="User:*")], principal="User:z")
    assert not may([binding("orders"), binding("*", permission=acls.DENY)]), "DENY wins"
    assert not may([binding("orders"), binding("orders", host="10.0.0.1", op=acls.ALL,
                                               permission=acls.DENY)])
    assert not may([binding("orders", host="10.9.9.9")]), "another host's grant"
    assert may([binding("*", permission=acls.DENY)], supers=frozenset({"User:a"}))


def test_bindings_are_metadata_records_kept_in_snapshots():
    from node_image import metadata_records as mr
    from node_image.metadata_image import MetadataDelta, MetadataImage
    records, results, events = acls.create_plan({}, [tuple(vars_of(binding()))], salt=7)
    assert results == [(0, None)] and events == ["ACL created: ALLOW User:a from * READ on "
                                                 "TOPIC LITERAL 't'"]
    [rec] = records
    assert mr.decode(mr.encode(rec)) == rec
    delta = MetadataDelta(MetadataImage())
    delta.replay(rec)
    img = delta.apply(1)
    assert list(img.acls.values()) == [binding()]
    again = MetadataDelta(MetadataImage())
    for r in img.records():  # a snapshot's contents rebuild the same bindings
        again.replay(r)
    assert again.apply(1).acls == img.acls
    assert acls.create_plan(img.acls, [tuple(vars_of(binding()))], salt=8)[0] == [], \
        "one already there: nothing written"
    gone, rows, _ = acls.delete_plan(img.acls, [(acls.ANY, None, acls.ANY, None, None,
                                                 acls.ANY, acls.ANY)])
    assert gone == [mr.RemoveAccessControlEntryRecord(rec.id)]
    assert rows == [(0, None, (tuple(vars_of(binding())),))]


def vars_of(b):
    return (b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation,
            b.permission)


# ---------------------------------------------------------------- real clients

@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path_factory.mktemp("acls"), nodes=3, brokers=True, extra_config={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    c.start_all()
    try:
        yield c
    finally:
        c.close()


def test_kafka_pythons_acl_round_trip_as_its_own_suite_runs_it(cluster):
    """What kafka-python's ``test_create_describe_delete_acls`` does against a Kafka with
    StandardAuthorizer: none, one created, listed, deleted, none."""
    admin = wait_for("the cluster", lambda: KafkaAdminClient(bootstrap_servers=cluster.bootstrap()))
    try:
        pattern = ResourcePattern(KResourceType.TOPIC, "topic")
        every = ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                          permission_type=ACLPermissionType.ANY, resource_pattern=pattern)
        acls_, error = admin.describe_acls(every)
        assert error is NoError and acls_ == []
        acl = ACL(principal="User:test", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)
        result = admin.create_acls([acl])
        assert (len(result["failed"]), len(result["succeeded"])) == (0, 1)
        # answered from the asked broker's image, which may lag the controller's
        acls_, error = wait_for("the binding listed", lambda: (
            lambda r: r[1] is NoError and len(r[0]) == 1 and r)(admin.describe_acls(every)))
        assert (acls_[0].principal, acls_[0].operation) == ("User:test", ACLOperation.READ)
        deleted = admin.delete_acls([ACLFilter(
            principal="User:test", host="*", operation=ACLOperation.READ,
            permission_type=ACLPermissionType.ALLOW, resource_pattern=pattern)])
        assert len(deleted) == 1 and len(deleted[0][1]) == 1, deleted
        wait_for("the binding gone", lambda: admin.describe_acls(ACLFilter(
            principal="*", host="*", operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY, resource_pattern=pattern)) == ([], NoError))
        wait_for("none listed", lambda: admin.describe_acls(every) == ([], NoError))
    finally:
        admin.close()


def test_a_deny_binding_stops_producers_and_consumers_until_it_is_deleted(cluster):
    a = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    # three replicas: once every broker is registered and unfenced (seconds after start on
    # a busy machine), and seen by every broker
    create_topic_everywhere(cluster, "locked", 1, timeout_s=90)
    deny = [AclBinding(ResourceType.TOPIC, "lock", ResourcePatternType.PREFIXED,
                       "User:ANONYMOUS", "*", op, AclPermissionType.DENY)
            for op in (AclOperation.WRITE, AclOperation.READ)]
    for f in a.create_acls(deny).values():
        f.result(30)

    def listed():  # answered from the asked broker's image, which may lag the controller's
        return sorted(b.operation for b in a.describe_acls(AclBindingFilter(
            ResourceType.TOPIC, "locked", ResourcePatternType.MATCH, None, None,
            AclOperation.ANY, AclPermissionType.ANY)).result(30))
    wait_for("both bindings listed", lambda: listed() == [AclOperation.READ,
                                                          AclOperation.WRITE], timeout_s=30)

    def produce():
        errors = []
        p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all",
                      "message.timeout.ms": 10000})
        p.produce("locked", b"x",
                  on_delivery=lambda err, msg: errors.append(err and err.code()))
        p.flush(20)
        return errors

    # every broker has the bindings once the controller committed them: wait for the leader
    wait_for("the leader refusing writes", lambda: produce() == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED], timeout_s=30)
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "locked-reader",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["locked"])
    try:
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not seen:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                seen.append(m.error().code())
        assert KafkaError.TOPIC_AUTHORIZATION_FAILED in seen, seen
    finally:
        c.close()
    [deleted] = a.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "lock", ResourcePatternType.PREFIXED, "User:ANONYMOUS", None,
        AclOperation.ANY, AclPermissionType.DENY)]).values()
    assert len(deleted.result(30)) == 2
    wait_for("writes allowed again", lambda: produce() == [None], timeout_s=30)
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs and "ACL created: DENY User:ANONYMOUS" in logs



def test_admin_calls_and_transactional_ids_are_refused_where_a_binding_denies_them(cluster):
    """Kafka's KafkaApis checks on the admin APIs and transactional ids, from librdkafka's
    admin client: DENY bindings on a topic prefix, a group, a transactional id and the
    cluster refuse exactly those calls, each with its resource's error; once the bindings
    are deleted the same calls go through."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import (ConfigResource, ConfigEntry, AlterConfigOpType,
                                       NewPartitions)
    from confluent_kafka import ElectionType
    a = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    create_topic_everywhere(cluster, "guarded", 1, timeout_s=60)

    def deny(rtype, name, op, pattern=ResourcePatternType.LITERAL):
        return AclBinding(rtype, name, pattern, "User:ANONYMOUS", "*", op,
                          AclPermissionType.DENY)
    bindings = [deny(ResourceType.TOPIC, "guarded", op, ResourcePatternType.PREFIXED)
                for op in (AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
                           AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)]
    # a resource with bindings is no longer open to all (allow.everyone.if.no.acl.found):
    # DESCRIBE allowed, so that clients find the partitions' leaders
    bindings.append(AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.PREFIXED,
                               "User:ANONYMOUS", "*", AclOperation.DESCRIBE,
                               AclPermissionType.ALLOW))
    bindings += [deny(ResourceType.GROUP, "guarded-group", op)
                 for op in (AclOperation.DESCRIBE, AclOperation.DELETE)]
    bindings += [deny(ResourceType.TRANSACTIONAL_ID, "guarded-txn", AclOperation.WRITE),
                 deny(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)]
    for f in a.create_acls(bindings).values():
        f.result(30)

    def code(future):
        try:
            future.result(30)
        except KafkaException as exc:
            return exc.args[0].code()
        return None

    def calls():
        topic = ConfigResource(ConfigResource.Type.TOPIC, "guarded")
        alter = ConfigResource(ConfigResource.Type.TOPIC, "guarded", incremental_configs=[
            ConfigEntry("retention.ms", "86400000",
                        incremental_operation=AlterConfigOpType.SET)])
        return {
            "create": code(a.create_topics([NewTopic("guarded-new", 1, 1)])["guarded-new"]),
            "delete": code(a.delete_topics(["guarded"])["guarded"]),
            "partitions": code(a.create_partitions([NewPartitions("guarded", 2)])["guarded"]),
            "describe configs": code(a.describe_configs([topic])[topic]),
            "alter configs": code(a.incremental_alter_configs([alter])[alter]),
            "delete records": code(next(iter(a.delete_records(
                [TopicPartition("guarded", 0, 0)]).values()))),
            "describe group": code(a.describe_consumer_groups(["guarded-group"])["guarded-group"]),
            "delete group": code(a.delete_consumer_groups(["guarded-group"])["guarded-group"]),
            "elect": code(a.elect_leaders(ElectionType.PREFERRED,
                                          [TopicPartition("guarded", 0)])),
        }
    want = {"create": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "delete": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "partitions": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "describe configs": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "alter configs": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "delete records": KafkaError.TOPIC_AUTHORIZATION_FAILED,
            "describe group": KafkaError.GROUP_AUTHORIZATION_FAILED,
            "delete group": KafkaError.GROUP_AUTHORIZATION_FAILED,
            "elect": KafkaError.CLUSTER_AUTHORIZATION_FAILED}
    # every broker holds the bindings once it has the committed records
    seen = []
    try:
        # one round of nine admin calls can take most of 30 s on a busy machine
        wait_for("every call refused", lambda: seen.append(calls()) or seen[-1] == want, 90)
    except AssertionError:
        raise AssertionError(f"answered {seen[-1] if seen else 'nothing'}, not {want}") from None

    # KIP-848's and KIP-932's describe calls, which no admin client here sends, on the wire
    from group_clients import coordinator
    from node_clients import wire
    from node_image import kafka_codec as kc
    host = cluster.host(wait_for("the group's coordinator",
                                 lambda: coordinator(cluster, "guarded-group")))
    for api, version in ((kc.CONSUMER_GROUP_DESCRIBE, 0), (kc.SHARE_GROUP_DESCRIBE, 1)):
        [g] = wire(cluster, host, api, version, kc.SUPPORTED[api][2][version](
            group_ids=["guarded-group"], include_authorized_operations=False)).groups
        assert (g.error_code, g.error_message) == (
            KafkaError.GROUP_AUTHORIZATION_FAILED,
            "Not authorized to describe group guarded-group"), (api, g)
    R = kc.DescribeShareGroupOffsetsRequest[0]
    [g] = wire(cluster, host, kc.DESCRIBE_SHARE_GROUP_OFFSETS, 0, R(groups=[
        R.DescribeShareGroupOffsetsRequestGroup(group_id="guarded-group", topics=None)])).groups
    assert g.error_code == KafkaError.GROUP_AUTHORIZATION_FAILED, g

    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "guarded-txn"})
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(30)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    for f in a.delete_acls([AclBindingFilter(
            t, None, ResourcePatternType.ANY, "User:ANONYMOUS", None, AclOperation.ANY,
            AclPermissionType.ANY) for t in (ResourceType.TOPIC, ResourceType.GROUP,
                                               ResourceType.TRANSACTIONAL_ID,
                                               ResourceType.BROKER)]).values():
        f.result(30)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "guarded")
    wait_for("configs described again", lambda: code(a.describe_configs([topic])[topic]) is None,
             30)
    assert code(a.delete_topics(["guarded"])["guarded"]) is None
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "guarded-txn"})
    p.init_transactions(30)
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs


def test_authorized_operations_say_what_the_client_may_do(cluster):
    """librdkafka's describe calls asking for authorized operations (its own suite's 0081
    does): every operation of a topic, the cluster and a group the client may do, as
    Kafka's supported operations per resource type; a DENY binding takes its operation
    out of the topic's."""
    from confluent_kafka import TopicCollection
    a = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    create_topic_everywhere(cluster, "ops", 1, {}, timeout_s=60)

    def topic_ops():
        d = a.describe_topics(TopicCollection(["ops"]),
                              include_authorized_operations=True)["ops"].result(30)
        return set(d.authorized_operations)
    O = AclOperation
    assert wait_for("the topic described", topic_ops) == {
        O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS,
        O.ALTER_CONFIGS}
    c = a.describe_cluster(include_authorized_operations=True).result(30)
    assert set(c.authorized_operations) == {O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS,
                                            O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE, O.ALTER,
                                            O.DESCRIBE}
    assert a.describe_cluster().result(30).authorized_operations is None, "not asked"
    # once a binding names the topic, only what is allowed is (as StandardAuthorizer): allow
    # everything, deny DELETE
    rules = [AclBinding(ResourceType.TOPIC, "ops", ResourcePatternType.LITERAL, "User:*", "*",
                        op, permission)
             for op, permission in ((O.ALL, AclPermissionType.ALLOW),
                                    (O.DELETE, AclPermissionType.DENY))]
    for r, f in a.create_acls(rules).items():
        f.result(30)
    try:
        wait_for("DELETE out of the topic's operations", lambda: topic_ops() == {
            O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.ALTER, O.DESCRIBE_CONFIGS,
            O.ALTER_CONFIGS})
    finally:
        for f in a.delete_acls([AclBindingFilter(
                ResourceType.TOPIC, "ops", ResourcePatternType.LITERAL, "User:*", "*",
                O.ANY, AclPermissionType.ANY)]).values():
            f.result(30)
