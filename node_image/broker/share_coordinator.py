"""ShareGroupHeartbeat (KIP-932): the group coordinator's side of share groups.

A share group's members do not own partitions: the coordinator spreads the subscribed
topics' partitions over the members so that each member gets some and each partition
goes to at least one member (when there are more members than partitions, a partition goes
to several; the records are shared out by the partition's leader,
:mod:`.share_partition`). Kafka's SimpleAssignor does this by hashing; here, with the
members and partitions each sorted, partition *i* goes to member *i mod n* while there are
at least as many partitions as members, and member *j* to partition *j mod p* otherwise.

The group epoch rises when membership, a subscription or a subscribed topic's partitions
change; a member is given its assignment, and the group epoch as its own, in the answer to
its next heartbeat. Epoch 0 joins (a member id of the client's own, or one the coordinator
makes), -1 leaves; an epoch that is neither the member's nor its previous one is
FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID (the client joins again). A
member silent for ``share.session.timeout.ms`` (the group's config, else the broker's
``group.share.session.timeout.ms``) is removed.

The coordinator also keeps each partition's share state (SPSO, the in-flight records'
states and delivery counts) for the partition's leader, which writes it as records are
acknowledged and reads it when it starts leading the partition (Kafka's share coordinator
and ``__share_group_state``): here in ``__consumer_offsets``, under a key of chaoskraft's
own (:data:`.group_metadata.SHARE_STATE`), loaded with the group's partition.

Membership is written to the group's ``__consumer_offsets`` partition as Kafka writes it
(:mod:`.share_records`): a heartbeat is answered once what it changed is replicated, and a
coordinator taking over the partition reads the group back, so its members go on in the
epochs they had (their sessions start again) instead of joining anew.
A group id used by a classic or consumer group is refused (GROUP_ID_NOT_FOUND).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable

from .. import group_configs
from .. import messages as m
from . import group_metadata as gm
from . import share_records as sr

LEAVE = -1


@dataclass(slots=True)
class ShareMember:
    member_id: str
    subscribed: tuple = ()
    rack_id: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    seen_ms: int = 0
    assignment: dict = field(default_factory=dict)  # topic id -> frozenset of partitions
    current: dict = field(default_factory=dict)  # the assignment the member was last given
    client_id: str = ""
    client_host: str = ""
    loaded: bool = False  # read from the log by this coordinator, not heard from since


@dataclass(frozen=True, slots=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed: tuple | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict = field(default_factory=dict)  # member id -> ShareMember
    partitions: dict = field(default_factory=dict)  # topic id -> partition count, last seen

    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class ShareAnswer:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    interval_ms: int = 0
    assignment: dict | None = None  # topic id -> sorted partitions; None: unchanged


def share_assign(members: list[str], partitions: list[tuple[str, int]]) -> dict:
    """member id -> {topic id: frozenset of partitions} (see the module's text)."""
    members, partitions = sorted(members), sorted(partitions)
    out: dict[str, dict] = {mid: {} for mid in members}
    if not members or not partitions:
        return out
    if len(partitions) >= len(members):
        pairs = [(members[i % len(members)], tp) for i, tp in enumerate(partitions)]
    else:
        pairs = [(mid, partitions[j % len(partitions)]) for j, mid in enumerate(members)]
    for mid, (tid, p) in pairs:
        out[mid][tid] = out[mid].get(tid, frozenset()) | {p}
    return out


class ShareGroups:
    """Mixed into :class:`~node_image.broker.group_coordinator.GroupCoordinator`."""

    share_groups: dict
    share_states: dict  # (group, topic id, partition) -> gm.ShareStateValue, as loaded

    def share_heartbeat(self, hb: ShareHeartbeat, now: int,
                        respond: Callable[[ShareAnswer], None]) -> None:
        """Answer ``hb`` through ``respond`` once what it changed is written to the group's
        ``__consumer_offsets`` partition (or, if it changed nothing, once everything
        written before it is): a member is never told an epoch a coordinator taking over
        would not know."""
        self._now = now
        entries: list = []
        a = self._share_step(hb, now, entries)
        if a.error != m.NONE:
            respond(a)
            return

        def done(error: int) -> None:
            respond(a if error == m.NONE else ShareAnswer(
                error, f"writing the group's records failed: {m.ERROR_NAMES.get(error, error)}"))
        pid = self.partition_of(hb.group_id)
        if entries:
            self.log.write(pid, entries, now, done)
        else:
            self.log.barrier(pid, now, done)

    def _share_step(self, hb: ShareHeartbeat, now: int, entries: list) -> ShareAnswer:
        group_id, member_id, member_epoch = hb.group_id, hb.member_id, hb.member_epoch
        error = self._error_for(group_id)
        if error != m.NONE:
            self.share_groups.pop(group_id, None)
            return ShareAnswer(error, "GroupId can't be empty." if error == m.INVALID_GROUP_ID
                               else None)
        if member_epoch != 0 and not member_id:
            return ShareAnswer(m.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch == 0 and not hb.subscribed:
            return ShareAnswer(m.INVALID_REQUEST,
                               "SubscribedTopicNames must be set in first request.")
        if member_epoch < LEAVE:
            return ShareAnswer(m.INVALID_REQUEST, f"MemberEpoch {member_epoch} is invalid.")
        if group_id in self.groups:
            return ShareAnswer(m.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        session_ms, interval_ms = self._share_timing(group_id)
        g = self.share_groups.get(group_id)
        if g is None:
            if member_epoch != 0:
                return ShareAnswer(m.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group_id}.")
            g = self.share_groups[group_id] = ShareGroup(group_id)
        self._share_expire(g, now, session_ms, entries)
        mb = g.members.get(member_id) if member_id else None
        if member_epoch == LEAVE:
            if mb is None:
                return ShareAnswer(m.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group_id}.")
            del g.members[member_id]
            entries += sr.member_gone(group_id, member_id)
            self._share_rebalance(g, f"member {member_id} left", entries)
            return ShareAnswer(m.NONE, None, member_id, LEAVE, interval_ms)
        if member_epoch == 0:
            if mb is None:
                member_id = member_id or str(uuid.UUID(int=self.rng.getrandbits(128),
                                                       version=4))
                mb = g.members[member_id] = ShareMember(member_id, tuple(hb.subscribed),
                                                        hb.rack_id)
                mb.client_id, mb.client_host = hb.client_id, hb.client_host
                entries.append(sr.member(group_id, mb))
                self._share_rebalance(g, f"member {member_id} joined", entries)
            mb.epoch = mb.previous_epoch = 0
        elif mb is None:
            return ShareAnswer(m.UNKNOWN_MEMBER_ID,
                               f"Member {member_id} is not a member of group {group_id}.")
        elif member_epoch not in (mb.epoch, mb.previous_epoch):
            return ShareAnswer(m.FENCED_MEMBER_EPOCH,
                               f"The share group member has an epoch ({member_epoch}) other "
                               f"than the coordinator's ({mb.epoch}).")
        elif mb.loaded:
            self._on_event(f"share group {group_id}: member {member_id} goes on in epoch "
                           f"{member_epoch}, as the coordinator before this one knew it")
        mb.loaded = False
        mb.seen_ms = now
        described = (mb.rack_id, mb.subscribed)
        if hb.rack_id is not None:
            mb.rack_id = hb.rack_id
        if hb.subscribed is not None and tuple(hb.subscribed) != mb.subscribed:
            mb.subscribed = tuple(hb.subscribed)
            self._share_rebalance(g, f"member {member_id} subscribed to {list(hb.subscribed)}",
                                  entries)
        if (mb.rack_id, mb.subscribed) != described:
            entries.append(sr.member(group_id, mb))
        if self._share_topics_changed(g):
            self._share_rebalance(g, "subscribed topics' partitions changed", entries)
        assignment = None
        if mb.epoch != g.epoch:
            mb.previous_epoch, mb.epoch = mb.epoch, g.epoch
            mb.current = dict(mb.assignment)
            entries.append(sr.current(group_id, mb))
            assignment = {t: sorted(ps) for t, ps in mb.assignment.items()}
        return ShareAnswer(m.NONE, None, member_id, mb.epoch, interval_ms, assignment)

    def _share_timing(self, group_id: str) -> tuple[int, int]:
        return group_configs.timing(self.rm.image, group_id, self.options, "share")

    def _share_expire(self, g: ShareGroup, now: int, session_ms: int, entries: list) -> None:
        gone = [mid for mid, mb in g.members.items() if now - mb.seen_ms > session_ms]
        for mid in gone:
            del g.members[mid]
            entries += sr.member_gone(g.group_id, mid)
        if gone:
            self._share_rebalance(g, f"members {gone} timed out", entries)

    def _subscribed_partitions(self, g: ShareGroup) -> dict:
        topics = self.rm.image.topics
        names = {name for mb in g.members.values() for name in mb.subscribed}
        return {topics[n].topic_id: len(topics[n].partitions) for n in names if n in topics}

    def _share_topics_changed(self, g: ShareGroup) -> bool:
        return self._subscribed_partitions(g) != g.partitions

    def _share_rebalance(self, g: ShareGroup, reason: str, entries: list) -> None:
        """A new group epoch and target assignment; their records go to ``entries``."""
        g.epoch += 1
        counts = self._subscribed_partitions(g)
        names = self.rm.image.topic_names
        if counts != g.partitions:
            g.partitions = counts
            entries.append(sr.partitions(g.group_id, counts, names))
        entries.append(sr.group_epoch(g.group_id, g.epoch))
        # each member is given partitions of the topics it subscribes to (members with the
        # same subscription are assigned together)
        by_subscription: dict[frozenset, list[str]] = {}
        for mid, mb in g.members.items():
            by_subscription.setdefault(frozenset(mb.subscribed), []).append(mid)
        targets: list = []
        for subscription, mids in by_subscription.items():
            parts = [(t, p) for t, n in g.partitions.items() if names.get(t) in subscription
                     for p in range(n)]
            for mid, a in share_assign(mids, parts).items():
                if g.members[mid].assignment != a or g.members[mid].epoch == 0:
                    targets.append(sr.target_member(g.group_id, mid, a))
                g.members[mid].assignment = a
        entries += sorted(targets)
        entries.append(sr.target_epoch(g.group_id, g.epoch))
        self._on_event(f"share group {g.group_id}: epoch {g.epoch} ({reason}), "
                       f"{len(g.members)} members")

    def share_load(self, pid: int, loaded: dict) -> None:
        """Take the share groups folded from ``__consumer_offsets-pid`` (``loaded``: group id
        -> :class:`ShareGroup`): their members' sessions start again now, as Kafka's."""
        for gid, g in loaded.items():
            for mb in g.members.values():
                mb.seen_ms, mb.loaded = self._now, True
            self.share_groups[gid] = g

    # ------------------------------------------------------------ share state

    def share_state_read(self, req: m.ShareStateReadRequest) -> m.ShareStateReadResponse:
        """A share partition's new leader asks for the group's state of the partition."""
        error = self._error_for(req.group)
        v = (self.share_states.get((req.group, req.topic_id, req.partition))
             if error == m.NONE else None)
        return m.ShareStateReadResponse(req.correlation_id, req.group, req.topic_id,
                                        req.partition, error,
                                        -1 if v is None else v.start_offset,
                                        () if v is None else v.batches)

    def share_state_write(self, req: m.ShareStateWriteRequest, now: int, reply) -> None:
        """Write a share partition's state to the group's ``__consumer_offsets`` partition;
        ``reply`` gets the answer once it is replicated. A write from a leader of an older
        epoch than the state's is FENCED_LEADER_EPOCH."""
        key = (req.group, req.topic_id, req.partition)

        def answer(error: int) -> None:
            reply(m.ShareStateWriteResponse(req.correlation_id, *key, error))
        error = self._error_for(req.group)
        held = self.share_states.get(key)
        if error == m.NONE and held is not None and held.leader_epoch > req.leader_epoch:
            error = m.FENCED_LEADER_EPOCH
        if error != m.NONE:
            answer(error)
            return
        value = gm.ShareStateValue(req.leader_epoch, req.start_offset,
                                   tuple(tuple(b) for b in req.batches))

        def done(error: int) -> None:
            held = self.share_states.get(key)
            if error == m.NONE and (held is None or held.leader_epoch <= value.leader_epoch):
                self.share_states[key] = value
            answer(error)
        self.log.write(self.partition_of(req.group),
                       [(gm.share_state_key(*key), gm.share_state_value(value))], now, done)

    def share_topics_deleted(self, topic_ids: set[str], now: int) -> None:
        """Those topics were deleted: as Kafka's share coordinator deletes a deleted topic's
        share-group state, every state of their partitions we hold is forgotten and a
        tombstone for it goes to its group's ``__consumer_offsets`` partition, so a
        coordinator that loads the partition later does not bring it back."""
        gone = sorted(k for k in self.share_states if k[1] in topic_ids)
        by_partition: dict[int, list] = {}
        for k in gone:
            del self.share_states[k]
            by_partition.setdefault(self.partition_of(k[0]), []).append(
                (gm.share_state_key(*k), None))
        for pid, recs in sorted(by_partition.items()):
            self.log.write(pid, recs, now, lambda error: None)
        if gone:
            self._on_event(f"share state of {len(gone)} partition(s) of deleted topics removed")

    def _unload_share_states(self, pid: int) -> None:
        self.share_states = {k: v for k, v in self.share_states.items()
                             if self.partition_of(k[0]) != pid}
        self.share_groups = {gid: g for gid, g in self.share_groups.items()
                             if self.partition_of(gid) != pid}

    def share_group_ids(self) -> list[str]:
        return sorted(gid for gid in self.share_groups if self._error_for(gid) == m.NONE)
