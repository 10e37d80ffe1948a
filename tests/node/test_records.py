"""Record batch v2 framing: golden bytes against kafka-python's reader and builder."""
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from node_image import records


def test_our_batch_reads_in_kafka_python():
    batch = records.build_batch(42, 7, [(b"k1", b"v1"), (None, b"v2"), (b"k3", None)], 1_700_000_000_000)
    kb = DefaultRecordBatch(batch)
    assert kb.validate_crc()
    assert kb.base_offset == 42
    assert kb.leader_epoch == 7
    assert kb.magic == 2
    assert not kb.is_control_batch
    got = [(r.offset, r.key, r.value, r.timestamp) for r in kb]
    assert got == [(42, b"k1", b"v1", 1_700_000_000_000), (43, None, b"v2", 1_700_000_000_000),
                   (44, b"k3", None, 1_700_000_000_000)]


def test_kafka_python_batch_reads_in_ours():
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=1234, key=b"a", value=b"x" * 300, headers=[("h", b"1")])
    b.append(1, timestamp=1240, key=None, value=b"y", headers=[])
    data = bytes(b.build())
    header, recs = records.decode_records(data)
    assert header.records_count == 2 and header.size == len(data)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in recs] == [
        (0, b"a", b"x" * 300, 1234, (("h", b"1"),)), (1, None, b"y", 1240, ())]


GOLDEN = ("0000000000000000" "0000003a" "00000001" "02" "fe917cab" "0000" "00000000"
          "0000000000000000" "0000000000000000" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
          "10" "00" "00" "00" "02" "6b" "02" "76" "00")


def test_golden_bytes_match_kafka_python_builder():
    ours = records.build_batch(0, 1, [(b"k", b"v")], 0)
    assert ours.hex() == GOLDEN
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 20)
    b.append(0, timestamp=0, key=b"k", value=b"v", headers=[])
    theirs = bytearray(b.build())
    theirs[12:16] = (1).to_bytes(4, "big")  # their builder leaves the leader epoch at 0
    assert bytes(theirs).hex() == GOLDEN


def test_control_batch_and_restamp_keep_crc():
    batch = records.build_batch(0, 3, [(records.control_key(records.CONTROL_LEADER_CHANGE), b"x")], 5,
                                control=True)
    moved = records.restamp(batch, 100, 9)
    header = records.check_batch(moved)
    assert (header.base_offset, header.partition_leader_epoch, header.is_control) == (100, 9, True)
    assert DefaultRecordBatch(moved).is_control_batch


@pytest.mark.parametrize("pos", [0, 8, 16, 17, 21, 30, 60, 61, 65])
def test_any_flipped_byte_is_detected(pos):
    batch = bytearray(records.build_batch(0, 1, [(b"key", b"value" * 4)], 99))
    batch[pos] ^= 0x40
    if pos < 8 or 12 <= pos < 16:
        # base offset and partition leader epoch are outside the CRC by design
        records.check_batch(bytes(batch))
        return
    with pytest.raises(records.CorruptBatchError):
        records.decode_records(bytes(batch))


def test_truncated_batch_is_detected():
    batch = records.build_batch(0, 1, [(b"key", b"value")], 99)
    for cut in (1, 30, 60, 61, len(batch) - 1):
        with pytest.raises(records.CorruptBatchError):
            records.check_batch(batch[:cut])


def test_varint_roundtrip():
    for n in (0, 1, -1, 63, -64, 64, 300, -300, 2**31 - 1, -2**31, 2**62, -2**63):
        out = bytearray()
        records.write_varint(out, n)
        assert records.read_varint(out, 0, len(out)) == (n, len(out))


def test_peek_attributes_reads_what_kafka_python_wrote():
    """A compressed or transactional batch is told by its attributes before anything else."""
    for compression, transactional, pid in [(0, False, -1), (1, False, -1), (0, True, 7)]:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=compression,
                                      is_transactional=transactional, producer_id=pid,
                                      producer_epoch=0 if pid >= 0 else -1,
                                      base_sequence=0 if pid >= 0 else -1, batch_size=1 << 20)
        b.append(0, timestamp=1, key=b"k", value=b"v" * 100, headers=[])
        data = bytes(b.build())
        attributes = records.peek_attributes(data)
        assert attributes & records.COMPRESSION_MASK == compression
        assert bool(attributes & records.ATTR_TRANSACTIONAL) == transactional
        assert records.peek_attributes(b"\x00" + data, 1) == attributes
    assert records.peek_attributes(data[:records.HEADER_SIZE - 1]) is None
