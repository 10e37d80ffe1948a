"""KIP-932's share-group APIs at v1 (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge),
against bytes written out by hand as librdkafka's share consumer writes the requests and
reads the answers (its rdkafka_request.c and rdkafka_fetcher.c); ShareGroupDescribe v1 and
DescribeShareGroupOffsets v0 as Kafka's schemas lay them out (no client here sends them)."""
import struct

from test_kafka_codec import TAGS, carray, cbytes, cstr, request_v2, response_v1

from node_image import kafka_codec as kc


def test_share_group_heartbeat_share_fetch_and_share_acknowledge_v1_bytes():
    """Each request as librdkafka sends it decodes, each answer encodes to its bytes."""
    topic = bytes(range(16))
    tid = "00010203-0405-0607-0809-0a0b0c0d0e0f"
    hb = kc.decode_request(request_v2(76, 1, 40) + cstr("sg") + cstr("m1")
                           + struct.pack(">i", 0) + cstr(None) + carray([cstr("t")]) + TAGS)
    assert (hb.body.group_id, hb.body.member_id, hb.body.member_epoch, hb.body.rack_id,
            list(hb.body.subscribed_topic_names)) == ("sg", "m1", 0, None, ["t"])
    R = kc.response_class(76, 1)
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m1",
             member_epoch=3, heartbeat_interval_ms=5000, assignment=R.Assignment(
                 topic_partitions=[R.Assignment.TopicPartitions(topic_id=tid,
                                                                partitions=[0, 1])]))
    want = (struct.pack(">ih", 0, 0) + cstr(None) + cstr("m1") + struct.pack(">ii", 3, 5000)
            + b"\x01" + carray([topic + carray([struct.pack(">i", 0), struct.pack(">i", 1)])
                                + TAGS]) + TAGS + TAGS)
    assert kc.encode_response(hb, resp) == response_v1(40, want)
    # ShareFetch: acknowledgements of offsets 5-6 (accept) in the request, one forgotten
    acks = carray([struct.pack(">qq", 5, 6) + carray([b"\x01"]) + TAGS])
    fetch = kc.decode_request(
        request_v2(78, 1, 41) + cstr("sg") + cstr("m1")
        + struct.pack(">iiiiii", 2, 500, 1, 52428800, 500, 500)
        + carray([topic + carray([struct.pack(">i", 0) + acks + TAGS]) + TAGS])
        + carray([topic + carray([struct.pack(">i", 1)]) + TAGS]) + TAGS)
    b = fetch.body
    assert (b.share_session_epoch, b.max_wait_ms, b.max_records, b.batch_size) == (2, 500, 500,
                                                                                    500)
    [p] = b.topics[0].partitions
    [batch] = p.acknowledgement_batches
    assert (p.partition_index, batch.first_offset, batch.last_offset,
            list(batch.acknowledge_types)) == (0, 5, 6, [1])
    assert list(b.forgotten_topics_data[0].partitions) == [1]
    R = kc.response_class(78, 1)
    P = R.ShareFetchableTopicResponse.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, error_message=None,
             acquisition_lock_timeout_ms=30000, responses=[R.ShareFetchableTopicResponse(
                 topic_id=tid, partitions=[P(
                     partition_index=0, error_code=0, error_message=None,
                     acknowledge_error_code=121, acknowledge_error_message="gone",
                     current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                     records=b"RB", acquired_records=[P.AcquiredRecords(
                         first_offset=7, last_offset=9, delivery_count=2)])])],
             node_endpoints=[])
    want = (struct.pack(">ih", 0, 0) + cstr(None) + struct.pack(">i", 30000)
            + carray([topic + carray([
                struct.pack(">ih", 0, 0) + cstr(None) + struct.pack(">h", 121) + cstr("gone")
                + struct.pack(">ii", -1, -1) + TAGS + cbytes(b"RB")
                + carray([struct.pack(">qqh", 7, 9, 2) + TAGS]) + TAGS]) + TAGS])
            + carray([]) + TAGS)
    assert kc.encode_response(fetch, resp) == response_v1(41, want)
    ack = kc.decode_request(request_v2(79, 1, 42) + cstr("sg") + cstr("m1")
                            + struct.pack(">i", -1)
                            + carray([topic + carray([struct.pack(">i", 0) + acks + TAGS])
                                      + TAGS]) + TAGS)
    assert ack.body.share_session_epoch == -1
    assert ack.body.topics[0].partitions[0].acknowledgement_batches[0].last_offset == 6
    R = kc.response_class(79, 1)
    T = R.ShareAcknowledgeTopicResponse
    resp = R(throttle_time_ms=0, error_code=0, error_message=None, responses=[T(
        topic_id=tid, partitions=[T.PartitionData(
            partition_index=0, error_code=6, error_message=None,
            current_leader=T.PartitionData.LeaderIdAndEpoch(leader_id=2, leader_epoch=4))])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="h", port=9092, rack=None)])
    want = (struct.pack(">ih", 0, 0) + cstr(None)
            + carray([topic + carray([struct.pack(">ih", 0, 6) + cstr(None)
                                      + struct.pack(">ii", 2, 4) + TAGS + TAGS]) + TAGS])
            + carray([struct.pack(">i", 2) + cstr("h") + struct.pack(">i", 9092) + cstr(None)
                      + TAGS]) + TAGS)
    assert kc.encode_response(ack, resp) == response_v1(42, want)


