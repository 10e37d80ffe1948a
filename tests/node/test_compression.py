"""Kafka's record codecs: the codec functions, compressed batches read and refused, and real
clients producing with every codec to three local broker processes (one cluster for the
module)."""
import os
import random
import time
import uuid

import pytest

from node_image import compression as c
from node_image import records
from conftest import local_brokers

CODECS = ["gzip", "snappy", "lz4", "zstd"]
PAYLOAD = os.urandom(3000) + b"chaoskraft " * 5000


@pytest.mark.parametrize("name", CODECS)
def test_each_codec_round_trips_and_reads_what_kafka_clients_write(name):
    import kafka.codec as kc
    codec = c.BY_NAME[name]
    assert c.decompress(codec, c.compress(codec, PAYLOAD)) == PAYLOAD
    # kafka-python's encoders write what Kafka's Java clients write (xerial snappy, lz4 frames)
    theirs = {"gzip": kc.gzip_encode, "snappy": kc.snappy_encode, "lz4": kc.lz4_encode,
              "zstd": kc.zstd_encode}[name]
    assert c.decompress(codec, theirs(PAYLOAD)) == PAYLOAD
    ours = {"gzip": kc.gzip_decode, "snappy": kc.snappy_decode, "lz4": kc.lz4_decode,
            "zstd": kc.zstd_decode}[name]
    assert ours(c.compress(codec, PAYLOAD)) == PAYLOAD


def test_a_raw_snappy_block_is_read_too():
    import cramjam
    assert c.decompress(c.SNAPPY, bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD


@pytest.mark.parametrize("name", CODECS)
def test_a_batch_that_would_grow_past_the_limit_is_refused(name):
    bomb = c.compress(c.BY_NAME[name], bytes(5_000_000))
    assert len(bomb) < 300_000
    with pytest.raises(c.CodecError, match="more than 1000000 bytes"):
        c.decompress(c.BY_NAME[name], bomb, limit=1_000_000)


def _batch(codec: int, n: int = 20) -> bytes:
    plain = records.build_batch(0, 3, [(b"k%d" % i, b"v%d" % i * 50) for i in range(n)], 1000,
                                producer_id=7, producer_epoch=1, base_sequence=0)
    return records.recompress(plain, codec) if codec else plain


@pytest.mark.parametrize("name", CODECS)
def test_a_compressed_batch_keeps_its_header_and_decodes_to_its_records(name):
    batch = _batch(c.BY_NAME[name])
    header, recs = records.decode_records(batch)
    assert header.codec == c.BY_NAME[name] and len(batch) < len(_batch(0))
    assert (header.producer_id, header.producer_epoch, header.records_count) == (7, 1, 20)
    assert [r.value for r in recs] == [b"v%d" % i * 50 for i in range(20)]
    back = records.recompress(batch, c.NONE)
    assert back == _batch(0)  # the same bytes as the batch never compressed


@pytest.mark.parametrize("name", CODECS)
def test_fuzzed_compressed_batches_raise_a_corrupt_batch_error_only(name):
    """Flip bytes of the records section and fix the CRC, so the codec itself reads the
    garbage: every outcome is records or CorruptBatchError, never another exception."""
    import struct
    rng = random.Random(f"fuzz-{name}")
    good = _batch(c.BY_NAME[name])
    outcomes = set()
    for _ in range(300):
        buf = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(records.HEADER_SIZE, len(buf))
            buf[i] = rng.randrange(256)
        if rng.random() < 0.3:  # torn: the batch ends early, its length says so
            del buf[rng.randrange(records.HEADER_SIZE + 1, len(buf)):]
            struct.pack_into(">i", buf, 8, len(buf) - records.LOG_OVERHEAD)
        struct.pack_into(">I", buf, records.CRC_AT, records.crc32c(
            memoryview(buf)[records.CRC_START:]))
        try:
            records.decode_records(bytes(buf))
            outcomes.add("read")
        except records.CorruptBatchError:
            outcomes.add("refused")
    assert "refused" in outcomes


def test_an_unknown_codec_is_named():
    buf = bytearray(_batch(0))
    import struct
    struct.pack_into(">h", buf, records.ATTRIBUTES_AT, 6)
    struct.pack_into(">I", buf, records.CRC_AT, records.crc32c(memoryview(buf)[records.CRC_START:]))
    with pytest.raises(records.CorruptBatchError, match="unknown compression codec 6"):
        records.check_batch(bytes(buf))


@pytest.fixture(scope="module")
def brokers3(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("codecs")) as c3:
        yield c3


def _create(brokers3, topic, config=None):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": brokers3.bootstrap()})
    deadline = time.monotonic() + 90
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 3, config=config or {})])[topic].result(30)
            return
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return  # an earlier attempt that timed out on our side went through
            if time.monotonic() > deadline:
                raise
        except Exception:  # noqa: BLE001 - the brokers are still registering
            if time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _read_all(brokers3, topic, n, timeout_s=60):
    from confluent_kafka import Consumer, TopicPartition
    cons = Consumer({"bootstrap.servers": brokers3.bootstrap(), "group.id": uuid.uuid4().hex,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    cons.assign([TopicPartition(topic, 0, 0)])  # no group to join: no rebalance delay
    got = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = cons.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value()))
    finally:
        cons.close()
    return got


def _stored_codecs(brokers3, topic):
    """The codec of every batch in the partition's log files, on every broker."""
    found = set()
    for seg in brokers3.root.glob(f"data*/{topic}-0/*.log"):
        for header, _ in records.iter_batches(seg.read_bytes()):
            found.add(c.NAMES[header.codec])
    return found


