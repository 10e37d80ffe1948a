"""The records of ``__consumer_offsets``, in Kafka's own format.

Kafka keeps consumer groups in an internal topic whose records are keyed by
what they describe; the newest record for a key wins and a record with a
null value (a tombstone) deletes it. Two kinds of record are written here,
with the versions a Kafka 3.x broker writes, so that Kafka's own tools
(``kafka-console-consumer --formatter ...OffsetsMessageFormatter``) could
read a log written by chaoskraft and the other way round:

- an offset commit: key version 1 ``(group, topic, partition)``, value
  version 3 ``(offset, leader epoch, metadata, commit timestamp)``;
- a group's metadata: key version 2 ``(group)``, value version 3
  ``(protocol type, generation, protocol, leader, state timestamp,
  members)``, each member ``(member id, group instance id, client id,
  client host, rebalance timeout, session timeout, subscription,
  assignment)``.

A KIP-848 consumer group is kept under keys of versions 3-8, Kafka's own
record types (:data:`CONSUMER_KEYS`; their values are in
:mod:`.consumer_records`), a KIP-932 share group's membership under 9-14
(:data:`SHARE_KEYS`, :mod:`.share_records`). A share group's state of each partition it reads is
kept under a key version of chaoskraft's own, :data:`SHARE_STATE` (Kafka keeps
it in another topic, ``__share_group_state``). Keys of version 0 (offsets) and
values of versions 0-3 are read too, as Kafka reads them. A record of any other
version is an error naming it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


class GroupRecordError(ValueError):
    """A record of ``__consumer_offsets`` we cannot read; the message says which field."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A key of a KIP-848 group's records (versions 3-8): :data:`CONSUMER_KEYS` names
    ``kind``; ``member_id`` is empty for the group-wide ones."""
    kind: int
    group: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class ShareKey:
    """A key of a KIP-932 share group's records (versions 9-14): :data:`SHARE_KEYS` names
    ``kind``; ``member_id`` is empty for the group-wide ones."""
    kind: int
    group: str
    member_id: str = ""


# key version -> what a KIP-848 group keeps under it (Kafka's record types)
GROUP_EPOCH, SUBSCRIPTION, MEMBER, TARGET_EPOCH, TARGET_MEMBER, CURRENT = 3, 4, 5, 6, 7, 8
CONSUMER_KEYS = {GROUP_EPOCH: "group epoch", SUBSCRIPTION: "subscribed topics",
                 MEMBER: "member metadata", TARGET_EPOCH: "target assignment epoch",
                 TARGET_MEMBER: "member's target assignment",
                 CURRENT: "member's current assignment"}
# ... and a KIP-932 share group's (Kafka's record types 9-14; values in .share_records)
(SHARE_PARTITIONS, SHARE_MEMBER, SHARE_EPOCH, SHARE_TARGET_EPOCH, SHARE_TARGET_MEMBER,
 SHARE_CURRENT) = 9, 10, 11, 12, 13, 14
SHARE_KEYS = {SHARE_PARTITIONS: "share group's subscribed topics",
              SHARE_MEMBER: "share member metadata", SHARE_EPOCH: "share group epoch",
              SHARE_TARGET_EPOCH: "share target assignment epoch",
              SHARE_TARGET_MEMBER: "share member's target assignment",
              SHARE_CURRENT: "share member's current assignment"}
_MEMBER_KEYS = (MEMBER, TARGET_MEMBER, CURRENT, SHARE_MEMBER, SHARE_TARGET_MEMBER, SHARE_CURRENT)


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: tuple[MemberValue, ...]


# chaoskraft's own key version: a share group's state of one partition (KIP-932), which
# Kafka keeps in __share_group_state as a ShareSnapshot; its value is Kafka's
# ShareSnapshotValue but for the snapshot and state epochs
SHARE_STATE = 1000
SHARE_AVAILABLE, SHARE_ARCHIVED = 0, 4  # Kafka's delivery states of a state batch


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group: str
    topic_id: str
    partition: int


@dataclass(frozen=True, slots=True)
class ShareStateValue:
    leader_epoch: int  # of the partition's leader that wrote it
    start_offset: int  # SPSO
    batches: tuple  # (first offset, last offset, delivery state, delivery count), in order


# ------------------------------------------------------------ writing

def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return struct.pack(">i", -1)
    return struct.pack(">i", len(b)) + b


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)


def offset_value(v: OffsetValue) -> bytes:
    return (struct.pack(">hqi", 3, v.offset, v.leader_epoch) + _string(v.metadata)
            + struct.pack(">q", v.commit_timestamp))


def group_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


def consumer_key(kind: int, group: str, member_id: str = "") -> bytes:
    out = struct.pack(">h", kind) + _string(group)
    return out + _string(member_id) if kind in _MEMBER_KEYS else out


def share_state_key(group: str, topic_id: str, partition: int) -> bytes:
    return (struct.pack(">h", SHARE_STATE) + _string(group) + _string(topic_id)
            + struct.pack(">i", partition))


def share_state_value(v: ShareStateValue) -> bytes:
    return (struct.pack(">hiqi", 0, v.leader_epoch, v.start_offset, len(v.batches))
            + b"".join(struct.pack(">qqbh", *b) for b in v.batches))


def group_value(v: GroupValue) -> bytes:
    out = [struct.pack(">h", 3), _string(v.protocol_type), struct.pack(">i", v.generation),
           _string(v.protocol), _string(v.leader), struct.pack(">q", v.state_timestamp),
           struct.pack(">i", len(v.members))]
    for mv in v.members:
        out += [_string(mv.member_id), _string(mv.group_instance_id), _string(mv.client_id),
                _string(mv.client_host),
                struct.pack(">ii", mv.rebalance_timeout_ms, mv.session_timeout_ms),
                _bytes(mv.subscription), _bytes(mv.assignment)]
    return b"".join(out)


# ------------------------------------------------------------ reading

class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, fmt: str, field: str):
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise GroupRecordError(f"{self.what}: field {field!r} runs past the end "
                                   f"({len(self.data)} bytes)")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def int8(self, field: str) -> int:
        return self._take(">b", field)

    def int16(self, field: str) -> int:
        return self._take(">h", field)

    def int32(self, field: str) -> int:
        return self._take(">i", field)

    def int64(self, field: str) -> int:
        return self._take(">q", field)

    def string(self, field: str, nullable: bool = False) -> str | None:
        n = self.int16(field)
        if n < 0:
            if nullable:
                return None
            raise GroupRecordError(f"{self.what}: field {field!r} is null")
        if self.pos + n > len(self.data):
            raise GroupRecordError(f"{self.what}: field {field!r} runs past the end")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        try:
            return s.decode()
        except UnicodeDecodeError:
            raise GroupRecordError(f"{self.what}: field {field!r} is not UTF-8") from None

    def bytes_(self, field: str) -> bytes:
        n = self.int32(field)
        if n < 0:
            return b""
        if self.pos + n > len(self.data):
            raise GroupRecordError(f"{self.what}: field {field!r} runs past the end")
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b


def read_key(data: bytes) -> OffsetKey | GroupKey | ConsumerKey | ShareKey | ShareStateKey:
    r = _Reader(data, "key")
    version = r.int16("version")
    if version in (0, 1):
        return OffsetKey(r.string("group"), r.string("topic"), r.int32("partition"))
    if version == 2:
        return GroupKey(r.string("group"))
    if version in CONSUMER_KEYS:
        group = r.string("group")
        return ConsumerKey(version, group, r.string("member_id") if version in _MEMBER_KEYS
                           else "")
    if version in SHARE_KEYS:
        group = r.string("group")
        return ShareKey(version, group, r.string("member_id") if version in _MEMBER_KEYS
                        else "")
    if version == SHARE_STATE:
        return ShareStateKey(r.string("group"), r.string("topic_id"), r.int32("partition"))
    raise GroupRecordError(f"key: unknown version {version} (0-14 and {SHARE_STATE} "
                           f"known)")


def read_share_state_value(data: bytes) -> ShareStateValue:
    r = _Reader(data, "share state value")
    version = r.int16("version")
    if version != 0:
        raise GroupRecordError(f"share state value: unknown version {version} (0 known)")
    epoch, start = r.int32("leader_epoch"), r.int64("start_offset")
    batches = []
    for i in range(r.int32("batches")):
        first, last = r.int64(f"batches[{i}].first_offset"), r.int64(f"batches[{i}].last_offset")
        state = r.int8(f"batches[{i}].delivery_state")
        if state not in (SHARE_AVAILABLE, SHARE_ARCHIVED) or last < first:
            raise GroupRecordError(f"share state value: batches[{i}] {first}-{last} in "
                                   f"delivery state {state}")
        batches.append((first, last, state, r.int16(f"batches[{i}].delivery_count")))
    return ShareStateValue(epoch, start, tuple(batches))


def read_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data, "offset value")
    version = r.int16("version")
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"offset value: unknown version {version} (0-3 known)")
    offset = r.int64("offset")
    epoch = r.int32("leader_epoch") if version >= 3 else -1
    metadata = r.string("metadata")
    stamp = r.int64("commit_timestamp")
    if version == 1:
        r.int64("expire_timestamp")
    return OffsetValue(offset, epoch, metadata, stamp)


def read_group_value(data: bytes) -> GroupValue:
    r = _Reader(data, "group value")
    version = r.int16("version")
    if version not in (0, 1, 2, 3):
        raise GroupRecordError(f"group value: unknown version {version} (0-3 known)")
    protocol_type = r.string("protocol_type")
    generation = r.int32("generation")
    protocol = r.string("protocol", nullable=True)
    leader = r.string("leader", nullable=True)
    stamp = r.int64("current_state_timestamp") if version >= 2 else -1
    members = []
    for _ in range(r.int32("members")):
        member_id = r.string("member_id")
        instance = r.string("group_instance_id", nullable=True) if version >= 3 else None
        client_id = r.string("client_id")
        client_host = r.string("client_host")
        rebalance = r.int32("rebalance_timeout") if version >= 1 else -1
        session = r.int32("session_timeout")
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance, session,
                                   r.bytes_("subscription"), r.bytes_("assignment")))
    return GroupValue(protocol_type, generation, protocol, leader, stamp, tuple(members))


def partition_for(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``."""
    h = 0
    for unit in struct.unpack(f">{len(group.encode('utf-16-be')) // 2}H",
                              group.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions
