"""ConsumerGroupHeartbeat (KIP-848): the group coordinator's side of the consumer protocol.

One heartbeat does what JoinGroup, SyncGroup and Heartbeat do together in the classic
protocol, in three steps (as Kafka's GroupMetadataManager):

1. the member is created, updated or checked: epoch 0 joins (or rejoins, giving up what it
   held), a positive epoch must be the member's (or its previous one, owning nothing beyond
   its assignment: the answer that raised it may have been lost), -1 leaves;
2. the group epoch rises if membership, a subscription, the assignor or a subscribed
   topic's partitions changed, and the target assignment is computed again when the group
   epoch is ahead of it;
3. the member takes its next step towards its target (:func:`.consumer_group.reconcile`).

What changed is written to the group's ``__consumer_offsets`` partition (acks=all,
:mod:`.consumer_records`) and the answer goes out once it is committed; a heartbeat that
changed nothing is answered once everything written before it is committed. A member
silent for its session timeout (the group's ``consumer.session.timeout.ms``, else the
broker's ``group.consumer.session.timeout.ms``), or that keeps partitions it must revoke
for longer than its rebalance timeout, is removed. A write that fails answers its error
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, REQUEST_TIMED_OUT) and is not rolled back
in memory: a coordinator that takes over reads only what committed, and a member whose
epoch is then ahead of the log's is fenced and joins again, losing nothing (it commits
offsets with its epoch, which the new coordinator refuses until it has rejoined).

A **regular-expression subscription** (``SubscribedTopicRegex``) is matched whole against
every topic name in the broker's metadata image, internal topics left out, on each
heartbeat (Kafka resolves them in the background, at most every few seconds): a topic
created that matches raises the group epoch as a named one would. Python's ``re`` stands
for Kafka's RE2/J; a pattern that does not compile, or that RE2 refuses or ``re`` could
take exponential time on (:func:`.consumer_group.regex_problem`), is
INVALID_REGULAR_EXPRESSION.

A **static member** (``group.instance.id``) that leaves with epoch -2 stays in the group
with its assignment kept; the next member joining with that instance id takes its place
and its partitions without a new group epoch. Joining while the instance id is held by a
member that has not left is UNRELEASED_INSTANCE_ID; a heartbeat from a member id the
instance no longer has is FENCED_INSTANCE_ID. Unlike Kafka 4.0, the member that holds the
instance id may itself rejoin with epoch 0 (after being fenced) without an error.

A classic group with members that a member joins with epoch 0 is upgraded, classic
members keep their protocol in a consumer group, and the group turns classic again when
the last member speaking this protocol leaves (Kafka 4's online migration,
:mod:`.group_migration`).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Callable

from .. import group_configs
from .. import messages as m
from ..coverage import Reached
from . import consumer_records as cr
from .consumer_group import (ASSIGNORS, UNREVOKED, ConsumerGroup, ConsumerMember,
                             MemberAssignment, assign, is_subset, reconcile, regex_problem)
from .group_state import EMPTY, Group

LEAVE, STATIC_LEAVE = -1, -2


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat request; ``None`` fields did not change since the last one."""
    group_id: str
    member_id: str
    member_epoch: int
    version: int = 1
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: tuple | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: dict | None = None  # topic id -> frozenset(partition)
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    interval_ms: int = 0
    assignment: dict | None = None  # topic id -> frozenset(partition), when sent


