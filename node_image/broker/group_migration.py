"""Online migration between the classic protocol and KIP-848's (Kafka 4's
``group.consumer.migration.policy``): a group keeps its members, their partitions and its
offsets while its consumers are upgraded one by one, or rolled back.

- **Upgrade**: the first ConsumerGroupHeartbeat (epoch 0) to a classic group that has
  members and uses the consumer protocol type turns it into a consumer group: the classic
  group's record is tombstoned; each classic member becomes a member of the consumer group
  at the generation as its epoch, holding what its last SyncGroup gave it (its target too),
  subscribed to the topics its JoinGroup metadata named, kept as a *classic member*
  (session timeout and protocols). Joins and syncs parked in the classic group are answered
  REBALANCE_IN_PROGRESS. Then the new member joins as any does: the group epoch rises and
  the target is computed again.
- **Classic members in a consumer group** keep speaking JoinGroup, SyncGroup, Heartbeat
  and LeaveGroup (Kafka's classicGroup*ToConsumerGroup): a JoinGroup updates the member from
  its subscription and takes its next step towards its target (:func:`.reconcile`, with the
  partitions its subscription says it still owns), answered with its member epoch as the
  generation and its first protocol, once written; a SyncGroup gives its assigned partitions
  in the consumer protocol; a Heartbeat answers REBALANCE_IN_PROGRESS while the group epoch
  is ahead of the member's, while it has partitions to revoke, or when partitions it waits
  for are free, so it rejoins. A member asked to rejoin, or that joined, has its rebalance
  timeout to rejoin or sync, else it is removed. Its offset commits carry its member epoch
  as the generation (ILLEGAL_GENERATION otherwise).
- **Downgrade**: when the last member speaking the consumer protocol leaves (or is
  removed) and classic members remain, the group becomes classic again: the consumer
  group's records are tombstoned, a classic group written at the group epoch as its
  generation, each member given its target as its assignment, and a rebalance started so
  that they rejoin under a leader of their own. A classic static member that takes the
  place of the last consumer-protocol member (its instance id, no member id) downgrades
  the group the same way, without the member it replaces, and then joins the classic
  group as a new static member (Kafka keeps the replaced member's assignment for it and
  may skip the rebalance; here the group rebalances).

The policy: ``bidirectional`` (Kafka's default), ``upgrade``, ``downgrade`` or ``disabled``;
an upgrade the policy or the group refuses is GROUP_ID_NOT_FOUND, as Kafka answers it.
"""
from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Callable

from .. import messages as m
from . import consumer_protocol as cp
from . import consumer_records as cr
from . import group_metadata as gm
from .consumer_group import (STABLE, UNRELEASED, UNREVOKED, ClassicMeta, ConsumerGroup,
                             ConsumerMember, MemberAssignment, reconcile)
from .group_state import EMPTY, Group, JoinResult, Member
from .group_state import STABLE as CLASSIC_STABLE

CONSUMER = "consumer"  # the protocol type of consumers


