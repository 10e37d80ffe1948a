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
  A producer the partition does not know may start at any sequence (its
  state may have been lost with an unreplicated tail; the producer's own
  sequence is then the reference, as in Kafka 2.5+).
- Followers and recovery replay every batch without checks, so a new leader
  knows what its log holds.
"""
from __future__ import annotations

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


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(header: records.BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % (INT32_MAX + 1)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

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
        last = _last_seq(header)
        for b in entry.batches:
            if b.first_seq == header.base_sequence and b.last_seq == last:
                return m.NONE, b
        expected = (entry.last_seq + 1) % (INT32_MAX + 1)
        if header.base_sequence != expected:
            return m.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return m.NONE, None

    def update(self, header: records.BatchHeader) -> None:
        """Remember an appended batch (leader, follower or recovery)."""
        pid = header.producer_id
        if pid < 0 or header.base_sequence < 0:
            return
        entry = self.producers.get(pid)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = self.producers[pid] = ProducerEntry(header.producer_epoch)
        entry.batches.append(BatchMetadata(header.base_sequence, _last_seq(header),
                                           header.base_offset, header.last_offset))

    def clear(self) -> None:
        self.producers.clear()
