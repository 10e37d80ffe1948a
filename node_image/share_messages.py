"""The messages between a share partition's leader and its share group's coordinator
(KIP-932's ReadShareGroupState and WriteShareGroupState, which Kafka sends to its share
coordinator): the leader reads the state when it starts leading the partition for a
group, and writes it when records are acknowledged or released. They travel as every
other node message (``messages.TYPES``). ``batches`` are rows (first offset, last offset,
delivery state, delivery count), :class:`~node_image.broker.group_metadata.ShareStateValue`'s."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ShareStateReadRequest:
    correlation_id: int
    group: str
    topic_id: str
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateReadResponse:
    correlation_id: int
    group: str
    topic_id: str
    partition: int
    error: int
    start_offset: int  # -1: the group has no state of this partition
    batches: tuple


@dataclass(frozen=True, slots=True)
class ShareStateWriteRequest:
    correlation_id: int
    group: str
    topic_id: str
    partition: int
    leader_epoch: int
    start_offset: int
    batches: tuple


@dataclass(frozen=True, slots=True)
class ShareStateWriteResponse:
    correlation_id: int
    group: str
    topic_id: str
    partition: int
    error: int