class ConsumerGroups:
    """Mixed into :class:`~.group_coordinator.GroupCoordinator`."""

    def _invalid_heartbeat(self, hb: Heartbeat) -> tuple[int, str] | None:
        def bad(message: str) -> tuple[int, str]:
            return m.INVALID_REQUEST, message
        if not hb.group_id:
            return m.INVALID_GROUP_ID, "GroupId can't be empty."
        if hb.instance_id == "":
            return bad("InstanceId can't be empty.")
        if hb.rack_id == "":
            return bad("RackId can't be empty.")
        problem = regex_problem(hb.regex) if hb.regex else None  # ("": subscribed by names)
        if problem:
            return (m.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{hb.regex}` is not "
                                                  f"a valid regular expression: {problem}.")
        if hb.member_epoch > 0 or hb.member_epoch in (LEAVE, STATIC_LEAVE) or hb.version >= 1:
            if not hb.member_id:
                return bad("MemberId can't be empty.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                return bad("RebalanceTimeoutMs must be provided in first request.")
            if hb.owned is None or any(hb.owned.values()):
                return bad("TopicPartitions must be empty when (re-)joining.")
            if not hb.subscribed and not hb.regex:
                return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                           "first request.")
        elif hb.member_epoch == STATIC_LEAVE:
            if hb.instance_id is None:
                return bad("InstanceId can't be null.")
        elif hb.member_epoch < LEAVE:
            return bad(f"MemberEpoch {hb.member_epoch} is invalid.")
        if hb.assignor is not None and hb.assignor not in ASSIGNORS:
            return (m.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {hb.assignor} is not supported. "
                    f"Supported assignors: {', '.join(ASSIGNORS)}.")
        return None

    def consumer_heartbeat(self, hb: Heartbeat, now: int,
                           respond: Callable[[HeartbeatAnswer], None]) -> None:
        self._now = now
        error = self._error_for(hb.group_id)
        bad = self._invalid_heartbeat(hb) if error in (m.NONE, m.INVALID_GROUP_ID) else None
        if bad is not None:
            self._on_event(f"ConsumerGroupHeartbeat of group {hb.group_id!r} refused "
                           f"({m.ERROR_NAMES.get(bad[0], bad[0])}): {bad[1]}")
            respond(HeartbeatAnswer(*bad))
            return
        if error != m.NONE:
            respond(HeartbeatAnswer(error))
            return
        g = self.groups.get(hb.group_id)
        if g is None or (g.consumer is None and not g.members and hb.member_epoch == 0):
            if hb.member_epoch != 0:
                respond(HeartbeatAnswer(m.GROUP_ID_NOT_FOUND,
                                        f"Consumer group {hb.group_id} not found."))
                return
            if g is None:
                g = self.groups[hb.group_id] = Group(hb.group_id, self.partition_of(hb.group_id))
            g.consumer, g.protocol_type, g.state = ConsumerGroup(), "consumer", EMPTY
        if g.consumer is None:  # a classic group with members: upgraded, if it may be
            problem = (self._upgrade(g, now) if hb.member_epoch == 0
                       else f"Group {hb.group_id} is not a consumer group.")
            if problem is not None:
                self._on_event(f"group {g.group_id}: {problem}")
                respond(HeartbeatAnswer(m.GROUP_ID_NOT_FOUND, problem))
                return
        cg = g.consumer
        member_id = hb.member_id or str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        old = cg.members.get(member_id)
        static = None if hb.instance_id is None else cg.static_member(hb.instance_id)
        replaced = None  # the static member that left and whose place this one takes
        if static is not None and static.member_id != member_id and hb.member_epoch == 0:
            if static.current.epoch != STATIC_LEAVE:
                message = (f"Static member {member_id} with instance id {hb.instance_id} "
                           f"cannot join the group because the instance id is owned by "
                           f"{static.member_id} member.")
                self._on_event(f"group {g.group_id}: {message}")
                respond(HeartbeatAnswer(m.UNRELEASED_INSTANCE_ID, message))
                return
            replaced = static
        elif hb.instance_id is not None and hb.member_epoch != 0:
            if static is None or static.member_id != member_id:
                respond(HeartbeatAnswer(m.UNKNOWN_MEMBER_ID, f"Instance id {hb.instance_id} "
                                        f"is unknown.") if static is None else HeartbeatAnswer(
                    m.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                    f"{hb.instance_id} was fenced by member {static.member_id}."))
                return
        if hb.member_epoch == STATIC_LEAVE:  # gone for now: its assignment is kept for it
            old.current = replace(old.current, epoch=STATIC_LEAVE, revoking={})
            old.revoke_deadline_ms = None
            self._on_event(f"group {g.group_id}: static member {member_id} "
                           f"({hb.instance_id}) left for now")
            self._write_then(g, [cr.current(g.group_id, member_id, old.current)], now,
                             lambda: respond(HeartbeatAnswer(m.NONE, member_id=member_id,
                                                             member_epoch=STATIC_LEAVE)),
                             respond)
            return
        if hb.member_epoch == LEAVE:
            if old is None:
                respond(HeartbeatAnswer(m.UNKNOWN_MEMBER_ID, f"member {member_id} is unknown"))
                return
            entries = self._remove_consumer(g, old, "left the group")
            self._write_then(g, entries, now, lambda: respond(HeartbeatAnswer(
                m.NONE, member_id=member_id, member_epoch=LEAVE)), respond)
            return
        if hb.member_epoch > 0:
            if old is None:
                respond(HeartbeatAnswer(m.UNKNOWN_MEMBER_ID,
                                        f"member {member_id} is not in group {hb.group_id}"))
                return
            c = old.current
            if hb.member_epoch > c.epoch or (hb.member_epoch < c.epoch and not (
                    hb.member_epoch == c.previous_epoch and is_subset(hb.owned, c.assigned))):
                respond(HeartbeatAnswer(m.FENCED_MEMBER_EPOCH, (
                    f"member epoch {hb.member_epoch} is not the coordinator's {c.epoch}: the "
                    f"member must give up its partitions and rejoin")))
                return
        entries: list = []
        if replaced is not None:
            old = self._replace_static(g, replaced, member_id, entries)
        mb = replace(old) if old is not None else ConsumerMember(member_id)
        if (hb.member_epoch == 0 and old is not None and replaced is None
                and old.current != MemberAssignment()):
            # a rejoin: what it held is free again, unless a static member left it for now
            mb.current = (replace(old.current, epoch=0, previous_epoch=0)
                          if old.current.epoch == STATIC_LEAVE else MemberAssignment())
            entries.append(cr.current(g.group_id, member_id, mb.current))
        mb.client_id, mb.client_host = hb.client_id, hb.client_host
        if hb.rack_id is not None:
            mb.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms != -1:
            mb.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.assignor is not None:
            mb.assignor = hb.assignor
        if hb.subscribed is not None:
            mb.subscribed = tuple(sorted(set(hb.subscribed)))
        if hb.regex is not None:
            mb.regex = hb.regex or None
        if hb.instance_id is not None:
            mb.instance_id = hb.instance_id
        subscription = lambda x: (x.subscribed, x.regex, x.assignor)  # noqa: E731
        bump = old is None or subscription(mb) != subscription(old)
        described = lambda x: (x.client_id, x.client_host, x.rack_id,  # noqa: E731
                               x.rebalance_timeout_ms, x.instance_id, *subscription(x))
        if old is None or replaced is not None or described(mb) != described(old):
            entries.append(cr.member(g.group_id, mb))
        cg.members[member_id] = mb
        entries += self._refresh_target(g, bump, f"member {member_id} "
                                        f"{'joined' if old is None else 'changed'}")
        before = mb.current
        mb.current = reconcile(before, cg.assignment_epoch, cg.target.get(member_id, {}),
                               cg.owner_epochs(), hb.owned)
        if mb.current != before:
            entries.append(cr.current(g.group_id, member_id, mb.current))
            mb.revoke_deadline_ms = (now + mb.rebalance_timeout_ms
                                     if mb.current.state == UNREVOKED else None)
        session_ms, interval_ms = group_configs.timing(self.rm.image, g.group_id, self.options)
        mb.expires_ms = now + session_ms
        full = hb.member_epoch == 0 or (hb.rebalance_timeout_ms != -1
                                        and hb.subscribed is not None and hb.owned is not None)
        answer = HeartbeatAnswer(
            m.NONE, member_id=member_id, member_epoch=mb.current.epoch,
            interval_ms=interval_ms,
            assignment=mb.current.assigned if full or mb.current.assigned != before.assigned
            else None)
        self._write_then(g, entries, now, lambda: respond(answer), respond)

    def _refresh_target(self, g: Group, bump: bool, reason: str) -> list:
        """Step 2: the group epoch and the target assignment; the records that changed."""
        cg, entries = g.consumer, []
        topics, existing = {}, self.rm.image.topics
        topics_of = cg.topics_of(existing)
        for name in sorted(set().union(*topics_of.values())):
            t = existing.get(name)
            if t is not None and t.partitions:
                topics[name] = (t.topic_id, len(t.partitions))
        if topics != cg.subscription:
            cg.subscription = topics
            entries.append(cr.subscription(g.group_id, topics))
            bump = True
        if bump:
            cg.group_epoch += 1
            entries.append(cr.group_epoch(g.group_id, cg.group_epoch))
            self._on_event(Reached("group-rebalanced",
                                   f"group {g.group_id}: epoch {cg.group_epoch} ({reason})"))
        if cg.group_epoch > cg.assignment_epoch:
            target = assign(cg.assignor(), topics_of, cg.subscription, cg.target)
            for mid, parts in sorted(target.items()):
                if cg.target.get(mid) != parts:
                    entries.append(cr.target_member(g.group_id, mid, parts))
            cg.target = target
            cg.assignment_epoch = cg.group_epoch
            entries.append(cr.target_epoch(g.group_id, cg.assignment_epoch))
        return entries

    def _replace_static(self, g: Group, left: ConsumerMember, member_id: str,
                        entries: list) -> ConsumerMember:
        """A static member joining in the place of the one that left with its instance id:
        a copy under the new member id, with its assignment and its target (Kafka's
        replaceMember); the old one's records tombstoned."""
        cg = g.consumer
        del cg.members[left.member_id]
        target = cg.target.pop(left.member_id, {})
        entries += cr.member_gone(g.group_id, left.member_id)
        cg.target[member_id] = target
        entries.append(cr.target_member(g.group_id, member_id, target))
        self._on_event(f"group {g.group_id}: static member {member_id} "
                       f"({left.instance_id}) replaces {left.member_id}")
        return replace(left, member_id=member_id, revoke_deadline_ms=None,
                       current=replace(left.current, epoch=0, previous_epoch=0))

    def _remove_consumer(self, g: Group, mb: ConsumerMember, reason: str) -> list:
        """The records that remove ``mb``; none if its leaving made the group classic
        again (:meth:`~.group_migration.GroupMigration._downgrade` wrote them)."""
        if self._downgrade(g, mb, self._now, reason):
            return []
        cg = g.consumer
        del cg.members[mb.member_id]
        cg.target.pop(mb.member_id, None)
        self._on_event(f"group {g.group_id}: member {mb.member_id} removed ({reason})")
        entries = cr.member_gone(g.group_id, mb.member_id)
        return entries + self._refresh_target(g, True, f"member {mb.member_id} {reason}")

    def _write_then(self, g: Group, entries: list, now: int, then: Callable[[], None],
                    respond: Callable[[HeartbeatAnswer], None]) -> None:
        def done(error: int) -> None:
            if error == m.NONE:
                then()
            else:
                respond(HeartbeatAnswer(error, f"writing the group's records failed: "
                                               f"{m.ERROR_NAMES.get(error, error)}"))
        if entries:
            self.log.write(g.partition, entries, now, done)
        else:
            self.log.barrier(g.partition, now, done)

    def _expire_consumers(self, g: Group, now: int) -> None:
        for mb in list(g.consumer.members.values()):
            if now >= mb.expires_ms:
                reason = "session timed out"
            elif mb.revoke_deadline_ms is not None and now >= mb.revoke_deadline_ms:
                reason = ("did not revoke its partitions" if mb.classic is None
                          else "did not rejoin or sync") + " within its rebalance timeout"
            else:
                continue
            entries = self._remove_consumer(g, mb, reason)
            if entries:
                self.log.write(g.partition, entries, now, lambda error: None)
            if g.consumer is None:  # downgraded: the classic group's timers take over
                return

    def _consumer_deadlines(self, g: Group) -> list[int]:
        out = []
        for mb in g.consumer.members.values():
            out.append(mb.expires_ms)
            if mb.revoke_deadline_ms is not None:
                out.append(mb.revoke_deadline_ms)
        return out

    # ------------------------------------------------------------ offsets of a consumer group

    @staticmethod
    def _consumer_commit_error(cg: ConsumerGroup, member_id: str, epoch: int,
                               transactional: bool, version: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit (and, with ``version`` None,
        validateOffsetFetch)."""
        if epoch < 0 and not member_id and (not cg.members or version is None):
            return m.NONE  # the admin client, or a read that names no member
        mb = cg.members.get(member_id)
        if mb is None:
            return m.UNKNOWN_MEMBER_ID
        if mb.classic is not None:  # its generation is its member epoch
            return m.NONE if epoch == mb.current.epoch else m.ILLEGAL_GENERATION
        if version is not None and not transactional and version < 9:
            return m.UNSUPPORTED_VERSION
        return m.NONE if epoch == mb.current.epoch else m.STALE_MEMBER_EPOCH