def test_share_group_apis_are_advertised_only_with_metadata_that_names_topic_ids():
    """As KIP-848's: below Metadata v12 librdkafka could not follow a share group's
    assignment (topic ids), so the APIs are not offered; they are still answered."""
    def offered(cap):
        return {k.api_key for k in kc.api_versions_body(3, caps={kc.METADATA: cap}).api_keys}
    share = {kc.SHARE_GROUP_HEARTBEAT, kc.SHARE_GROUP_DESCRIBE, kc.SHARE_FETCH,
             kc.SHARE_ACKNOWLEDGE, kc.DESCRIBE_SHARE_GROUP_OFFSETS}
    assert not share & offered(8) and share <= offered(12) and share <= set(kc.SUPPORTED)


def test_share_group_describe_v1_bytes():
    """The request: group ids, include_authorized_operations; the answer: per group its
    error, state, epochs, assignor, members (a nullable rack, the subscribed topic names,
    the assignment with topic ids and names) and the operations bitfield."""
    topic = bytes(range(16))
    tid = "00010203-0405-0607-0809-0a0b0c0d0e0f"
    req = kc.decode_request(request_v2(77, 1, 43) + carray([cstr("sg"), cstr("x")]) + b"\x01"
                            + TAGS)
    assert (list(req.body.group_ids), req.body.include_authorized_operations) == (["sg", "x"],
                                                                                  True)
    R = kc.response_class(77, 1)
    D = R.DescribedGroup
    A = D.Member.Assignment
    resp = R(throttle_time_ms=0, groups=[
        D(error_code=0, error_message=None, group_id="sg", group_state="Stable", group_epoch=3,
          assignment_epoch=3, assignor_name="simple", members=[D.Member(
              member_id="m1", rack_id=None, member_epoch=3, client_id="c", client_host="/h",
              subscribed_topic_names=["t"], assignment=A(topic_partitions=[
                  A.TopicPartitions(topic_id=tid, topic_name="t", partitions=[1])]))],
          authorized_operations=8),
        D(error_code=69, error_message="Group x not found.", group_id="x", group_state="Dead",
          group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
          authorized_operations=-(1 << 31))])
    member = (cstr("m1") + cstr(None) + struct.pack(">i", 3) + cstr("c") + cstr("/h")
              + carray([cstr("t")])
              + carray([topic + cstr("t") + carray([struct.pack(">i", 1)]) + TAGS]) + TAGS
              + TAGS)
    want = (struct.pack(">i", 0) + carray([
        struct.pack(">h", 0) + cstr(None) + cstr("sg") + cstr("Stable")
        + struct.pack(">ii", 3, 3) + cstr("simple") + carray([member])
        + struct.pack(">i", 8) + TAGS,
        struct.pack(">h", 69) + cstr("Group x not found.") + cstr("x") + cstr("Dead")
        + struct.pack(">ii", -1, -1) + cstr("") + carray([]) + struct.pack(">i", -(1 << 31))
        + TAGS]) + TAGS)
    assert kc.encode_response(req, resp) == response_v1(43, want)


def test_describe_share_group_offsets_v0_bytes():
    """The request: groups, each with its topics (nullable: all) and partitions; the answer:
    per group its topics (name and id), each partition's start offset, leader epoch and
    error, then the group's error."""
    topic = bytes(range(16))
    tid = "00010203-0405-0607-0809-0a0b0c0d0e0f"
    req = kc.decode_request(request_v2(90, 0, 44) + carray([
        cstr("sg") + carray([cstr("t") + carray([struct.pack(">i", 0)]) + TAGS]) + TAGS,
        cstr("all") + b"\x00" + TAGS]) + TAGS)
    first, every = req.body.groups
    assert (first.group_id, first.topics[0].topic_name, list(first.topics[0].partitions),
            every.group_id, every.topics) == ("sg", "t", [0], "all", None)
    R = kc.response_class(90, 0)
    G = R.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    resp = R(throttle_time_ms=0, groups=[
        G(group_id="sg", topics=[T(topic_name="t", topic_id=tid, partitions=[P(
            partition_index=0, start_offset=200, leader_epoch=4, error_code=0,
            error_message=None)])], error_code=0, error_message=None),
        G(group_id="all", topics=[], error_code=69, error_message="Group all not found.")])
    want = (struct.pack(">i", 0) + carray([
        cstr("sg") + carray([cstr("t") + topic + carray([
            struct.pack(">iqih", 0, 200, 4, 0) + cstr(None) + TAGS]) + TAGS])
        + struct.pack(">h", 0) + cstr(None) + TAGS,
        cstr("all") + carray([]) + struct.pack(">h", 69) + cstr("Group all not found.")
        + TAGS]) + TAGS)
    assert kc.encode_response(req, resp) == response_v1(44, want)
