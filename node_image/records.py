"""Kafka record batch v2 framing, as stored on disk and sent in Fetch.

Layout of a batch (big-endian), 61 bytes of header then the records:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
    magic int8 (=2) | crc uint32 | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 |
    producerEpoch int16 | baseSequence int32 | recordsCount int32 | records

Rules this module keeps:
- The CRC-32C covers ``attributes`` to the end of the batch, so the base
  offset and the partition leader epoch can be stamped on an existing batch
  (as a leader does on append) without recomputing it.
- ``batchLength`` counts the bytes after the batchLength field itself.
- The records section may be compressed as a whole (attribute bits 0-2:
  ``compression``); it is stored and served as written and decompressed only
  to be read (``decode_records``), with a bound on the size it may grow to.
- Decoding never trusts a length: every bound is checked, and a bad batch
  raises :class:`CorruptBatchError` naming what is wrong.

Control batches (attribute bit 5) carry Raft's control records
(LeaderChange, SnapshotHeader, SnapshotFooter); their key is
``version int16 | type int16`` as in Kafka.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Iterator

import crc32c as _crc32c

from . import compression

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes before batchLength's count starts
CRC_START = 21  # attributes start here
MAGIC = 2
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
COMPRESSION_MASK = 0x07
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

# Control record types (Kafka's ControlRecordType).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4


class CorruptBatchError(ValueError):
    """Bytes that are not a valid record batch (torn, bit-flipped, garbage)."""


def crc32c(data: bytes | memoryview) -> int:
    return _crc32c.crc32c(data)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    """Signed zig-zag varint (Kafka's varint/varlong)."""
    u = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def write_uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def read_uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= end:
            raise CorruptBatchError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise CorruptBatchError("varint longer than 10 bytes")


def read_varint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    u, pos = read_uvarint(buf, pos, end)
    return (u >> 1) ^ -(u & 1), pos


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK


def build_batch(
    base_offset: int,
    epoch: int,
    entries: Iterable[tuple[bytes | None, bytes | None]],
    timestamp_ms: int,
    *,
    control: bool = False,
    transactional: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    headers: tuple[tuple[str, bytes | None], ...] = (),
    timestamp_deltas: Iterable[int] = (),
) -> bytes:
    """Encode (key, value) pairs as one batch starting at ``base_offset``, stamped at
    ``timestamp_ms`` plus each record's entry of ``timestamp_deltas`` (0 where it has none)."""
    body = bytearray()
    count = 0
    deltas = list(timestamp_deltas)
    for delta, (key, value) in enumerate(entries):
        rec = bytearray()
        rec.append(0)  # record attributes
        write_varint(rec, deltas[delta] if delta < len(deltas) else 0)  # timestamp delta
        write_varint(rec, delta)
        if key is None:
            write_varint(rec, -1)
        else:
            write_varint(rec, len(key))
            rec += key
        if value is None:
            write_varint(rec, -1)
        else:
            write_varint(rec, len(value))
            rec += value
        write_varint(rec, len(headers))
        for hkey, hval in headers:
            hk = hkey.encode()
            write_varint(rec, len(hk))
            rec += hk
            if hval is None:
                write_varint(rec, -1)
            else:
                write_varint(rec, len(hval))
                rec += hval
        write_varint(body, len(rec))
        body += rec
        count += 1
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    attributes = (ATTR_CONTROL if control else 0) | (ATTR_TRANSACTIONAL if transactional else 0)
    buf = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(
        buf, 0, base_offset, len(buf) - LOG_OVERHEAD, epoch, MAGIC, 0, attributes,
        count - 1, timestamp_ms,
        timestamp_ms + max(deltas[i] if i < len(deltas) else 0 for i in range(count)),
        producer_id, producer_epoch, base_sequence, count,
    )
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def recompress(batch: bytes, codec: int) -> bytes:
    """The same records in a batch whose records section is compressed with ``codec``
    (Kafka's broker-side ``compression.type``): header fields kept, CRC computed again."""
    header = check_batch(batch)
    if header.codec == codec:
        return batch
    section = memoryview(batch)[HEADER_SIZE:header.size]
    if header.codec:
        try:
            section = compression.decompress(header.codec, section)
        except compression.CodecError as exc:
            raise CorruptBatchError(f"batch at offset {header.base_offset}: {exc}") from None
    body = compression.compress(codec, bytes(section))
    buf = bytearray(batch[:HEADER_SIZE]) + body
    struct.pack_into(">i", buf, 8, len(buf) - LOG_OVERHEAD)
    struct.pack_into(">h", buf, ATTRIBUTES_AT, (header.attributes & ~COMPRESSION_MASK) | codec)
    struct.pack_into(">I", buf, CRC_AT, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def restamp(batch: bytes, base_offset: int, epoch: int | None = None) -> bytes:
    """The same batch with a new base offset (and leader epoch); CRC unchanged."""
    buf = bytearray(batch)
    struct.pack_into(">q", buf, 0, base_offset)
    if epoch is not None:
        struct.pack_into(">i", buf, 12, epoch)
    return bytes(buf)


ATTRIBUTES_AT = 8 + 4 + 4 + 1 + 4  # base offset, length, leader epoch, magic, crc
CRC_AT = 8 + 4 + 4 + 1
MAX_TIMESTAMP_AT = ATTRIBUTES_AT + 2 + 4 + 8  # attributes, last offset delta, base timestamp
ATTR_LOG_APPEND_TIME = 0x08  # timestamp type: LogAppendTime (else CreateTime)


def set_log_append_time(batch: bytes, timestamp_ms: int) -> bytes:
    """The batch as a broker appends it to a topic with ``message.timestamp.type=LogAppendTime``
    (Kafka's ``DefaultRecordBatch.setMaxTimestamp``): the timestamp type bit set, the max
    timestamp the broker's wall clock, the CRC computed again. Consumers give every record of
    such a batch the batch's max timestamp."""
    buf = bytearray(batch)
    attributes = struct.unpack_from(">h", buf, ATTRIBUTES_AT)[0]
    struct.pack_into(">h", buf, ATTRIBUTES_AT, attributes | ATTR_LOG_APPEND_TIME)
    struct.pack_into(">q", buf, MAX_TIMESTAMP_AT, timestamp_ms)
    struct.pack_into(">I", buf, CRC_AT, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def peek_attributes(buf: bytes | memoryview, pos: int = 0) -> int | None:
    """The attributes of the batch at ``pos`` before anything else is checked (a compressed
    or transactional batch is refused for what it is, not as corrupt), or None when the
    buffer is too short to hold a batch header."""
    if len(buf) - pos < HEADER_SIZE:
        return None
    return struct.unpack_from(">h", buf, pos + ATTRIBUTES_AT)[0]


def parse_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(
            f"{len(buf) - pos} bytes left, a batch header needs {HEADER_SIZE}")
    fields = HEADER.unpack_from(buf, pos)
    header = BatchHeader(fields[0], fields[1], fields[2], fields[4], fields[5], fields[6],
                         fields[7], fields[8], fields[9], fields[10], fields[11], fields[12])
    if fields[3] != MAGIC:
        raise CorruptBatchError(f"magic {fields[3]} at batch offset {header.base_offset}, expected 2")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batch length {header.batch_length} is shorter than a header")
    if not compression.supported(header.attributes & COMPRESSION_MASK):
        raise CorruptBatchError(f"unknown compression codec "
                                f"{header.attributes & COMPRESSION_MASK} at batch offset "
                                f"{header.base_offset}")
    if header.last_offset_delta < 0 or header.records_count != header.last_offset_delta + 1:
        raise CorruptBatchError(
            f"records count {header.records_count} does not match last offset delta "
            f"{header.last_offset_delta}")
    return header


def check_batch(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Parse a batch header at ``pos`` and verify the whole batch's CRC."""
    header = parse_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatchError(
            f"batch at offset {header.base_offset} needs {header.size} bytes, "
            f"{len(buf) - pos} present (torn write)")
    actual = crc32c(memoryview(buf)[pos + CRC_START:end])
    if actual != header.crc:
        raise CorruptBatchError(
            f"CRC mismatch in batch at offset {header.base_offset}: "
            f"stored {header.crc:#010x}, computed {actual:#010x}")
    return header


def iter_batches(buf: bytes | memoryview) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch in ``buf`` (CRC-checked), with its bytes. Raises on any bad batch."""
    pos = 0
    view = memoryview(buf)
    while pos < len(buf):
        header = check_batch(view, pos)
        yield header, bytes(view[pos:pos + header.size])
        pos += header.size


def decode_records(batch: bytes) -> tuple[BatchHeader, list[Record]]:
    """Header and records of one CRC-checked batch."""
    header = check_batch(batch)
    end = header.size
    pos = HEADER_SIZE
    if header.codec:
        try:
            batch = compression.decompress(header.codec, memoryview(batch)[HEADER_SIZE:end])
        except compression.CodecError as exc:
            raise CorruptBatchError(f"batch at offset {header.base_offset}: {exc}") from None
        pos, end = 0, len(batch)
    records = []
    for _ in range(header.records_count):
        length, pos = read_varint(batch, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise CorruptBatchError("record length runs past the batch")
        pos += 1  # attributes
        ts_delta, pos = read_varint(batch, pos, rec_end)
        off_delta, pos = read_varint(batch, pos, rec_end)
        key, pos = _read_bytes(batch, pos, rec_end)
        value, pos = _read_bytes(batch, pos, rec_end)
        nheaders, pos = read_varint(batch, pos, rec_end)
        headers = []
        for _h in range(nheaders):
            hk, pos = _read_bytes(batch, pos, rec_end)
            hv, pos = _read_bytes(batch, pos, rec_end)
            headers.append(((hk or b"").decode(), hv))
        if pos != rec_end:
            raise CorruptBatchError("record has trailing bytes")
        records.append(Record(header.base_offset + off_delta,
                              header.base_timestamp + ts_delta, key, value, tuple(headers)))
        pos = rec_end
    if pos != end:
        raise CorruptBatchError("batch has bytes after its last record")
    return header, records


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptBatchError("field length runs past the record")
    return bytes(buf[pos:pos + n]), pos + n


ABORT_MARKER, COMMIT_MARKER = 0, 1  # control record types that end a transaction


def end_txn_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   timestamp_ms: int) -> bytes:
    """A transaction marker batch (Kafka's EndTransactionMarker): a transactional control batch
    of one record, key (version 0, COMMIT or ABORT), value (version 0, coordinator epoch)."""
    return build_batch(0, 0, [(control_key(COMMIT_MARKER if commit else ABORT_MARKER),
                               struct.pack(">hi", 0, coordinator_epoch))], timestamp_ms,
                       control=True, transactional=True, producer_id=producer_id,
                       producer_epoch=producer_epoch)


def control_key(record_type: int) -> bytes:
    return struct.pack(">hh", 0, record_type)


def control_type(key: bytes | None) -> int:
    if key is None or len(key) < 4:
        raise CorruptBatchError("control record without a version/type key")
    return struct.unpack_from(">hh", key)[1]
