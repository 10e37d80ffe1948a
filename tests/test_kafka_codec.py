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
    assert (0, 3, 8) in [(k, lo, hi) for k, (lo, hi, _, _) in keys]  # Produce v3-8


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
    (header(57, 0, 1, "x"), "unknown api key 57"),
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
