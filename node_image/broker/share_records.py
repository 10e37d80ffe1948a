"""The records of a KIP-932 share group in ``__consumer_offsets``, in Kafka's format.

A share group's membership is spread over six kinds of record
(:data:`.group_metadata.SHARE_KEYS`), each written when its part changes and tombstoned when
it goes, as Kafka's group coordinator writes them: the group epoch, the subscribed topics'
partition counts, each member's metadata (rack, client, subscription), the target
assignment's epoch and each member's target, and each member's current assignment (the
epoch it was last given, with its previous one). A coordinator taking over folds them, in
log order, into the group (:func:`fold`); the newest record of a key wins. Values are
Kafka's schemas (``node_image/kafka_schemas``), encoded by kafka-python.
"""
from __future__ import annotations

import struct
import uuid

from .. import kafka_codec as kc
from . import group_metadata as gm

STABLE = 0  # Kafka's MemberState of a share member (it has nothing to revoke)


def _key(kind: int, group: str, member_id: str = "") -> bytes:
    return gm.consumer_key(kind, group, member_id)


def group_epoch(group: str, epoch: int) -> tuple[bytes, bytes]:
    return (_key(gm.SHARE_EPOCH, group),
            kc.ShareGroupMetadataValue(version=0, epoch=epoch, metadata_hash=0).encode())


def partitions(group: str, counts: dict, names: dict) -> tuple[bytes, bytes]:
    """``counts``: topic id -> partition count; ``names``: topic id -> name."""
    V = kc.ShareGroupPartitionMetadataValue
    rows = [V.TopicMetadata(topic_id=uuid.UUID(t), topic_name=names.get(t, ""),
                            num_partitions=n, partition_metadata=[])
            for t, n in sorted(counts.items())]
    return _key(gm.SHARE_PARTITIONS, group), V(version=0, topics=rows).encode()


def member(group: str, mb) -> tuple[bytes, bytes]:
    value = kc.ShareGroupMemberMetadataValue(
        version=0, rack_id=mb.rack_id, client_id=mb.client_id, client_host=mb.client_host,
        subscribed_topic_names=list(mb.subscribed))
    return _key(gm.SHARE_MEMBER, group, mb.member_id), value.encode()


def target_epoch(group: str, epoch: int) -> tuple[bytes, bytes]:
    return (_key(gm.SHARE_TARGET_EPOCH, group),
            kc.ShareGroupTargetAssignmentMetadataValue(version=0,
                                                       assignment_epoch=epoch).encode())


def target_member(group: str, member_id: str, parts: dict) -> tuple[bytes, bytes]:
    V = kc.ShareGroupTargetAssignmentMemberValue
    return (_key(gm.SHARE_TARGET_MEMBER, group, member_id),
            V(version=0, topic_partitions=[V.TopicPartition(topic_id=uuid.UUID(t),
                                                            partitions=sorted(ps))
                                           for t, ps in sorted(parts.items())]).encode())


def current(group: str, mb) -> tuple[bytes, bytes]:
    V = kc.ShareGroupCurrentMemberAssignmentValue
    value = V(version=0, member_epoch=mb.epoch, previous_member_epoch=mb.previous_epoch,
              state=STABLE, assigned_partitions=[
                  V.TopicPartitions(topic_id=uuid.UUID(t), partitions=sorted(ps))
                  for t, ps in sorted(mb.assignment.items())])
    return _key(gm.SHARE_CURRENT, group, mb.member_id), value.encode()


def member_gone(group: str, member_id: str) -> list[tuple[bytes, None]]:
    """Tombstones for everything kept about one member (Kafka writes them in this order)."""
    return [(_key(kind, group, member_id), None)
            for kind in (gm.SHARE_CURRENT, gm.SHARE_TARGET_MEMBER, gm.SHARE_MEMBER)]


def _parts(tps) -> dict:
    return {str(tp.topic_id): frozenset(tp.partitions) for tp in tps or () if tp.partitions}


def fold(g, key: gm.ShareKey, value: bytes | None, new_member) -> None:
    """Apply one record to the share group ``g`` as a coordinator loading the log does;
    ``new_member(member_id)`` makes a member. Raises
    :class:`~.group_metadata.GroupRecordError` naming the record kind it could not read."""
    try:
        _fold(g, key, value, new_member)
    except (ValueError, KeyError, EOFError, IndexError, TypeError, struct.error) as exc:
        raise gm.GroupRecordError(f"{gm.SHARE_KEYS[key.kind]} of group {key.group!r}"
                                  f"{' member ' + key.member_id if key.member_id else ''}: "
                                  f"cannot read the value ({exc})") from None


def _fold(g, key: gm.ShareKey, value: bytes | None, new_member) -> None:
    kind, mid = key.kind, key.member_id
    if kind == gm.SHARE_EPOCH:
        g.epoch = 0 if value is None else kc.ShareGroupMetadataValue.decode(value).epoch
    elif kind == gm.SHARE_PARTITIONS:
        v = None if value is None else kc.ShareGroupPartitionMetadataValue.decode(value)
        g.partitions = {} if v is None else {str(t.topic_id): t.num_partitions
                                             for t in v.topics}
    elif kind == gm.SHARE_TARGET_EPOCH:
        if value is not None:  # the target is computed with the group epoch here
            kc.ShareGroupTargetAssignmentMetadataValue.decode(value)
    elif value is None:  # any of a member's records tombstoned: the member is gone
        g.members.pop(mid, None)
    else:
        mb = g.members.get(mid) or g.members.setdefault(mid, new_member(mid))
        if kind == gm.SHARE_MEMBER:
            v = kc.ShareGroupMemberMetadataValue.decode(value)
            mb.rack_id, mb.client_id, mb.client_host = v.rack_id, v.client_id, v.client_host
            mb.subscribed = tuple(v.subscribed_topic_names or ())
        elif kind == gm.SHARE_TARGET_MEMBER:
            v = kc.ShareGroupTargetAssignmentMemberValue.decode(value)
            mb.assignment = _parts(v.topic_partitions)
        else:
            v = kc.ShareGroupCurrentMemberAssignmentValue.decode(value)
            mb.epoch, mb.previous_epoch = v.member_epoch, v.previous_member_epoch
            mb.current = _parts(v.assigned_partitions)
