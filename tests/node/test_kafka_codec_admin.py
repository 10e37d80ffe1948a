"""The codec for the versions and APIs Kafka 4.0 added or kafka-python's admin sends, against
bytes written out by hand from Kafka's message schemas: ListOffsets v10, Metadata v13,
DescribeGroups v6, DeleteGroups v2, OffsetDelete v0, ElectLeaders v2,
DescribeTopicPartitions v0, DescribeLogDirs v4, AlterPartitionReassignments v0-1,
ListPartitionReassignments v0, DescribeClientQuotas v1 and AlterClientQuotas v0."""
import struct
import uuid

from test_kafka_codec import TAGS, carray, cstr, request_v2, response_v1

from node_image import kafka_codec as kc

NULL_ARRAY = b"\x00"  # a compact nullable array or string that is null


def test_list_offsets_v10_request_carries_its_timeout():
    body = (struct.pack(">ib", -1, 0) + carray([cstr("t") + carray([
        struct.pack(">iiq", 1, -1, -2) + TAGS]) + TAGS]) + struct.pack(">i", 2500) + TAGS)
    req = kc.decode_request(request_v2(kc.LIST_OFFSETS, 10, 5) + body)
    [t] = req.body.topics
    assert (t.name, t.partitions[0].partition_index, t.partitions[0].timestamp,
            req.body.timeout_ms) == ("t", 1, -2, 2500)


def test_metadata_v13_response_ends_with_its_top_level_error():
    req = kc.decode_request(request_v2(kc.METADATA, 13, 6) + NULL_ARRAY + b"\x00\x00" + TAGS)
    assert req.body.topics is None
    R = kc.response_class(kc.METADATA, 13)
    resp = R(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(
        node_id=1, host="h", port=9092, rack=None)], cluster_id="c", controller_id=1,
        topics=[], error_code=0)
    want = (struct.pack(">i", 0) + carray([struct.pack(">i", 1) + cstr("h")
                                           + struct.pack(">i", 9092) + b"\x00" + TAGS])
            + cstr("c") + struct.pack(">i", 1) + carray([]) + struct.pack(">h", 0) + TAGS)
    assert kc.encode_response(req, resp) == response_v1(6, want)


def test_describe_groups_v6_names_a_missing_group_with_a_message():
    req = kc.decode_request(request_v2(kc.DESCRIBE_GROUPS, 6, 7)
                            + carray([cstr("g")]) + b"\x00" + TAGS)
    assert list(req.body.groups) == ["g"]
    R = kc.response_class(kc.DESCRIBE_GROUPS, 6)
    resp = R(throttle_time_ms=0, groups=[R.DescribedGroup(
        error_code=69, error_message="Group g not found.", group_id="g", group_state="Dead",
        protocol_type="", protocol_data="", members=[],
        authorized_operations=None)])  # (not asked: INT32_MIN on the wire)
    want = struct.pack(">i", 0) + carray([
        struct.pack(">h", 69) + cstr("Group g not found.") + cstr("g") + cstr("Dead")
        + cstr("") + cstr("") + carray([]) + struct.pack(">i", -(1 << 31)) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(7, want)


def test_delete_groups_v2_and_offset_delete_v0_bytes():
    req = kc.decode_request(request_v2(kc.DELETE_GROUPS, 2, 8) + carray([cstr("a"), cstr("b")])
                            + TAGS)
    assert list(req.body.groups_names) == ["a", "b"]
    R = kc.response_class(kc.DELETE_GROUPS, 2)
    resp = R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id="a", error_code=0),
                                          R.DeletableGroupResult(group_id="b", error_code=68)])
    want = struct.pack(">i", 0) + carray([cstr("a") + struct.pack(">h", 0) + TAGS,
                                          cstr("b") + struct.pack(">h", 68) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(8, want)

    def s(x):
        return struct.pack(">h", len(x)) + x.encode()
    frame = (struct.pack(">hhi", kc.OFFSET_DELETE, 0, 9) + s("c") + s("g")
             + struct.pack(">i", 1) + s("t") + struct.pack(">ii", 1, 3))
    req = kc.decode_request(frame)
    [t] = req.body.topics
    assert (req.body.group_id, t.name, t.partitions[0].partition_index) == ("g", "t", 3)
    R = kc.response_class(kc.OFFSET_DELETE, 0)
    T = R.OffsetDeleteResponseTopic
    resp = R(error_code=0, throttle_time_ms=0, topics=[T(name="t", partitions=[
        T.OffsetDeleteResponsePartition(partition_index=3, error_code=86)])])
    want = (struct.pack(">i", 9) + struct.pack(">hi", 0, 0) + struct.pack(">i", 1) + s("t")
            + struct.pack(">iih", 1, 3, 86))
    assert kc.encode_response(req, resp) == struct.pack(">i", len(want)) + want


def test_elect_leaders_v2_bytes_and_a_null_partition_list():
    body = struct.pack(">b", 1) + carray([cstr("t") + carray([struct.pack(">i", 0)]) + TAGS])
    req = kc.decode_request(request_v2(kc.ELECT_LEADERS, 2, 10) + body
                            + struct.pack(">i", 5000) + TAGS)
    [t] = req.body.topic_partitions
    assert (req.body.election_type, t.topic, list(t.partitions), req.body.timeout_ms) == (
        1, "t", [0], 5000)
    every = kc.decode_request(request_v2(kc.ELECT_LEADERS, 2, 11) + struct.pack(">b", 0)
                              + NULL_ARRAY + struct.pack(">i", 5000) + TAGS)
    assert every.body.topic_partitions is None
    R = kc.response_class(kc.ELECT_LEADERS, 2)
    E = R.ReplicaElectionResult
    resp = R(throttle_time_ms=0, error_code=0, replica_election_results=[E(
        topic="t", partition_result=[E.PartitionResult(partition_id=0, error_code=84,
                                                       error_message=None)])])
    want = struct.pack(">ih", 0, 0) + carray([cstr("t") + carray([
        struct.pack(">ih", 0, 84) + b"\x00" + TAGS]) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(10, want)


def test_describe_topic_partitions_v0_request_cursor_and_response_next_cursor():
    cursor = b"\x01" + cstr("t") + struct.pack(">i", 2) + TAGS  # a present nullable struct
    req = kc.decode_request(request_v2(kc.DESCRIBE_TOPIC_PARTITIONS, 0, 12)
                            + carray([cstr("t") + TAGS]) + struct.pack(">i", 1) + cursor + TAGS)
    assert ([t.name for t in req.body.topics], req.body.response_partition_limit,
            req.body.cursor.topic_name, req.body.cursor.partition_index) == (["t"], 1, "t", 2)
    R = kc.response_class(kc.DESCRIBE_TOPIC_PARTITIONS, 0)
    T = R.DescribeTopicPartitionsResponseTopic
    tid = uuid.UUID(int=7)
    resp = R(throttle_time_ms=0, topics=[T(
        error_code=0, name="t", topic_id=tid, is_internal=False, partitions=[
            T.DescribeTopicPartitionsResponsePartition(
                error_code=0, partition_index=2, leader_id=1, leader_epoch=3,
                replica_nodes=[1, 2], isr_nodes=[1], eligible_leader_replicas=[],
                last_known_elr=[], offline_replicas=[2])],
        topic_authorized_operations=-(1 << 31))],
        next_cursor=R.Cursor(topic_name="t", partition_index=3))
    ints = lambda *xs: carray([struct.pack(">i", x) for x in xs])  # noqa: E731
    want = struct.pack(">i", 0) + carray([
        struct.pack(">h", 0) + cstr("t") + tid.bytes + b"\x00" + carray([
            struct.pack(">hiii", 0, 2, 1, 3) + ints(1, 2) + ints(1) + ints() + ints()
            + ints(2) + TAGS]) + struct.pack(">i", -(1 << 31)) + TAGS]) \
        + b"\x01" + cstr("t") + struct.pack(">i", 3) + TAGS + TAGS
    assert kc.encode_response(req, resp) == response_v1(12, want)


def test_describe_log_dirs_v4_response_bytes():
    req = kc.decode_request(request_v2(kc.DESCRIBE_LOG_DIRS, 4, 13) + NULL_ARRAY + TAGS)
    assert req.body.topics is None
    R = kc.response_class(kc.DESCRIBE_LOG_DIRS, 4)
    D = R.DescribeLogDirsResult
    T = D.DescribeLogDirsTopic
    resp = R(throttle_time_ms=0, error_code=0, results=[D(
        error_code=0, log_dir="/d", total_bytes=-1, usable_bytes=-1, topics=[T(
            name="t", partitions=[T.DescribeLogDirsPartition(
                partition_index=0, partition_size=120, offset_lag=0, is_future_key=False)])])])
    want = struct.pack(">ih", 0, 0) + carray([
        struct.pack(">h", 0) + cstr("/d") + carray([cstr("t") + carray([
            struct.pack(">iqq", 0, 120, 0) + b"\x00" + TAGS]) + TAGS])
        + struct.pack(">qq", -1, -1) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(13, want)


def test_alter_partition_reassignments_v0_v1_bytes_and_a_null_target():
    """v1 puts AllowReplicationFactorChange after the timeout (request) and after the
    throttle time (response); a null replica list cancels."""
    def ints(*xs):
        return carray([struct.pack(">i", x) for x in xs])
    topics = carray([cstr("t") + carray([struct.pack(">i", 0) + ints(3, 1) + TAGS,
                                         struct.pack(">i", 1) + NULL_ARRAY + TAGS]) + TAGS])
    req0 = kc.decode_request(request_v2(kc.ALTER_PARTITION_REASSIGNMENTS, 0, 12)
                             + struct.pack(">i", 30000) + topics + TAGS)
    req1 = kc.decode_request(request_v2(kc.ALTER_PARTITION_REASSIGNMENTS, 1, 13)
                             + struct.pack(">i", 30000) + b"\x00" + topics + TAGS)
    for req in (req0, req1):
        [t] = req.body.topics
        assert (req.body.timeout_ms, t.name) == (30000, "t")
        assert [(p.partition_index, None if p.replicas is None else list(p.replicas))
                for p in t.partitions] == [(0, [3, 1]), (1, None)]
    assert req1.body.allow_replication_factor_change is False
    R = kc.response_class(kc.ALTER_PARTITION_REASSIGNMENTS, 1)
    T = R.ReassignableTopicResponse
    resp = R(throttle_time_ms=0, allow_replication_factor_change=False, error_code=0,
             error_message=None, responses=[T(name="t", partitions=[
                 T.ReassignablePartitionResponse(partition_index=1, error_code=85,
                                                 error_message="none")])])
    want = (struct.pack(">i", 0) + b"\x00" + struct.pack(">h", 0) + NULL_ARRAY
            + carray([cstr("t") + carray([struct.pack(">ih", 1, 85) + cstr("none") + TAGS])
                      + TAGS]) + TAGS)
    assert kc.encode_response(req1, resp) == response_v1(13, want)


def test_list_partition_reassignments_v0_bytes():
    every = kc.decode_request(request_v2(kc.LIST_PARTITION_REASSIGNMENTS, 0, 14)
                              + struct.pack(">i", 1000) + NULL_ARRAY + TAGS)
    assert every.body.topics is None
    named = kc.decode_request(request_v2(kc.LIST_PARTITION_REASSIGNMENTS, 0, 15)
                              + struct.pack(">i", 1000)
                              + carray([cstr("t") + carray([struct.pack(">i", 2)]) + TAGS])
                              + TAGS)
    assert [(t.name, list(t.partition_indexes)) for t in named.body.topics] == [("t", [2])]
    R = kc.response_class(kc.LIST_PARTITION_REASSIGNMENTS, 0)
    T = R.OngoingTopicReassignment
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, topics=[T(
        name="t", partitions=[T.OngoingPartitionReassignment(
            partition_index=2, replicas=[3, 1, 2], adding_replicas=[3],
            removing_replicas=[2])])])

    def ints(*xs):
        return carray([struct.pack(">i", x) for x in xs])
    want = (struct.pack(">ih", 0, 0) + NULL_ARRAY + carray([cstr("t") + carray([
        struct.pack(">i", 2) + ints(3, 1, 2) + ints(3) + ints(2) + TAGS]) + TAGS]) + TAGS)
    assert kc.encode_response(named, resp) == response_v1(15, want)


def test_api_versions_v3_tags_its_feature_levels_and_update_features_v2_bytes():
    """ApiVersions v3+ carries the feature levels (KIP-584) as tagged fields 0 (supported),
    1 (the finalized levels' epoch) and 2 (finalized, min and max both the level);
    UpdateFeatures v2 answers with no per-feature rows."""
    req = kc.decode_request(request_v2(kc.API_VERSIONS, 3, 16) + cstr("c") + cstr("1") + TAGS)
    out = kc.encode_response(req, kc.api_versions_body(
        3, features=({"metadata.version": (7, 21)}, {"metadata.version": 21}, 42)))
    keys = sorted(kc.SUPPORTED.items())
    supported = carray([cstr("metadata.version") + struct.pack(">hh", 7, 21) + TAGS])
    finalized = carray([cstr("metadata.version") + struct.pack(">hh", 21, 21) + TAGS])
    epoch = struct.pack(">q", 42)
    tagged = (b"\x03" + b"\x00" + bytes([len(supported)]) + supported
              + b"\x01" + bytes([len(epoch)]) + epoch
              + b"\x02" + bytes([len(finalized)]) + finalized)
    want = struct.pack(">ih", 16, 0) + carray([struct.pack(">hhh", k, lo, hi) + TAGS
                                               for k, (lo, hi, _, _) in keys])
    want += struct.pack(">i", 0) + tagged
    assert out == struct.pack(">i", len(want)) + want
    body = (struct.pack(">i", 5000) + carray([cstr("metadata.version")
                                              + struct.pack(">hb", 21, 1) + TAGS])
            + b"\x01" + TAGS)
    upd = kc.decode_request(request_v2(kc.UPDATE_FEATURES, 2, 17) + body)
    [u] = upd.body.feature_updates
    assert (u.feature, u.max_version_level, u.upgrade_type, upd.body.validate_only) == (
        "metadata.version", 21, 1, True)
    R = kc.response_class(kc.UPDATE_FEATURES, 2)
    resp = R(throttle_time_ms=0, error_code=95, error_message="no")
    want = struct.pack(">ih", 0, 95) + cstr("no") + TAGS
    assert kc.encode_response(upd, resp) == response_v1(17, want)


def test_describe_client_quotas_v1_request_and_response_bytes():
    """DescribeClientQuotas v1 (flexible): components (type, match type int8, nullable match)
    and strict; the answer's entries nullable, each value a float64."""
    body = carray([cstr("user") + struct.pack(">b", 0) + cstr("alice") + TAGS,
                   cstr("client-id") + struct.pack(">b", 2) + cstr(None) + TAGS]) + b"\x01" + TAGS
    req = kc.decode_request(request_v2(kc.DESCRIBE_CLIENT_QUOTAS, 1, 12) + body)
    assert [(c.entity_type, c.match_type, c.match) for c in req.body.components] == [
        ("user", 0, "alice"), ("client-id", 2, None)] and req.body.strict is True
    R = kc.response_class(kc.DESCRIBE_CLIENT_QUOTAS, 1)
    E = R.EntryData
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, entries=[E(
        entity=[E.EntityData(entity_type="user", entity_name="alice")],
        values=[E.ValueData(key="producer_byte_rate", value=1024.0)])])
    want = struct.pack(">ih", 0, 0) + cstr(None) + carray([
        carray([cstr("user") + cstr("alice") + TAGS])
        + carray([cstr("producer_byte_rate") + struct.pack(">d", 1024.0) + TAGS]) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(12, want)
    refused = R(throttle_time_ms=0, error_code=42, error_message="bad", entries=None)
    want = struct.pack(">ih", 0, 42) + cstr("bad") + NULL_ARRAY + TAGS
    assert kc.encode_response(req, refused) == response_v1(12, want)


def test_alter_client_quotas_v0_request_and_response_bytes():
    """AlterClientQuotas v0 (not flexible): entries of an entity (nullable names) and ops
    (key, float64 value, remove), then validate_only; per entity an error and its message."""
    def s(x):
        return b"\xff\xff" if x is None else struct.pack(">h", len(x)) + x.encode()
    body = struct.pack(">i", 1) + struct.pack(">i", 1) + s("user") + s(None)
    body += struct.pack(">i", 1) + s("request_percentage") + struct.pack(">d", 12.5) + b"\x00"
    body += b"\x01"
    frame = struct.pack(">hhi", kc.ALTER_CLIENT_QUOTAS, 0, 13) + s("c") + body
    req = kc.decode_request(frame)
    [entry] = req.body.entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", None)]
    assert [(o.key, o.value, o.remove) for o in entry.ops] == [("request_percentage", 12.5, False)]
    assert req.body.validate_only is True
    R = kc.response_class(kc.ALTER_CLIENT_QUOTAS, 0)
    E = R.EntryData
    resp = R(throttle_time_ms=0, entries=[E(error_code=42, error_message="Invalid",
                                           entity=[E.EntityData(entity_type="user",
                                                                entity_name=None)])])
    want = struct.pack(">ii", 13, 0) + struct.pack(">i", 1) + struct.pack(">h", 42) + s("Invalid")
    want += struct.pack(">i", 1) + s("user") + s(None)
    assert kc.encode_response(req, resp) == struct.pack(">i", len(want)) + want
