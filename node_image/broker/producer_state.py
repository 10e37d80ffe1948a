"""ProducerStateManager: idempotent-producer deduplication for one partition.

Rules (Kafka's ProducerStateManager and ProducerAppendInfo, idempotence only):
- Per producer id the partition remembers its epoch and the sequence and
  offset ranges of its last 5 batches (a producer has at most 5 in flight).
- On the leader a batch from a known producer is
  - a duplicate when its (first, last) sequence equals a remembered batch:
    it is not appended again and the client is told the original offsets;
  - in order when its first sequence follows the last one (wrapping at
    2^31 - 1), or is 0 with a newer epoch;
  - otherwise OUT_OF_ORDER_SEQUENCE_NUMBER, or INVALID_PRODUCER_EPOCH for
    an older epoch.
  A batch that repeats one of a transaction that has since ended here (a
  marker follows it) is no duplicate: it is refused as out of order. The
  client either retries a batch of an ended transaction (a zombie) or reuses
  the sequence of a batch it purged when it aborted (librdkafka does, without
  bumping its epoch); acknowledging it at the old batch's offset would lose
  the new record. Kafka acknowledges it; this is a deliberate difference.
  A producer the partition does not know may start at any sequence (its
  state may have been lost with an unreplicated tail; the producer's own
  sequence is then the reference, as in Kafka 2.5+).
- Followers and recovery replay every batch without checks, so a new leader
  knows what its log holds.

Transactions (Kafka's ProducerStateManager, ongoing and aborted
transactions): the first transactional batch of a producer starts its
transaction at that offset; a transaction marker (a transactional control
batch, COMMIT or ABORT) ends it, and an aborted one is remembered as
(producer id, first offset, marker offset) for read_committed fetches. The
first offset of the oldest open transaction bounds the last stable offset.
A marker's epoch is the producer's from then on: a marker written to fence
a producer (a bumped epoch) makes its older epoch INVALID_PRODUCER_EPOCH.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field

from .. import messages as m
from .. import records

MAX_BATCHES = 5
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))
    # offset of the producer's last transaction marker here: batches before it belong to
    # ended transactions and are no duplicates of anything sent now
    marker_offset: int = -1
    last_timestamp: int = -1  # the max timestamp of its last data batch here

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(header: records.BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTxn] = []  # in marker order
        # producer id -> the newest coordinator epoch among its markers here
        self.coordinator_epochs: dict[int, int] = {}

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> int:
        """Whether a transaction marker may be appended (Kafka's appendEndTxnMarker): not
        from a coordinator older than one that already wrote here for this producer (a
        request of a deposed coordinator that arrives late would end the producer's next
        transaction), nor for an epoch older than the producer's."""
        if coordinator_epoch < self.coordinator_epochs.get(producer_id, -1):
            return m.TRANSACTION_COORDINATOR_FENCED
        entry = self.producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return m.INVALID_PRODUCER_EPOCH
        return m.NONE

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [start, end): what a read_committed consumer
        reading that range must drop."""
        return [a for a in self.aborted if a.last_offset >= start and a.first_offset < end]

    def check(self, header: records.BatchHeader) -> tuple[int, BatchMetadata | None]:
        """For a batch a client sent to the leader: (error, duplicate-of or None)."""
        pid = header.producer_id
        if pid < 0:
            return m.NONE, None
        entry = self.producers.get(pid)
        if entry is None:
            return m.NONE, None
        if header.producer_epoch < entry.epoch:
            return m.INVALID_PRODUCER_EPOCH, None
        if header.producer_epoch > entry.epoch:
            return (m.NONE if header.base_sequence == 0 else m.OUT_OF_ORDER_SEQUENCE_NUMBER), None
        if not entry.batches:  # known only from a marker: its epoch, no sequence yet
            return m.NONE, None
        last = _last_seq(header)
        for b in entry.batches:
            if b.first_seq == header.base_sequence and b.last_seq == last:
                if b.first_offset < entry.marker_offset:
                    # Its transaction has ended: acknowledging this batch at that batch's
                    # offset would tell the client a record of its open transaction is
                    # in the log when the log holds another, ended (aborted) one.
                    return m.OUT_OF_ORDER_SEQUENCE_NUMBER, None
                return m.NONE, b
        expected = (entry.last_seq + 1) % (INT32_MAX + 1)
        if header.base_sequence != expected:
            return m.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return m.NONE, None

    def update(self, header: records.BatchHeader, marker: tuple[int, int] | None = None) -> None:
        """Remember an appended batch (leader, follower or recovery); ``marker``: the control
        type (COMMIT or ABORT) and coordinator epoch of a transaction marker."""
        pid = header.producer_id
        if pid >= 0 and header.is_transactional:
            if header.is_control:
                if marker is not None:
                    self.coordinator_epochs[pid] = max(marker[1],
                                                       self.coordinator_epochs.get(pid, -1))
                first = self.ongoing.pop(pid, None)
                if marker is not None and marker[0] == records.ABORT_MARKER and first is not None:
                    self.aborted.append(AbortedTxn(pid, first, header.base_offset))
                entry = self.producers.get(pid)
                if entry is None or header.producer_epoch > entry.epoch:
                    entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
                entry.marker_offset = header.base_offset
                return
            self.ongoing.setdefault(pid, header.base_offset)
        if pid < 0 or header.base_sequence < 0:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, _last_seq(header),
                                           header.base_offset, header.last_offset))
        entry.last_timestamp = header.max_timestamp

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.aborted.clear()
        self.coordinator_epochs.clear()


def marker_of(header: records.BatchHeader, batch: bytes) -> tuple[int, int] | None:
    """(COMMIT or ABORT, coordinator epoch) for a transaction marker batch, else None."""
    if not (header.is_control and header.is_transactional):
        return None
    recs = records.decode_records(batch)[1]
    if not recs:
        return None
    value = recs[0].value or b""
    epoch = struct.unpack_from(">i", value, 2)[0] if len(value) >= 6 else -1
    return records.control_type(recs[0].key), epoch

