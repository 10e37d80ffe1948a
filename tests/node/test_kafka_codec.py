"""The Kafka codec against bytes written out by hand from Kafka's protocol guide."""
import struct

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import MetadataResponse

from node_image import kafka_codec as kc
from node_image import records


def string(s: str | None) -> bytes:
    if s is None:
        return b"\xff\xff"
    return struct.pack(">h", len(s)) + s.encode()


def header(api_key: int, version: int, correlation_id: int, client_id: str) -> bytes:
    return struct.pack(">hhi", api_key, version, correlation_id) + string(client_id)


def test_api_versions_v0_request_decodes():
    frame = header(18, 0, 7, "golden")
    req = kc.decode_request(frame)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (18, 0, 7, "golden")


def test_api_versions_v0_response_bytes():
    req = kc.decode_request(header(18, 0, 7, "golden"))
    out = kc.encode_response(req, kc.api_versions_body(0))
    keys = sorted(kc.SUPPORTED.items())
    body = struct.pack(">ihi", 7, 0, len(keys))  # correlation id, error, array length
    body += b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi, _, _) in keys)
    assert out == struct.pack(">i", len(body)) + body
    assert (0, 3, 12) in [(k, lo, hi) for k, (lo, hi, _, _) in keys]  # Produce v3-12


def test_produce_v3_request_decodes_with_records_as_sent():
    batch = records.build_batch(0, 0, [(b"k", b"v")], 1234)
    frame = header(0, 3, 9, "p")
    frame += string(None) + struct.pack(">hi", -1, 1000)  # transactional id, acks, timeout
    frame += struct.pack(">i", 1) + string("t")  # one topic
    frame += struct.pack(">i", 1) + struct.pack(">i", 2)  # one partition: index 2
    frame += struct.pack(">i", len(batch)) + batch
    req = kc.decode_request(frame)
    body = req.body
    assert (body.acks, body.timeout_ms, body.transactional_id) == (-1, 1000, None)
    [td] = body.topic_data
    [pd] = td.partition_data
    assert (td.name, pd.index, bytes(pd.records)) == ("t", 2, batch)


def test_metadata_v1_response_bytes():
    req = kc.decode_request(header(3, 1, 5, "m") + struct.pack(">i", -1))  # topics null: all
    assert req.body.topics is None
    R = MetadataResponse[1]
    T = R.MetadataResponseTopic
    resp = R(brokers=[R.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None)],
             controller_id=1, topics=[T(error_code=0, name="t", is_internal=False, partitions=[
                 T.MetadataResponsePartition(error_code=0, partition_index=0, leader_id=1,
                                             replica_nodes=[1, 2], isr_nodes=[1])])])
    out = kc.encode_response(req, resp)
    body = struct.pack(">i", 5)
    body += struct.pack(">i", 1) + struct.pack(">i", 1) + string("h") + struct.pack(">i", 9092) + string(None)
    body += struct.pack(">i", 1)  # controller id
    body += struct.pack(">i", 1) + struct.pack(">h", 0) + string("t") + b"\x00"  # topic, not internal
    body += struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 1)  # partition: error, index, leader
    body += struct.pack(">iii", 2, 1, 2) + struct.pack(">ii", 1, 1)  # replicas [1,2], isr [1]
    assert out == struct.pack(">i", len(body)) + body


def test_fetch_v4_response_bytes_carry_stored_batches_unchanged():
    batch = records.build_batch(10, 3, [(None, b"x")], 99)
    req = kc.decode_request(header(1, 4, 11, "f") + struct.pack(">iiiib", -1, 500, 1, 1 << 20, 0)
                            + struct.pack(">i", 0))  # no topics
    R = FetchResponse[4]
    T = R.FetchableTopicResponse
    resp = R(throttle_time_ms=0, responses=[T(topic="t", partitions=[T.PartitionData(
        partition_index=0, error_code=0, high_watermark=11, last_stable_offset=11,
        aborted_transactions=[], records=batch)])])
    out = kc.encode_response(req, resp)
    body = struct.pack(">ii", 11, 0)  # correlation id, throttle
    body += struct.pack(">i", 1) + string("t") + struct.pack(">i", 1)
    body += struct.pack(">ihqq", 0, 0, 11, 11) + struct.pack(">i", 0)  # no aborted txns
    body += struct.pack(">i", len(batch)) + batch
    assert out == struct.pack(">i", len(body)) + body


