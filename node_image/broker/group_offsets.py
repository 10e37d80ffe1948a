"""A group's committed offsets: OffsetCommit and TxnOffsetCommit checked as Kafka's
validateOffsetCommit does, transactional offsets held until their marker, offsets of
deleted partitions dropped, OffsetFetch (require_stable included), and DeleteGroups."""
from __future__ import annotations

import struct
from typing import Callable

from .. import messages as m
from . import consumer_records as cr
from . import group_metadata as gm
from .group_state import COMPLETING, DEAD, EMPTY, Group


class GroupOffsets:
    """Mixed into :class:`GroupCoordinator`."""

    def commit_offsets(self, group_id: str, member_id: str, generation: int,
                       offsets: dict[tuple[str, int], tuple[int, int, str | None]], now: int,
                       respond: Callable[[dict], None],
                       producer: tuple[int, int] | None = None,
                       instance_id: str | None = None, version: int = 9) -> None:
        """``offsets``: (topic, partition) -> (offset, leader epoch, metadata); ``respond``
        gets (topic, partition) -> error. ``producer`` (id, epoch): a TxnOffsetCommit, whose
        offsets wait for the transaction's end; its member and generation are checked as an
        OffsetCommit's from TxnOffsetCommit v3 (KIP-447; older versions send none). In a
        KIP-848 group ``generation`` is the member epoch, and ``version`` (the OffsetCommit
        version) must be 9 or more."""
        error = self._error_for(group_id)
        g = self.groups.get(group_id)
        if error == m.NONE and g is None:
            if generation >= 0:
                error = m.ILLEGAL_GENERATION
            else:  # a simple group (the admin client, or a consumer without a group)
                g = self.groups[group_id] = Group(group_id, self.partition_of(group_id))
        if error == m.NONE and g.consumer is not None:
            error = self._consumer_commit_error(g.consumer, member_id, generation,
                                                producer is not None, version)
        elif error == m.NONE:
            error = self._offset_commit_error(g, member_id, generation, instance_id,
                                              producer is not None, now)
        if error != m.NONE:
            respond({k: error for k in offsets})
            return
        results: dict = {}
        entries = []
        stamp = self.wall_clock()
        accepted = {}
        for (topic, partition), (offset, epoch, meta) in offsets.items():
            meta = meta or ""
            if self.rm.image.partition(topic, partition) is None:
                results[(topic, partition)] = m.UNKNOWN_TOPIC_OR_PARTITION
            elif len(meta.encode()) > self.options.offset_metadata_max_bytes:
                results[(topic, partition)] = m.OFFSET_METADATA_TOO_LARGE
            else:
                value = gm.OffsetValue(offset, epoch, meta, stamp)
                accepted[(topic, partition)] = value
                entries.append((gm.offset_key(group_id, topic, partition), gm.offset_value(value)))
        if not entries:
            respond(results)
            return

        if producer is not None:
            for k in accepted:
                g.txn_writing[k] = g.txn_writing.get(k, 0) + 1

        def stored(error: int) -> None:
            if producer is not None:
                for k in accepted:
                    left = g.txn_writing.pop(k) - 1
                    if left:
                        g.txn_writing[k] = left
            if error == m.NONE and self.groups.get(group_id) is g:
                if producer is None:
                    g.offsets.update(accepted)
                else:
                    g.txn_offsets.setdefault(producer[0], {}).update(accepted)
            for k in accepted:
                results[k] = error
            respond(results)
        if producer is None:
            self.log.write(g.partition, entries, now, stored)
        else:  # a transaction's offsets: visible once its COMMIT marker is written
            self.log.write(g.partition, entries, now, stored, transactional=True,
                           producer_id=producer[0], producer_epoch=producer[1])

    @staticmethod
    def _offset_commit_error(g: Group, member_id: str, generation: int,
                             instance_id: str | None, transactional: bool, now: int) -> int:
        """Kafka's ClassicGroup.validateOffsetCommit: who may commit to ``g`` now."""
        if generation < 0 and g.state == EMPTY:
            return m.NONE  # the admin client, or a consumer without group management
        if generation >= 0 or member_id or instance_id is not None:
            error = g.member_error(member_id, instance_id)
            if error is not None:
                return error
            mb = g.members[member_id]
            if generation != g.generation:
                return m.ILLEGAL_GENERATION
            if not transactional:
                mb.expires_ms = now + mb.session_timeout_ms
        elif not transactional:
            return m.UNKNOWN_MEMBER_ID  # only a group without members takes simple commits
        if not transactional and g.state == COMPLETING:
            return m.REBALANCE_IN_PROGRESS
        return m.NONE

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was written to our partition: its pending
        offsets become the groups' committed offsets (COMMIT) or are dropped (ABORT)."""
        for g in self.groups.values():
            if g.partition == partition:
                pending = g.txn_offsets.pop(producer_id, None)
                if pending and commit:
                    g.offsets.update(pending)

    def partitions_deleted(self, keys: set[tuple[str, int]], now: int) -> None:
        """Their topics were deleted: as Kafka's GroupMetadataManager does, every group we
        coordinate forgets its committed and pending offsets of those partitions, and a
        tombstone for each committed one goes to its ``__consumer_offsets`` partition, so a
        coordinator that loads the group later does not bring them back (a topic created
        again under the name starts with no committed offsets)."""
        for g in self.groups.values():
            gone = sorted(k for k in g.offsets if k in keys)
            for pending in g.txn_offsets.values():
                for k in keys & pending.keys():
                    del pending[k]
            if not gone:
                continue
            for k in gone:
                del g.offsets[k]
            self.log.write(g.partition, [(gm.offset_key(g.group_id, *k), None) for k in gone],
                           now, lambda error: None)
            self._on_event(f"group {g.group_id}: offsets of {len(gone)} deleted partition(s) "
                           f"removed")

    def delete_offsets(self, group_id: str, keys: list[tuple[str, int]], now: int,
                       respond: Callable[[int, dict], None]) -> None:
        """Kafka's OffsetDelete: ``respond(group error, (topic, partition) -> error)`` once
        the tombstones are committed. A group with members may lose only offsets of topics
        none of them subscribes to (GROUP_SUBSCRIBED_TO_TOPIC), and only if it uses the
        consumer protocol (else NON_EMPTY_GROUP); an unknown group is GROUP_ID_NOT_FOUND, an
        unknown partition UNKNOWN_TOPIC_OR_PARTITION. A partition with no committed offset
        is answered NONE with nothing written, as Kafka does."""
        error = self._error_for(group_id)
        g = self.groups.get(group_id) if error == m.NONE else None
        if error == m.NONE and g is None:
            error = m.GROUP_ID_NOT_FOUND
        subscribed: set[str] | None = set()
        if g is not None and g.state != EMPTY:
            if g.protocol_type != "consumer":
                error = m.NON_EMPTY_GROUP
            else:
                subscribed = _subscribed_topics(g)
        if error != m.NONE:
            respond(error, {})
            return
        results: dict = {}
        gone = []
        for k in dict.fromkeys(keys):
            if self.rm.image.partition(*k) is None:
                results[k] = m.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed is None or k[0] in subscribed:
                results[k] = m.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[k] = m.NONE
                if k in g.offsets:
                    gone.append(k)
        if not gone:
            respond(m.NONE, results)
            return

        def stored(error: int) -> None:
            if error == m.NONE:
                if self.groups.get(group_id) is g:
                    for k in gone:
                        g.offsets.pop(k, None)
                self._on_event(f"group {group_id}: offsets of {len(gone)} partition(s) deleted")
            for k in gone:
                results[k] = error
            respond(m.NONE, results)
        self.log.write(g.partition, [(gm.offset_key(group_id, *k), None) for k in gone], now,
                       stored)

    def fetch_offsets(self, group_id: str, wanted: list[tuple[str, int]] | None,
                      require_stable: bool = False, member: tuple[str, int] | None = None):
        """(error, [((topic, partition), OffsetValue or None, error)]). With
        ``require_stable`` (OffsetFetch v7+, KIP-447), a partition with a transactional
        offset commit not yet ended is UNSTABLE_OFFSET_COMMIT, for the client to ask again.
        ``member`` (OffsetFetch v9: member id and epoch) is checked in a KIP-848 group."""
        error = self._error_for(group_id)
        if error != m.NONE:
            return error, []
        g = self.groups.get(group_id)
        if g is not None and g.consumer is not None and member is not None:
            error = self._consumer_commit_error(g.consumer, member[0] or "", member[1], False,
                                                None)
            if error != m.NONE:
                return error, []
        offsets = g.offsets if g is not None else {}
        keys = sorted(offsets) if wanted is None else wanted
        unstable: set = set()
        if require_stable and g is not None:
            unstable = set(g.txn_writing).union(*g.txn_offsets.values())
        return m.NONE, [(k, offsets.get(k), m.UNSTABLE_OFFSET_COMMIT if k in unstable else m.NONE)
                        for k in keys]

    # ------------------------------------------------------------ DeleteGroups

    def delete_groups(self, group_ids: list[str], now: int,
                      respond: Callable[[dict[str, int]], None]) -> None:
        """Kafka's DeleteGroups: a group we coordinate that has no members (Empty) is
        removed, its offsets and metadata tombstoned; ``respond`` gets group -> error once
        every tombstone is committed. A group with members is NON_EMPTY_GROUP, one we do not
        know (or already deleted) GROUP_ID_NOT_FOUND. A write that fails gives the write's
        error and puts the group back (a coordinator loading the log would find it)."""
        results: dict[str, int] = {}
        writes: list[Group] = []
        for group_id in dict.fromkeys(group_ids):
            error = self._error_for(group_id)
            g = self.groups.get(group_id) if error == m.NONE else None
            if error == m.NONE and g is None:
                error = m.GROUP_ID_NOT_FOUND
            elif g is not None and (g.state != EMPTY or (g.consumer and g.consumer.members)):
                error = m.NON_EMPTY_GROUP
            if error != m.NONE:
                results[group_id] = error
                continue
            del self.groups[group_id]  # a join from now on makes a new group
            writes.append(g)
        left = len(writes)
        if not left:
            respond(results)
            return

        def stored(g: Group, epoch: int, error: int) -> None:
            nonlocal left
            results[g.group_id] = error
            if error == m.NONE:
                g.transition(DEAD)
                self._on_event(f"group {g.group_id}: deleted ({len(g.offsets)} offset(s))")
            elif g.group_id not in self.groups and self.owned.get(g.partition) == epoch:
                self.groups[g.group_id] = g  # back, still Empty
            left -= 1
            if not left:
                respond(results)
        for g in writes:
            entries = [(gm.offset_key(g.group_id, *k), None) for k in sorted(g.offsets)]
            entries.append((gm.group_key(g.group_id), None))
            if g.consumer is not None:
                entries += cr.group_gone(g.group_id)
            self.log.write(g.partition, entries, now,
                           lambda error, g=g, e=self.owned[g.partition]: stored(g, e, error))


def _subscribed_topics(g: Group) -> set[str] | None:
    """The topics a consumer group's members subscribe to, from their metadata for the
    group's protocol (ConsumerProtocolSubscription: version, topics, ...); None where that is
    not known (no protocol chosen yet, or metadata we cannot read): then, as Kafka, every
    topic counts as subscribed."""
    if not g.protocol:
        return None
    topics: set[str] = set()
    for mb in g.members.values():
        data = mb.metadata(g.protocol)
        try:
            (count,) = struct.unpack_from(">i", data, 2)
            at = 6
            for _ in range(count):
                (n,) = struct.unpack_from(">h", data, at)
                name = data[at + 2:at + 2 + n]
                if n < 0 or len(name) != n:
                    return None
                topics.add(name.decode())
                at += 2 + n
        except (struct.error, UnicodeDecodeError):
            return None
    return topics