@pytest.mark.parametrize("name", CODECS)
def test_confluent_kafka_and_kafka_python_produce_and_consume_with_each_codec(brokers3, name):
    """librdkafka and kafka-python each send 200 records with the codec; both are read back in
    order by both clients, and the brokers keep the batches as sent (compression.type
    producer, the default)."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, KafkaProducer
    topic = f"codec-{name}"
    _create(brokers3, topic)
    p = Producer({"bootstrap.servers": brokers3.bootstrap(), "compression.type": name,
                  "acks": "all", "linger.ms": 20, "enable.idempotence": True})
    for i in range(200):
        p.produce(topic, b"librdkafka %d " % i * 20, partition=0)
    assert p.flush(60) == 0
    kp = KafkaProducer(bootstrap_servers=brokers3.bootstrap(), compression_type=name,
                       acks="all", linger_ms=20)
    for i in range(200):
        kp.send(topic, b"kafka-python %d " % i * 20, partition=0)
    kp.flush(60)
    kp.close()
    want = [b"librdkafka %d " % i * 20 for i in range(200)] + \
           [b"kafka-python %d " % i * 20 for i in range(200)]
    got = _read_all(brokers3, topic, 400)
    assert [v for _, v in got] == want
    assert [o for o, _ in got] == list(range(400))
    from kafka import TopicPartition
    kc = KafkaConsumer(bootstrap_servers=brokers3.bootstrap(), auto_offset_reset="earliest")
    kc.assign([TopicPartition(topic, 0)])
    theirs, deadline = [], time.monotonic() + 60
    while len(theirs) < 400 and time.monotonic() < deadline:
        theirs += [r.value for recs in kc.poll(1000).values() for r in recs]
    assert theirs == want
    kc.close()
    assert _stored_codecs(brokers3, topic) == {name}


def test_a_topic_compression_type_makes_the_broker_recompress(brokers3):
    from confluent_kafka import Producer
    _create(brokers3, "forced", {"compression.type": "gzip"})
    p = Producer({"bootstrap.servers": brokers3.bootstrap(), "compression.type": "lz4",
                  "acks": "all"})
    for i in range(50):
        p.produce("forced", b"x%d" % i, partition=0)
    assert p.flush(60) == 0
    assert [v for _, v in _read_all(brokers3, "forced", 50)] == [b"x%d" % i for i in range(50)]
    assert _stored_codecs(brokers3, "forced") == {"gzip"}


def test_a_corrupt_compressed_batch_is_refused_and_the_broker_serves_on(brokers3):
    """A produce whose gzip section is garbage (its CRC right) gets CORRUPT_MESSAGE; the
    broker goes on serving."""
    import socket
    import struct

    from kafka.protocol.producer import ProduceRequest

    from node_image import kafka_codec as kc
    _create(brokers3, "garbage")
    bad = bytearray(_batch(c.GZIP))
    bad[records.HEADER_SIZE + 12:records.HEADER_SIZE + 40] = b"\xff" * 28  # inside the stream
    struct.pack_into(">I", bad, records.CRC_AT, records.crc32c(memoryview(bad)[records.CRC_START:]))
    TD = ProduceRequest.TopicProduceData
    frame = kc.encode_request(kc.PRODUCE, 8, ProduceRequest[8](
        transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[TD(
            name="garbage", partition_data=[TD.PartitionProduceData(index=0,
                                                                    records=bytes(bad))])]))
    errors, deadline = [], time.monotonic() + 60
    while 2 not in errors and time.monotonic() < deadline:  # until the leader has it
        for node in brokers3.ids:
            with socket.create_connection((brokers3.host(node), brokers3.kafka_port), 10) as sock:
                sock.sendall(frame)
                resp = kc.decode_response(kc.PRODUCE, 8, kc.recv_frame(sock))
                errors.append(resp.responses[0].partition_responses[0].error_code)
        time.sleep(0.1)
    # CORRUPT_MESSAGE from the leader; the others: not leader (6), or not yet told of the
    # topic (3: brokers learn new metadata with a delay)
    assert 2 in errors, errors
    assert set(errors) <= {2, 3, 6}, errors
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": brokers3.bootstrap(), "compression.type": "gzip"})
    p.produce("garbage", b"fine", partition=0)
    assert p.flush(30) == 0
    assert [v for _, v in _read_all(brokers3, "garbage", 1)] == [b"fine"]


def test_zstd_needs_produce_v7_as_in_kafka(brokers3):
    """KIP-110: a client that has not asked Produce v7 or later cannot know the broker reads
    zstd, so such a batch is refused (UNSUPPORTED_COMPRESSION_TYPE); v7 and later append it."""
    import socket

    from kafka.protocol.producer import ProduceRequest

    from node_image import kafka_codec as kc
    _create(brokers3, "zstd-versions")
    TD = ProduceRequest.TopicProduceData

    def produce(version):
        frame = kc.encode_request(kc.PRODUCE, version, ProduceRequest[version](
            transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[TD(
                name="zstd-versions", partition_data=[TD.PartitionProduceData(
                    index=0, records=_batch(c.ZSTD))])]))
        for node in brokers3.ids:  # the leader's answer (the others: 6, or 3 until told)
            with socket.create_connection((brokers3.host(node), brokers3.kafka_port), 10) as s:
                s.sendall(frame)
                code = kc.decode_response(kc.PRODUCE, version, kc.recv_frame(s)).responses[
                    0].partition_responses[0].error_code
            if code not in (3, 6):
                return code
        return None
    deadline = time.monotonic() + 60
    while (old := produce(6)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert old == 76, "UNSUPPORTED_COMPRESSION_TYPE below v7"
    assert produce(7) == 0 and produce(8) == 0
