"""The records of a KIP-848 consumer group in ``__consumer_offsets``, in Kafka's format.

A group's state is spread over six kinds of record (:data:`.group_metadata.CONSUMER_KEYS`),
each written when its part changes and tombstoned when it goes: the group epoch, the
subscribed topics' metadata, each member's metadata (subscription, assignor, client),
the target assignment's epoch and each member's target, and each member's current
assignment (epoch, state, assigned and pending revocation). A coordinator taking over
folds them, in log order, into the group (:func:`fold`); the newest record of a key wins.
Values are Kafka's schemas (``node_image/kafka_schemas``), encoded by kafka-python.
"""
from __future__ import annotations

import struct
import uuid

from .. import kafka_codec as kc
from . import group_metadata as gm
from .consumer_group import (STABLE, UNRELEASED, UNREVOKED, ClassicMeta, ConsumerGroup,
                             ConsumerMember, MemberAssignment)

_STATE_CODES = {STABLE: 0, UNREVOKED: 1, UNRELEASED: 2}
_STATES = {v: k for k, v in _STATE_CODES.items()}


def _tps(cls, parts: dict) -> list:
    return [cls.TopicPartitions(topic_id=uuid.UUID(t), partitions=sorted(ps))
            for t, ps in sorted(parts.items())]


def _parts(tps) -> dict:
    return {str(tp.topic_id): frozenset(tp.partitions) for tp in tps or () if tp.partitions}


def group_epoch(group: str, epoch: int) -> tuple[bytes, bytes]:
    return (gm.consumer_key(gm.GROUP_EPOCH, group),
            kc.ConsumerGroupMetadataValue(version=0, epoch=epoch).encode())


def subscription(group: str, topics: dict) -> tuple[bytes, bytes]:
    V = kc.ConsumerGroupPartitionMetadataValue
    rows = [V.TopicMetadata(topic_id=uuid.UUID(tid), topic_name=name, num_partitions=count,
                            partition_metadata=[])
            for name, (tid, count) in sorted(topics.items())]
    return gm.consumer_key(gm.SUBSCRIPTION, group), V(version=0, topics=rows).encode()


def member(group: str, mb: ConsumerMember) -> tuple[bytes, bytes]:
    V = kc.ConsumerGroupMemberMetadataValue
    classic = None
    if mb.classic is not None:
        C = V.ClassicMemberMetadata
        classic = C(session_timeout_ms=mb.classic.session_timeout_ms,
                    supported_protocols=[C.ClassicProtocol(name=n, metadata=meta)
                                         for n, meta in mb.classic.protocols])
    value = V(
        version=0, instance_id=mb.instance_id, rack_id=mb.rack_id, client_id=mb.client_id,
        client_host=mb.client_host, subscribed_topic_names=list(mb.subscribed),
        subscribed_topic_regex=mb.regex, rebalance_timeout_ms=mb.rebalance_timeout_ms,
        server_assignor=mb.assignor, classic_member_metadata=classic)
    return gm.consumer_key(gm.MEMBER, group, mb.member_id), value.encode()


def target_epoch(group: str, epoch: int) -> tuple[bytes, bytes]:
    return (gm.consumer_key(gm.TARGET_EPOCH, group),
            kc.ConsumerGroupTargetAssignmentMetadataValue(version=0,
                                                          assignment_epoch=epoch).encode())


def target_member(group: str, member_id: str, parts: dict) -> tuple[bytes, bytes]:
    V = kc.ConsumerGroupTargetAssignmentMemberValue
    return (gm.consumer_key(gm.TARGET_MEMBER, group, member_id),
            V(version=0, topic_partitions=[V.TopicPartition(topic_id=uuid.UUID(t),
                                                            partitions=sorted(ps))
                                           for t, ps in sorted(parts.items())]).encode())