def test_newer_api_versions_gets_a_v0_answer_with_unsupported_version():
    frame = header(18, 9, 3, "new")
    with pytest.raises(kc.RequestError) as e:
        kc.decode_request(frame)
    resp = e.value.response
    assert resp is not None
    corr, error = struct.unpack_from(">ih", resp, 4)
    assert (corr, error) == (3, kc.UNSUPPORTED_VERSION)


@pytest.mark.parametrize("frame, words", [
    (header(999, 0, 1, "x"), "unknown api key 999"),
    (header(0, 2, 1, "x"), "Produce v2 is not supported"),
    (header(1, 11, 1, "x")[:6], "needs 8 bytes"),
    (header(3, 1, 1, "x") + b"\x00", "malformed Metadata v1"),
    # a Produce whose topic array length is -1 (null), which Kafka's schema forbids
    (header(0, 3, 1, "x") + string(None) + struct.pack(">hii", 1, 10, -1), "topic_data is null"),
])
def test_bad_requests_name_what_is_wrong_and_get_no_answer(frame, words):
    with pytest.raises(kc.RequestError) as e:
        kc.decode_request(frame)
    assert words in str(e.value)
    assert e.value.response is None


def test_init_producer_id_v4_flexible_request_and_response_bytes():
    """KIP-360's InitProducerId (v3+ carries the caller's producer id and epoch), in its
    flexible encoding: compact strings and tagged-field sections in header and body."""
    frame = struct.pack(">hhi", 22, 4, 11) + string("p") + b"\x00"  # request header v2
    frame += bytes([len("tx") + 1]) + b"tx"  # compact nullable string
    frame += struct.pack(">iqh", 60_000, 7000, 3) + b"\x00"  # timeout, id, epoch, no tags
    req = kc.decode_request(frame)
    body = req.body
    assert (req.api_version, req.client_id) == (4, "p")
    assert (body.transactional_id, body.transaction_timeout_ms, body.producer_id,
            body.producer_epoch) == ("tx", 60_000, 7000, 3)
    resp = kc.response_class(22, 4)(throttle_time_ms=0, error_code=90, producer_id=-1,
                                    producer_epoch=-1)
    out = kc.encode_response(req, resp)
    want = struct.pack(">i", 11) + b"\x00"  # response header v1: correlation id, no tags
    want += struct.pack(">ihqh", 0, 90, -1, -1) + b"\x00"
    assert out == struct.pack(">i", len(want)) + want


def test_delete_records_v2_flexible_request_and_response_bytes():
    """DeleteRecords v2, flexible: compact arrays and strings, a tagged-field section after
    each struct, in header and body."""
    frame = struct.pack(">hhi", 21, 2, 12) + string("a") + b"\x00"  # request header v2
    frame += bytes([2]) + bytes([len("t") + 1]) + b"t"  # one topic, compact name
    frame += bytes([2]) + struct.pack(">iq", 0, 40) + b"\x00"  # one partition: 0 up to 40
    frame += b"\x00" + struct.pack(">i", 30_000) + b"\x00"  # topic's tags, timeout, tags
    req = kc.decode_request(frame)
    [topic] = req.body.topics
    [part] = topic.partitions
    assert (topic.name, part.partition_index, part.offset, req.body.timeout_ms) == (
        "t", 0, 40, 30_000)
    R = kc.response_class(21, 2)
    T = R.DeleteRecordsTopicResult
    resp = R(throttle_time_ms=0, topics=[T(name="t", partitions=[
        T.DeleteRecordsPartitionResult(partition_index=0, low_watermark=40, error_code=0)])])
    want = struct.pack(">i", 12) + b"\x00"  # response header v1
    want += struct.pack(">i", 0) + bytes([2]) + bytes([2]) + b"t"
    want += bytes([2]) + struct.pack(">iqh", 0, 40, 0) + b"\x00" + b"\x00" + b"\x00"
    assert kc.encode_response(req, resp) == struct.pack(">i", len(want)) + want