class GroupMigration:
    """Mixed into :class:`~.group_coordinator.GroupCoordinator`."""

    def _policy_allows(self, way: str) -> bool:
        return self.options.group_consumer_migration_policy in (way, "bidirectional")

    def _ids(self, by_name: dict) -> dict:
        """Topic name -> partitions, as topic id -> partitions (topics that no longer exist
        left out)."""
        topics = self.rm.image.topics
        return {topics[n].topic_id: frozenset(ps) for n, ps in by_name.items()
                if n in topics and ps}

    def _names(self, by_id: dict) -> dict:
        names = self.rm.image.topic_names
        return {names[t]: ps for t, ps in by_id.items() if t in names and ps}

    # ------------------------------------------------------------ upgrade

    def _upgrade(self, g: Group, now: int) -> str | None:
        """Turn classic ``g`` (with members) into a consumer group; why not, if refused."""
        gid = f"Cannot upgrade classic group {g.group_id} to consumer group because"
        if not self._policy_allows("upgrade"):
            return f"{gid} the online upgrade is disabled."
        if g.protocol_type != CONSUMER:
            return f"{gid} the group does not use the consumer embedded protocol."
        gen = g.generation
        cg = ConsumerGroup(group_epoch=gen, assignment_epoch=gen)
        try:
            for mb in g.members.values():
                sub = cp.decode_subscription(mb.metadata(g.protocol) if g.protocol
                                             else mb.protocols[0][1])
                held = self._ids(cp.decode_assignment(mb.assignment))
                cg.members[mb.member_id] = ConsumerMember(
                    mb.member_id, mb.client_id, mb.client_host, sub.rack_id,
                    mb.rebalance_timeout_ms, tuple(sorted(set(sub.topics))),
                    instance_id=mb.instance_id,
                    current=MemberAssignment(gen, gen, STABLE, held),
                    expires_ms=now + mb.session_timeout_ms,
                    classic=ClassicMeta(mb.session_timeout_ms, mb.protocols))
                cg.target[mb.member_id] = held
        except cp.ConsumerProtocolError as exc:
            return f"{gid} the embedded consumer protocol is malformed: {exc}."
        for mb in g.members.values():
            self._answer_join(mb, JoinResult(m.REBALANCE_IN_PROGRESS, mb.member_id))
            self._answer_sync(mb, m.REBALANCE_IN_PROGRESS)
        entries: list = [(gm.group_key(g.group_id), None), cr.group_epoch(g.group_id, gen)]
        for mid, cm in cg.members.items():
            entries += [cr.member(g.group_id, cm), cr.target_member(g.group_id, mid, cm.current.assigned),
                        cr.current(g.group_id, mid, cm.current)]
        entries.append(cr.target_epoch(g.group_id, gen))
        g.members, g.pending, g.protocol, g.leader = {}, {}, None, None
        g.consumer, g.protocol_type, g.state = cg, CONSUMER, EMPTY
        self.log.write(g.partition, entries, now, lambda error: None)
        self._on_event(f"group {g.group_id}: upgraded from the classic protocol at "
                       f"generation {gen} with {len(cg.members)} member(s)")
        return None

    # ------------------------------------------------------------ downgrade

    def _downgrade(self, g: Group, leaving: ConsumerMember, now: int, reason: str) -> bool:
        """If ``leaving`` is the last member speaking the consumer protocol and classic
        members remain, make ``g`` classic again (its records written) and say so."""
        cg = g.consumer
        others = [x for x in cg.members.values() if x.member_id != leaving.member_id]
        if (leaving.classic is not None or not others
                or any(x.classic is None for x in others) or not self._policy_allows("downgrade")):
            return False
        entries: list = []
        for x in cg.members.values():
            entries += cr.member_gone(g.group_id, x.member_id)
        entries += cr.group_gone(g.group_id)
        g.members = {x.member_id: Member(
            x.member_id, x.client_id, x.client_host, x.classic.session_timeout_ms,
            x.rebalance_timeout_ms, CONSUMER, x.classic.protocols,
            expires_ms=now + x.classic.session_timeout_ms, instance_id=x.instance_id)
            for x in others}
        g.consumer, g.protocol_type, g.generation = None, CONSUMER, cg.group_epoch
        g.protocol = self._select_protocol(g)
        g.leader = next(iter(g.members))
        for x in others:
            mb = g.members[x.member_id]
            mb.assignment = cp.encode_assignment(
                self._names(cg.target.get(x.member_id, {})),
                cp.subscription_version(mb.metadata(g.protocol)))
        g.state = CLASSIC_STABLE  # (as a group loaded from its record: no transition)
        self.log.write(g.partition, entries, now, lambda error: None)
        self._store_group(g, now, lambda error: None)
        self._on_event(f"group {g.group_id}: downgraded to the classic protocol at "
                       f"generation {g.generation}: the last consumer-protocol member "
                       f"{leaving.member_id} {reason}")
        self._prepare_rebalance(g, now, "downgraded to the classic protocol")
        return True

    # ------------------------------------------------------------ classic members

    def _classic_member(self, cg: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> tuple[int, ConsumerMember | None]:
        """Kafka's validateConsumerGroupMember, and the member must speak the classic
        protocol."""
        if instance_id is not None:
            mb = cg.static_member(instance_id)
            if mb is None:
                return m.UNKNOWN_MEMBER_ID, None
            if member_id and mb.member_id != member_id:
                return m.FENCED_INSTANCE_ID, None
        else:
            mb = cg.members.get(member_id)
        if mb is None or mb.classic is None:
            return m.UNKNOWN_MEMBER_ID, None
        return m.NONE, mb

    @staticmethod
    def _protocols_supported(cg: ConsumerGroup, protocols: tuple) -> bool:
        """Kafka's supportsClassicProtocols: one of ``protocols`` every classic member has."""
        names = {n for n, _ in protocols}
        for mb in cg.members.values():
            if mb.classic is not None:
                names &= {n for n, _ in mb.classic.protocols}
        return bool(names)

    def _classic_join_consumer(self, g: Group, member_id: str, client_id: str, client_host: str,
                               session_timeout_ms: int, rebalance_timeout_ms: int,
                               protocol_type: str, protocols: tuple,
                               require_known_member_id: bool, now: int,
                               respond: Callable[[JoinResult], None],
                               instance_id: str | None) -> bool:
        """Answered here, or False: the join downgraded the group, and is a classic
        group's join from now on."""
        cg = g.consumer
        problem = None
        if protocol_type != CONSUMER or not self._protocols_supported(cg, protocols):
            problem = f"member {member_id or '(new)'}'s protocols are not supported"
        else:
            try:
                sub = cp.decode_subscription(protocols[0][1])
            except cp.ConsumerProtocolError as exc:
                problem = str(exc)
        if problem is not None:
            self._on_event(f"JoinGroup to consumer group {g.group_id} refused: {problem}")
            respond(JoinResult(m.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return True
        holder = None if instance_id is None else cg.static_member(instance_id)
        if (holder is not None and not member_id and holder.classic is None
                and self._downgrade(g, holder, now, f"was replaced by a classic static member "
                                                    f"({instance_id})")):
            return False
        entries: list = []
        given = member_id
        if not member_id:
            member_id = f"{client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
            if require_known_member_id:
                respond(JoinResult(m.MEMBER_ID_REQUIRED, member_id))
                return True
        old = cg.members.get(member_id)
        if holder is not None and holder.member_id != member_id:
            if given:
                respond(JoinResult(m.FENCED_INSTANCE_ID, given))
                return True
            # its place taken, whichever protocol it spoke (the newcomer speaks the classic)
            old = self._replace_static(g, holder, member_id, entries)
        elif old is not None and old.classic is None:
            respond(JoinResult(m.UNKNOWN_MEMBER_ID, member_id))  # it speaks the new protocol
            return True
        mb = replace(old) if old is not None else ConsumerMember(member_id)
        mb.client_id, mb.client_host = client_id, client_host
        mb.rebalance_timeout_ms = rebalance_timeout_ms
        mb.subscribed, mb.regex, mb.assignor = tuple(sorted(set(sub.topics))), None, None
        if sub.rack_id is not None:
            mb.rack_id = sub.rack_id
        if instance_id is not None:
            mb.instance_id = instance_id
        mb.classic = ClassicMeta(session_timeout_ms, protocols)
        if old is None or mb != old:
            entries.append(cr.member(g.group_id, mb))
        cg.members[member_id] = mb
        bump = old is None or old.subscribed != mb.subscribed or old.regex is not None
        entries += self._refresh_target(g, bump, f"classic member {member_id} "
                                        f"{'joined' if old is None else 'rejoined'}")
        before = mb.current
        mb.current = reconcile(before, cg.assignment_epoch, cg.target.get(member_id, {}),
                               cg.owner_epochs(), self._ids(sub.owned))
        if mb.current != before:
            entries.append(cr.current(g.group_id, member_id, mb.current))
        mb.expires_ms = now + session_timeout_ms
        mb.revoke_deadline_ms = now + rebalance_timeout_ms  # until it syncs
        result = JoinResult(m.NONE, member_id, mb.current.epoch, mb.classic.protocol, "", ())

        def done(error: int) -> None:
            respond(result if error == m.NONE else JoinResult(error, member_id))
        if entries:
            self.log.write(g.partition, entries, now, done)
        else:
            self.log.barrier(g.partition, now, done)
        return True

    def _classic_sync_consumer(self, g: Group, generation: int, member_id: str,
                               protocol_type: str | None, protocol_name: str | None,
                               instance_id: str | None, now: int,
                               respond: Callable[[int, bytes], None]) -> None:
        cg = g.consumer
        error, mb = self._classic_member(cg, member_id, instance_id)
        if error == m.NONE and generation != mb.current.epoch:
            error = m.ILLEGAL_GENERATION
        if error == m.NONE and (protocol_type not in (None, CONSUMER)
                                or protocol_name not in (None, mb.classic.protocol)):
            error = m.INCONSISTENT_GROUP_PROTOCOL
        if error == m.NONE and cg.group_epoch > mb.current.epoch \
                and mb.current.state != UNREVOKED:
            error = self._rejoin(mb, now)
        if error != m.NONE:
            respond(error, b"")
            return
        mb.expires_ms = now + mb.classic.session_timeout_ms
        mb.revoke_deadline_ms = None
        assignment = cp.encode_assignment(self._names(mb.current.assigned),
                                          cp.subscription_version(mb.classic.protocols[0][1]))
        self.log.barrier(g.partition, now,
                         lambda error: respond(error, assignment if error == m.NONE else b""))

    def _classic_heartbeat_consumer(self, g: Group, generation: int, member_id: str,
                                    instance_id: str | None, now: int) -> int:
        cg = g.consumer
        error, mb = self._classic_member(cg, member_id, instance_id)
        if error != m.NONE:
            return error
        if generation != mb.current.epoch:
            return m.ILLEGAL_GENERATION
        mb.expires_ms = now + mb.classic.session_timeout_ms
        c = mb.current
        if cg.group_epoch > c.epoch or c.state == UNREVOKED or (
                c.state == UNRELEASED and not self._waiting_on_others(cg, mb)):
            return self._rejoin(mb, now)
        return m.NONE

    @staticmethod
    def _rejoin(mb: ConsumerMember, now: int) -> int:
        if mb.revoke_deadline_ms is None:  # it has its rebalance timeout to rejoin
            mb.revoke_deadline_ms = now + mb.rebalance_timeout_ms
        return m.REBALANCE_IN_PROGRESS

    @staticmethod
    def _waiting_on_others(cg: ConsumerGroup, mb: ConsumerMember) -> bool:
        """Whether a partition of its target that it lacks is still held by another."""
        owner = cg.owner_epochs()
        for t, ps in cg.target.get(mb.member_id, {}).items():
            for p in ps - mb.current.assigned.get(t, frozenset()):
                if owner(t, p) != -1:
                    return True
        return False

    def _classic_leave_consumer(self, g: Group, member_id: str, instance_id: str | None,
                                now: int) -> int:
        error, mb = self._classic_member(g.consumer, member_id, instance_id)
        if error != m.NONE:
            return error
        entries = self._remove_consumer(g, mb, "left the group")
        if entries:
            self.log.write(g.partition, entries, now, lambda error: None)
        return m.NONE