def current(group: str, member_id: str, a: MemberAssignment) -> tuple[bytes, bytes]:
    V = kc.ConsumerGroupCurrentMemberAssignmentValue
    value = V(version=0, member_epoch=a.epoch, previous_member_epoch=a.previous_epoch,
              state=_STATE_CODES[a.state], assigned_partitions=_tps(V, a.assigned),
              partitions_pending_revocation=_tps(V, a.revoking))
    return gm.consumer_key(gm.CURRENT, group, member_id), value.encode()


def member_gone(group: str, member_id: str) -> list[tuple[bytes, None]]:
    """Tombstones for everything kept about one member (Kafka writes them in this order)."""
    return [(gm.consumer_key(kind, group, member_id), None)
            for kind in (gm.CURRENT, gm.TARGET_MEMBER, gm.MEMBER)]


def group_gone(group: str) -> list[tuple[bytes, None]]:
    return [(gm.consumer_key(kind, group), None)
            for kind in (gm.TARGET_EPOCH, gm.SUBSCRIPTION, gm.GROUP_EPOCH)]


def fold(cg: ConsumerGroup, key: gm.ConsumerKey, value: bytes | None) -> None:
    """Apply one record to ``cg`` as a coordinator loading the log does. Raises
    :class:`~.group_metadata.GroupRecordError` naming the record kind it could not read."""
    what = gm.CONSUMER_KEYS[key.kind]
    try:
        _fold(cg, key, value)
    except (ValueError, KeyError, EOFError, IndexError, TypeError, struct.error) as exc:
        raise gm.GroupRecordError(f"{what} of group {key.group!r}"
                                  f"{' member ' + key.member_id if key.member_id else ''}: "
                                  f"cannot read the value ({exc})") from None


def _fold(cg: ConsumerGroup, key: gm.ConsumerKey, value: bytes | None) -> None:
    kind, mid = key.kind, key.member_id
    if kind == gm.GROUP_EPOCH:
        cg.group_epoch = 0 if value is None else kc.ConsumerGroupMetadataValue.decode(value).epoch
    elif kind == gm.SUBSCRIPTION:
        v = None if value is None else kc.ConsumerGroupPartitionMetadataValue.decode(value)
        cg.subscription = {} if v is None else {
            t.topic_name: (str(t.topic_id), t.num_partitions) for t in v.topics}
    elif kind == gm.TARGET_EPOCH:
        cg.assignment_epoch = 0 if value is None else \
            kc.ConsumerGroupTargetAssignmentMetadataValue.decode(value).assignment_epoch
    elif kind == gm.TARGET_MEMBER:
        if value is None:
            cg.target.pop(mid, None)
        else:
            v = kc.ConsumerGroupTargetAssignmentMemberValue.decode(value)
            cg.target[mid] = _parts(v.topic_partitions)
    elif value is None:  # MEMBER or CURRENT tombstone: the member is gone
        cg.members.pop(mid, None)
    else:
        mb = cg.members.setdefault(mid, ConsumerMember(mid))
        if kind == gm.MEMBER:
            v = kc.ConsumerGroupMemberMetadataValue.decode(value)
            mb.client_id, mb.client_host, mb.rack_id = v.client_id, v.client_host, v.rack_id
            mb.subscribed = tuple(sorted(v.subscribed_topic_names or ()))
            mb.regex, mb.instance_id = v.subscribed_topic_regex or None, v.instance_id
            mb.rebalance_timeout_ms, mb.assignor = v.rebalance_timeout_ms, v.server_assignor
            c = v.classic_member_metadata
            mb.classic = None if c is None else ClassicMeta(
                c.session_timeout_ms, tuple((p.name, bytes(p.metadata))
                                            for p in c.supported_protocols))
        else:
            v = kc.ConsumerGroupCurrentMemberAssignmentValue.decode(value)
            if v.state not in _STATES:
                raise ValueError(f"unknown member state {v.state}")
            mb.current = MemberAssignment(v.member_epoch, v.previous_member_epoch,
                                          _STATES[v.state], _parts(v.assigned_partitions),
                                          _parts(v.partitions_pending_revocation))