def test_offset_for_leader_epoch_v4_flexible_request_and_response_bytes():
    """OffsetForLeaderEpoch v4 (Kafka 4 answers v2-v4), flexible: the replica id (-1, a
    consumer), each partition's current leader epoch and the epoch asked for; the answer's
    epoch and its end offset."""
    frame = struct.pack(">hhi", 23, 4, 13) + string("c") + b"\x00"  # request header v2
    frame += struct.pack(">i", -1)  # replica id
    frame += bytes([2]) + bytes([len("t") + 1]) + b"t"  # one topic, compact name
    frame += bytes([2]) + struct.pack(">iii", 1, 5, 3) + b"\x00"  # partition 1: current 5, epoch 3
    frame += b"\x00" + b"\x00"  # the topic's tags, the body's
    req = kc.decode_request(frame)
    [topic] = req.body.topics
    [part] = topic.partitions
    assert (req.body.replica_id, topic.topic, part.partition, part.current_leader_epoch,
            part.leader_epoch) == (-1, "t", 1, 5, 3)
    R = kc.response_class(23, 4)
    T = R.OffsetForLeaderTopicResult
    resp = R(throttle_time_ms=0, topics=[T(topic="t", partitions=[
        T.EpochEndOffset(error_code=0, partition=1, leader_epoch=3, end_offset=120)])])
    want = struct.pack(">i", 13) + b"\x00"  # response header v1
    want += struct.pack(">i", 0) + bytes([2]) + bytes([2]) + b"t"
    want += bytes([2]) + struct.pack(">hiiq", 0, 1, 3, 120) + b"\x00" + b"\x00" + b"\x00"
    assert kc.encode_response(req, resp) == struct.pack(">i", len(want)) + want


# The flexible versions (KIP-482): a request header v2 (its client id still a plain string)
# and a response header v1 end in a tagged-field section; strings, bytes and arrays are
# compact (length + 1 as an unsigned varint, 0 for null); every struct ends in its own
# tagged-field section. Tags are empty here: one zero byte.
TAGS = b"\x00"


def cstr(s: str | None) -> bytes:
    return b"\x00" if s is None else bytes([len(s) + 1]) + s.encode()


def cbytes(b: bytes) -> bytes:
    return bytes([len(b) + 1]) + b


def carray(items: list[bytes]) -> bytes:
    return bytes([len(items) + 1]) + b"".join(items)


def request_v2(api_key: int, version: int, correlation_id: int) -> bytes:
    return struct.pack(">hhi", api_key, version, correlation_id) + string("c") + TAGS


def response_v1(correlation_id: int, body: bytes) -> bytes:
    frame = struct.pack(">i", correlation_id) + TAGS + body
    return struct.pack(">i", len(frame)) + frame


def test_find_coordinator_v4_batches_keys_in_request_and_response():
    """FindCoordinator v4 (KIP-699): a key type and many keys; one coordinator per key."""
    req = kc.decode_request(request_v2(10, 4, 21) + b"\x00" + carray([cstr("g1"), cstr("")])
                            + TAGS)
    assert (req.body.key_type, req.body.coordinator_keys) == (0, ["g1", ""])
    R = kc.response_class(10, 4)
    resp = R(throttle_time_ms=0, coordinators=[
        R.Coordinator(key="g1", node_id=2, host="h2", port=9092, error_code=0,
                      error_message=None),
        R.Coordinator(key="", node_id=-1, host="", port=-1, error_code=42,
                      error_message="empty")])
    want = struct.pack(">i", 0) + carray([
        cstr("g1") + struct.pack(">i", 2) + cstr("h2") + struct.pack(">ih", 9092, 0) + cstr(None)
        + TAGS,
        cstr("") + struct.pack(">i", -1) + cstr("") + struct.pack(">ih", -1, 42) + cstr("empty")
        + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(21, want)


def test_join_group_v9_request_and_response_bytes():
    """JoinGroup v9: a reason in the request (v8+); the group's protocol type (v7+) and
    skip_assignment (v9) in the answer."""
    body = (cstr("grp") + struct.pack(">ii", 10_000, 20_000) + cstr("m-1") + cstr(None)
            + cstr("consumer") + carray([cstr("range") + cbytes(b"sub") + TAGS])
            + cstr("because") + TAGS)
    req = kc.decode_request(request_v2(11, 9, 22) + body)
    b = req.body
    assert (b.group_id, b.session_timeout_ms, b.rebalance_timeout_ms, b.member_id,
            b.group_instance_id, b.protocol_type, b.reason) == (
        "grp", 10_000, 20_000, "m-1", None, "consumer", "because")
    assert [(p.name, bytes(p.metadata)) for p in b.protocols] == [("range", b"sub")]
    R = kc.response_class(11, 9)
    resp = R(throttle_time_ms=0, error_code=0, generation_id=3, protocol_type="consumer",
             protocol_name="range", leader="m-1", skip_assignment=False, member_id="m-1",
             members=[R.JoinGroupResponseMember(member_id="m-1", group_instance_id=None,
                                                metadata=b"sub")])
    want = (struct.pack(">ihi", 0, 0, 3) + cstr("consumer") + cstr("range") + cstr("m-1")
            + b"\x00" + cstr("m-1") + carray([cstr("m-1") + cstr(None) + cbytes(b"sub") + TAGS])
            + TAGS)
    assert kc.encode_response(req, resp) == response_v1(22, want)


def test_sync_group_v5_and_heartbeat_v4_bytes():
    """SyncGroup v5 names the protocol type and name both ways (KIP-559); Heartbeat v4 is
    v3 made flexible."""
    body = (cstr("grp") + struct.pack(">i", 3) + cstr("m-1") + cstr(None) + cstr("consumer")
            + cstr("range") + carray([cstr("m-1") + cbytes(b"A") + TAGS]) + TAGS)
    req = kc.decode_request(request_v2(14, 5, 23) + body)
    b = req.body
    assert (b.generation_id, b.protocol_type, b.protocol_name) == (3, "consumer", "range")
    assert [(a.member_id, bytes(a.assignment)) for a in b.assignments] == [("m-1", b"A")]
    resp = kc.response_class(14, 5)(throttle_time_ms=0, error_code=0, protocol_type="consumer",
                                    protocol_name="range", assignment=b"A")
    want = struct.pack(">ih", 0, 0) + cstr("consumer") + cstr("range") + cbytes(b"A") + TAGS
    assert kc.encode_response(req, resp) == response_v1(23, want)
    hb = kc.decode_request(request_v2(12, 4, 24) + cstr("grp") + struct.pack(">i", 3)
                           + cstr("m-1") + cstr(None) + TAGS)
    assert (hb.body.group_id, hb.body.generation_id, hb.body.member_id) == ("grp", 3, "m-1")
    out = kc.encode_response(hb, kc.response_class(12, 4)(throttle_time_ms=0, error_code=27))
    assert out == response_v1(24, struct.pack(">ih", 0, 27) + TAGS)


def test_consumer_group_heartbeat_v0_and_v1_bytes():
    """KIP-848's ConsumerGroupHeartbeat: v0 and v1 (v1 adds the topic regex after the topic
    names), flexible; owned partitions and the assignment by topic id."""
    topic = bytes(range(16))
    owned = carray([topic + carray([struct.pack(">i", 2)]) + TAGS])
    common = (cstr("grp") + cstr("m1") + struct.pack(">i", 4) + cstr(None) + cstr("rack")
              + struct.pack(">i", 300_000) + carray([cstr("t")]))
    v0 = kc.decode_request(request_v2(68, 0, 31) + common + cstr("uniform") + owned + TAGS)
    v1 = kc.decode_request(request_v2(68, 1, 32) + common + cstr("") + cstr(None) + owned
                           + TAGS)
    for req in (v0, v1):
        b = req.body
        assert (b.group_id, b.member_id, b.member_epoch, b.instance_id, b.rack_id,
                b.rebalance_timeout_ms, list(b.subscribed_topic_names)) == (
            "grp", "m1", 4, None, "rack", 300_000, ["t"])
        assert [(str(tp.topic_id), list(tp.partitions)) for tp in b.topic_partitions] == [
            ("00010203-0405-0607-0809-0a0b0c0d0e0f", [2])]
    assert (v0.body.server_assignor, v1.body.subscribed_topic_regex,
            v1.body.server_assignor) == ("uniform", "", None)
    R = kc.response_class(68, 1)
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m1",
             member_epoch=5, heartbeat_interval_ms=5000, assignment=R.Assignment(
                 topic_partitions=[R.Assignment.TopicPartitions(
                     topic_id="00010203-0405-0607-0809-0a0b0c0d0e0f", partitions=[2, 3])]))
    want = (struct.pack(">ih", 0, 0) + cstr(None) + cstr("m1") + struct.pack(">ii", 5, 5000)
            + b"\x01" + carray([topic + carray([struct.pack(">i", 2), struct.pack(">i", 3)]) + TAGS])
            + TAGS + TAGS)
    assert kc.encode_response(v1, resp) == response_v1(32, want)
    fenced = R(throttle_time_ms=0, error_code=110, error_message="x", member_id=None,
               member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    want = struct.pack(">ih", 0, 110) + cstr("x") + cstr(None) + struct.pack(">ii", 0, 0)
    assert kc.encode_response(v0, fenced) == response_v1(31, want + b"\xff" + TAGS)


def test_consumer_group_describe_v0_bytes():
    """ConsumerGroupDescribe v0: group ids in, each group with its epochs, assignor and
    members out; authorized operations INT32_MIN when not asked for."""
    req = kc.decode_request(request_v2(69, 0, 33) + carray([cstr("g1")]) + b"\x00" + TAGS)
    assert (list(req.body.group_ids), req.body.include_authorized_operations) == (["g1"], False)
    R = kc.response_class(69, 0)
    resp = R(throttle_time_ms=0, groups=[R.DescribedGroup(
        error_code=69, error_message="gone", group_id="g1", group_state="Dead", group_epoch=-1,
        assignment_epoch=-1, assignor_name="", members=[], authorized_operations=-(1 << 31))])
    want = (struct.pack(">i", 0) + carray([struct.pack(">h", 69) + cstr("gone") + cstr("g1")
                                           + cstr("Dead") + struct.pack(">ii", -1, -1)
                                           + cstr("") + carray([])
                                           + struct.pack(">i", -(1 << 31)) + TAGS]) + TAGS)
    assert kc.encode_response(req, resp) == response_v1(33, want)


def test_offset_fetch_v8_batches_groups_and_require_stable():
    """OffsetFetch v8 (KIP-709): groups, each with its topics (null: all) and its own error;
    require_stable (v7+, KIP-447)."""
    body = (carray([cstr("g1") + carray([cstr("t") + carray([struct.pack(">i", 0)]) + TAGS])
                    + TAGS, cstr("g2") + b"\x00" + TAGS]) + b"\x01" + TAGS)
    req = kc.decode_request(request_v2(9, 8, 25) + body)
    g1, g2 = req.body.groups
    assert (g1.group_id, [(t.name, t.partition_indexes) for t in g1.topics]) == ("g1", [("t", [0])])
    assert (g2.group_id, g2.topics, req.body.require_stable) == ("g2", None, True)
    R = kc.response_class(9, 8)
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    resp = R(throttle_time_ms=0, groups=[
        G(group_id="g1", error_code=0, topics=[T(name="t", partitions=[
            T.OffsetFetchResponsePartitions(partition_index=0, committed_offset=17,
                                            committed_leader_epoch=-1, metadata="",
                                            error_code=88)])]),
        G(group_id="g2", error_code=16, topics=[])])
    want = struct.pack(">i", 0) + carray([
        cstr("g1") + carray([cstr("t") + carray([struct.pack(">iqi", 0, 17, -1) + cstr("")
                                                 + struct.pack(">h", 88) + TAGS]) + TAGS])
        + struct.pack(">h", 0) + TAGS,
        cstr("g2") + carray([]) + struct.pack(">h", 16) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(25, want)


def test_offset_commit_v9_and_txn_offset_commit_v3_carry_member_and_generation():
    """OffsetCommit v9 (its generation field read as a classic group's generation) and
    TxnOffsetCommit v3 (KIP-447: the member and generation, for the coordinator to check)."""
    parts = carray([cstr("t") + carray([struct.pack(">iqi", 1, 40, 5) + cstr(None) + TAGS])
                    + TAGS])
    oc = kc.decode_request(request_v2(8, 9, 26) + cstr("grp") + struct.pack(">i", 3)
                           + cstr("m-1") + cstr(None) + parts + TAGS)
    b = oc.body
    assert (b.group_id, b.generation_id_or_member_epoch, b.member_id) == ("grp", 3, "m-1")
    [p] = b.topics[0].partitions
    assert (p.partition_index, p.committed_offset, p.committed_leader_epoch,
            p.committed_metadata) == (1, 40, 5, None)
    txn = kc.decode_request(request_v2(28, 3, 27) + cstr("tx") + cstr("grp")
                            + struct.pack(">qhi", 7000, 2, 3) + cstr("m-1") + cstr(None)
                            + parts + TAGS)
    b = txn.body
    assert (b.transactional_id, b.group_id, b.producer_id, b.producer_epoch, b.generation_id,
            b.member_id, b.group_instance_id) == ("tx", "grp", 7000, 2, 3, "m-1", None)


def test_end_txn_v4_add_offsets_v4_add_partitions_v3_and_init_producer_id_v5_bytes():
    """The transactional producer's requests in their newest versions a Kafka 4 broker takes
    from clients without KIP-890's second protocol."""
    end = kc.decode_request(request_v2(26, 4, 28) + cstr("tx") + struct.pack(">qh", 7000, 2)
                            + b"\x01" + TAGS)
    assert (end.body.transactional_id, end.body.producer_id, end.body.producer_epoch,
            end.body.committed) == ("tx", 7000, 2, True)
    out = kc.encode_response(end, kc.response_class(26, 4)(throttle_time_ms=0, error_code=48))
    assert out == response_v1(28, struct.pack(">ih", 0, 48) + TAGS)
    add = kc.decode_request(request_v2(25, 4, 29) + cstr("tx") + struct.pack(">qh", 7000, 2)
                            + cstr("grp") + TAGS)
    assert (add.body.transactional_id, add.body.group_id) == ("tx", "grp")
    parts = kc.decode_request(request_v2(24, 3, 30) + cstr("tx") + struct.pack(">qh", 7000, 2)
                              + carray([cstr("t") + carray([struct.pack(">i", 0),
                                                            struct.pack(">i", 2)]) + TAGS])
                              + TAGS)
    b = parts.body
    assert (b.v3_and_below_transactional_id,
            [(t.name, t.partitions) for t in b.v3_and_below_topics]) == ("tx", [("t", [0, 2])])
    init = kc.decode_request(request_v2(22, 5, 31) + cstr(None) + struct.pack(">iqh", -1, -1, -1)
                             + TAGS)
    assert (init.body.transactional_id, init.body.producer_id) == (None, -1)


def test_api_versions_v4_is_answered_with_a_v0_header():
    """ApiVersions v4 (as v3): the request is flexible, but the answer's header stays v0 (no
    tagged fields after the correlation id), so a client that does not know the broker can
    read it."""
    req = kc.decode_request(request_v2(18, 4, 32) + cstr("kcat") + cstr("1.7") + TAGS)
    assert (req.body.client_software_name, req.body.client_software_version) == ("kcat", "1.7")
    out = kc.encode_response(req, kc.api_versions_body(4))
    keys = sorted(kc.SUPPORTED.items())
    want = struct.pack(">ih", 32, 0) + carray([struct.pack(">hhh", k, lo, hi) + TAGS
                                               for k, (lo, hi, _, _) in keys])
    want += struct.pack(">i", 0) + TAGS
    assert out == struct.pack(">i", len(want)) + want


def test_list_offsets_v9_flexible_request_and_response_bytes():
    """ListOffsets v9 (v6+ flexible; -3 the greatest timestamp, -4 the local log start,
    -5 the latest tiered offset)."""
    body = (struct.pack(">ib", -1, 1) + carray([cstr("t") + carray([
        struct.pack(">iiq", 0, 4, -3) + TAGS]) + TAGS]) + TAGS)
    req = kc.decode_request(request_v2(2, 9, 33) + body)
    [t] = req.body.topics
    [p] = t.partitions
    assert (req.body.replica_id, req.body.isolation_level, t.name, p.partition_index,
            p.current_leader_epoch, p.timestamp) == (-1, 1, "t", 0, 4, -3)
    R = kc.response_class(2, 9)
    T = R.ListOffsetsTopicResponse
    resp = R(throttle_time_ms=0, topics=[T(name="t", partitions=[
        T.ListOffsetsPartitionResponse(partition_index=0, error_code=0, timestamp=5000,
                                       offset=1, leader_epoch=4)])])
    want = struct.pack(">i", 0) + carray([cstr("t") + carray([
        struct.pack(">ihqqi", 0, 0, 5000, 1, 4) + TAGS]) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(33, want)


def test_create_topics_v7_response_bytes():
    """CreateTopics v7 (v5+ flexible): the topic's id (v7), partitions, replication factor
    and configs (v5+) after the error."""
    import uuid
    body = (struct.pack(">i", 30_000) + b"\x00")  # no topics: timeout and validate_only
    req = kc.decode_request(request_v2(19, 7, 34) + carray([]) + body + TAGS)
    assert (req.body.topics, req.body.timeout_ms, req.body.validate_only) == ([], 30_000, False)
    R = kc.response_class(19, 7)
    C = R.CreatableTopicResult
    tid = uuid.UUID(int=(1 << 64) + 2)
    resp = R(throttle_time_ms=0, topics=[C(
        name="t", topic_id=tid, error_code=0, error_message=None, num_partitions=3,
        replication_factor=2, configs=[C.CreatableTopicConfigs(
            name="min.insync.replicas", value="2", read_only=False, config_source=1,
            is_sensitive=False)])])
    want = struct.pack(">i", 0) + carray([
        cstr("t") + struct.pack(">qq", 1, 2) + struct.pack(">h", 0) + cstr(None)
        + struct.pack(">ih", 3, 2) + carray([cstr("min.insync.replicas") + cstr("2")
                                             + b"\x00\x01\x00" + TAGS]) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(34, want)


def test_produce_v9_request_and_response_bytes():
    """Produce v9, flexible: compact strings and arrays, the records as compact bytes."""
    batch = records.build_batch(0, 0, [(b"k", b"v")], 1234)
    body = (cstr(None) + struct.pack(">hi", -1, 1000) + carray([
        cstr("t") + carray([struct.pack(">i", 2) + cbytes(batch) + TAGS]) + TAGS]) + TAGS)
    req = kc.decode_request(request_v2(0, 9, 35) + body)
    [td] = req.body.topic_data
    [pd] = td.partition_data
    assert (req.body.acks, td.name, pd.index, bytes(pd.records)) == (-1, "t", 2, batch)
    R = kc.response_class(0, 9)
    P = R.TopicProduceResponse.PartitionProduceResponse
    resp = R(throttle_time_ms=0, responses=[R.TopicProduceResponse(name="t", partition_responses=[
        P(index=2, error_code=0, base_offset=40, log_append_time_ms=-1, log_start_offset=0,
          record_errors=[], error_message=None)])])
    want = carray([cstr("t") + carray([
        struct.pack(">ihqqq", 2, 0, 40, -1, 0) + carray([]) + cstr(None) + TAGS]) + TAGS])
    want += struct.pack(">i", 0) + TAGS
    assert kc.encode_response(req, resp) == response_v1(35, want)


def test_fetch_v12_carries_the_last_fetched_epoch_and_answers_a_diverging_epoch():
    """Fetch v12 (flexible): each partition's last fetched epoch in the request; the
    diverging epoch (tag 0) in the answer of a client whose log diverged."""
    part = struct.pack(">iiqiqi", 0, 5, 40, 4, -1, 1 << 20) + TAGS
    body = (struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
            + carray([cstr("t") + carray([part]) + TAGS]) + carray([]) + cstr("") + TAGS)
    req = kc.decode_request(request_v2(1, 12, 36) + body)
    [t] = req.body.topics
    [p] = t.partitions
    assert (t.topic, p.partition, p.current_leader_epoch, p.fetch_offset,
            p.last_fetched_epoch) == ("t", 0, 5, 40, 4)
    R = kc.response_class(1, 12)
    P = R.FetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic="t", partitions=[P(
            partition_index=0, error_code=0, high_watermark=50, last_stable_offset=50,
            log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
            records=b"", diverging_epoch=P.EpochEndOffset(epoch=3, end_offset=37))])])
    diverging = struct.pack(">iq", 3, 37) + TAGS
    want = struct.pack(">ihi", 0, 0, 0) + carray([cstr("t") + carray([
        struct.pack(">ihqqq", 0, 0, 50, 50, 0) + b"\x00" + struct.pack(">i", -1) + cbytes(b"")
        + b"\x01\x00" + bytes([len(diverging)]) + diverging]) + TAGS]) + TAGS
    assert kc.encode_response(req, resp) == response_v1(36, want)


def tagged(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section holding ``(tag, value bytes)`` pairs (each small enough for
    one-byte varints)."""
    return bytes([len(fields)]) + b"".join(bytes([t, len(v)]) + v for t, v in fields)


def test_produce_v10_tells_a_producer_at_a_follower_where_the_leader_is():
    """Produce v10 (KIP-951): a NOT_LEADER_OR_FOLLOWER answer carries the partition's
    current leader and epoch (partition tag 0) and that leader's endpoint (tag 0 of the
    response), so the producer can retry without a Metadata round trip."""
    batch = records.build_batch(0, 0, [(b"k", b"v")], 1234)
    body = (cstr(None) + struct.pack(">hi", -1, 1000) + carray([
        cstr("t") + carray([struct.pack(">i", 1) + cbytes(batch) + TAGS]) + TAGS]) + TAGS)
    req = kc.decode_request(request_v2(0, 10, 37) + body)
    assert bytes(req.body.topic_data[0].partition_data[0].records) == batch
    R = kc.response_class(0, 10)
    P = R.TopicProduceResponse.PartitionProduceResponse
    resp = R(throttle_time_ms=0, responses=[R.TopicProduceResponse(name="t", partition_responses=[
        P(index=1, error_code=6, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
          record_errors=[], error_message=None,
          current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7))])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="h2", port=9092, rack=None)])
    leader = struct.pack(">ii", 2, 7) + TAGS
    endpoint = struct.pack(">i", 2) + cstr("h2") + struct.pack(">i", 9092) + cstr(None) + TAGS
    want = carray([cstr("t") + carray([
        struct.pack(">ihqqq", 1, 6, -1, -1, -1) + carray([]) + cstr(None)
        + tagged((0, leader))]) + TAGS])
    want += struct.pack(">i", 0) + tagged((0, carray([endpoint])))
    assert kc.encode_response(req, resp) == response_v1(37, want)


def test_fetch_v17_names_topics_by_id_and_answers_the_leader_hint():
    """Fetch v13+ names each topic by its id (KIP-516), v15+ moves the replica id into a
    tagged replica state (absent for a consumer), v17 may tag each partition with a
    replica directory id; the v16+ answer to a broker that does not lead carries the
    current leader (partition tag 1) and its endpoint (response tag 0)."""
    import uuid
    tid = uuid.UUID("0123456789abcdef0123456789abcdef")
    part = (struct.pack(">iiqiqi", 3, 5, 40, 4, -1, 1 << 20)
            + tagged((0, uuid.UUID(int=7).bytes)))
    body = (struct.pack(">iiibii", 500, 1, 1 << 20, 1, 0, -1)
            + carray([tid.bytes + carray([part]) + TAGS]) + carray([]) + cstr("") + TAGS)
    req = kc.decode_request(request_v2(1, 17, 38) + body)
    [t] = req.body.topics
    [p] = t.partitions
    assert (t.topic_id, p.partition, p.current_leader_epoch, p.fetch_offset,
            p.last_fetched_epoch, req.body.isolation_level) == (tid, 3, 5, 40, 4, 1)
    R = kc.response_class(1, 17)
    P = R.FetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic_id=tid, partitions=[P(
            partition_index=3, error_code=6, high_watermark=-1, last_stable_offset=-1,
            log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
            records=b"", current_leader=P.LeaderIdAndEpoch(leader_id=2, leader_epoch=7))])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="h2", port=9092, rack="r")])
    leader = struct.pack(">ii", 2, 7) + TAGS
    endpoint = struct.pack(">i", 2) + cstr("h2") + struct.pack(">i", 9092) + cstr("r") + TAGS
    want = struct.pack(">ihi", 0, 0, 0) + carray([tid.bytes + carray([
        struct.pack(">ihqqq", 3, 6, -1, -1, -1) + b"\x00" + struct.pack(">i", -1) + cbytes(b"")
        + tagged((1, leader))]) + TAGS]) + tagged((0, carray([endpoint])))
    assert kc.encode_response(req, resp) == response_v1(38, want)


# kafka-python's names where they are older than Kafka's, and the codes it does not know
KAFKA_PYTHON_NAMES = {0: "NO_ERROR", 6: "NOT_LEADER_FOR_PARTITION", 10: "MESSAGE_SIZE_TOO_LARGE",
                      17: "INVALID_TOPIC", 39: "INVALID_REPLICATION_ASSIGNMENT", 128: "UNKNOWN"}


def test_every_error_code_is_kafkas_code_for_its_name():
    """Each error the node can send carries Kafka's code for it (kafka-python's error table
    is generated from Kafka's), and no two names share a code."""
    import kafka.errors

    from node_image import messages as m
    names = [k for k, v in vars(m).items() if isinstance(v, int) and k.isupper()
             and k != "MAX_FRAME_BYTES"]
    codes = {getattr(m, k) for k in names}
    assert len(codes) == len(names), "two names share a code"
    for code, name in m.ERROR_NAMES.items():
        want = KAFKA_PYTHON_NAMES.get(code, name)
        assert kafka.errors.for_code(code).message == want, (code, name)


def test_the_consumer_group_protocol_is_advertised_only_with_metadata_that_names_topic_ids():
    """A broker capped below Metadata v12 does not offer KIP-848's APIs (a client asking
    for that protocol is told the broker lacks it, as by a Kafka without it); at v12 it
    does; either way a request sent is answered (the API stays in SUPPORTED)."""
    def offered(cap):
        body = kc.api_versions_body(3, caps={kc.METADATA: cap})
        return {k.api_key for k in body.api_keys}
    kip848 = {kc.CONSUMER_GROUP_HEARTBEAT, kc.CONSUMER_GROUP_DESCRIBE}
    assert not kip848 & offered(8) and not kip848 & offered(11)
    assert kip848 <= offered(12) and kip848 <= offered(13)
    assert kip848 <= set(kc.SUPPORTED)

