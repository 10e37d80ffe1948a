"""GroupCoordinator: Kafka's consumer groups, kept in ``__consumer_offsets``: the classic
protocol here, KIP-848's consumer protocol in :mod:`.consumer_coordinator`.

Theory of operation
-------------------
Every group belongs to one partition of ``__consumer_offsets``
(:func:`~.group_metadata.partition_for`); the broker that leads that
partition is the group's coordinator. The topic is replicated like any
other, so what a coordinator writes (committed offsets, a group's
generation and assignment) survives its loss: when a broker becomes leader
of a partition (or leader again in a new epoch) it rebuilds the partition's
groups by reading the partition's log from start to end, as Kafka's
GroupMetadataManager does; when it stops leading, it forgets them and
answers NOT_COORDINATOR.

A group moves through Kafka's states; every move is checked against
:data:`VALID_PREVIOUS` (Kafka's ``GroupState.validPreviousStates``) in
:meth:`Group.transition`, the one place a state changes::

    Empty --join--> PreparingRebalance --all joined or timeout--> CompletingRebalance
    CompletingRebalance --leader's SyncGroup stored--> Stable
    Stable / CompletingRebalance --join, leave, session expiry--> PreparingRebalance
    PreparingRebalance --no member left--> Empty

- JoinGroup: a member without an id gets one; from v4 it is first answered
  MEMBER_ID_REQUIRED and must join again with it (a *pending* member). Joins
  are parked until every member has rejoined or the largest rebalance
  timeout passes (members that did not rejoin are dropped); the first
  rebalance of an empty group waits ``group.initial.rebalance.delay.ms``
  for more members. The new generation's leader receives every member's
  subscription.
- SyncGroup: the leader's assignment is written to the log (acks=all) and
  handed to every member once it is committed; a failed write sends the
  group back to rebalancing.
- Heartbeat keeps a member's session; a member silent for its session
  timeout is removed (unless a JoinGroup or SyncGroup of it is parked).
- OffsetCommit writes offset records (acks=all); a commit is visible to
  OffsetFetch once the replicas have it. Commits from members of an old
  generation are refused (ILLEGAL_GENERATION); a group that does not use
  the protocol (generation -1) may commit while it has no members.

Writes that fail are mapped as Kafka maps them: too few replicas becomes
COORDINATOR_NOT_AVAILABLE, lost leadership NOT_COORDINATOR.

Static members (``group.instance.id``) are :mod:`.classic_static`'s; a group moving
between this protocol and KIP-848's, :mod:`.group_migration`'s. Not kept (documented):
offset expiry, and compaction of the topic (its log grows; loading reads all of it).

The coordinator does no I/O: requests come in with a callback for the
answer, :meth:`poll` runs timers and completes writes, and
:meth:`next_deadline_ms` tells the runtime when to poll next.
"""
from __future__ import annotations

import uuid
from typing import Callable

from .. import group_configs
from .. import messages as m
from .. import records
from ..coverage import Reached
from . import group_metadata as gm
from . import consumer_records as cr
from .classic_static import StaticMembers
from .consumer_coordinator import ConsumerGroups
from .group_migration import GroupMigration
from .consumer_group import UNREVOKED, ConsumerGroup
from .coordinator_log import CoordinatorLog
from .group_metadata import OFFSETS_TOPIC
from .producer_state import marker_of
from .group_offsets import GroupOffsets
from . import share_records as sr
from .share_coordinator import ShareGroup, ShareGroups, ShareMember
from .group_state import (COMPLETING, EMPTY, PREPARING, STABLE, Group, JoinResult,
                          Member)


class GroupCoordinator(GroupOffsets, ConsumerGroups, GroupMigration, StaticMembers, ShareGroups):
    def __init__(self, replica_manager, options, on_event: Callable[[str], None],
                 wall_clock: Callable[[], int], rng) -> None:
        self.rm = replica_manager
        self.options = options
        self._on_event = on_event
        self.wall_clock = wall_clock
        self.rng = rng
        self.groups: dict[str, Group] = {}
        self.share_groups: dict[str, ShareGroup] = {}  # KIP-932's (share_coordinator)
        self.share_states: dict = {}  # KIP-932's share partitions' states (share_coordinator)
        self.log = CoordinatorLog(replica_manager, OFFSETS_TOPIC, options.offsets_commit_timeout_ms,
                                  wall_clock, self._load, self._unload)
        self.owned = self.log.owned  # __consumer_offsets partition -> leader epoch loaded
        self._now = 0  # the time of the input being handled, for write callbacks

    # ------------------------------------------------------------ ownership

    def partition_of(self, group_id: str) -> int:
        return gm.partition_for(group_id, self.options.offsets_topic_partitions)

    def _error_for(self, group_id: str) -> int:
        """NONE if this broker coordinates ``group_id`` now, else the error to answer."""
        if not group_id:
            return m.INVALID_GROUP_ID
        return m.NONE if self.partition_of(group_id) in self.owned else m.NOT_COORDINATOR

    def _unload(self, pid: int) -> None:
        self._unload_share_states(pid)
        gone = [g for g in self.groups.values() if g.partition == pid]
        for g in gone:
            for mb in g.members.values():
                self._answer_join(mb, JoinResult(m.NOT_COORDINATOR, mb.member_id))
                self._answer_sync(mb, m.NOT_COORDINATOR)
            del self.groups[g.group_id]
        if gone:
            self._on_event(f"{OFFSETS_TOPIC}-{pid}: no longer coordinator of "
                           f"{', '.join(g.group_id for g in gone)}")

    def _load(self, pid: int, epoch: int, batches: list) -> None:
        groups: dict[str, Group] = {}
        open_txns: dict[int, list] = {}  # producer id -> its uncommitted offset records
        count = 0

        has_metadata: dict[str, bool] = {}  # group -> its last group record was not a tombstone
        shares: dict[str, ShareGroup] = {}  # share groups, as folded
        share_kept: dict[str, bool] = {}  # share group -> its epoch record is not a tombstone

        def group(name: str) -> Group:
            return groups.setdefault(name, Group(name, pid))
        for header, batch in batches:
            recs = records.decode_records(batch)[1]
            count += len(recs)
            if header.is_control:
                if header.is_transactional:
                    done = open_txns.pop(header.producer_id, [])
                    if marker_of(header, batch)[0] == records.COMMIT_MARKER:
                        for key, value in done:
                            group(key.group).offsets[(key.topic, key.partition)] = value
                continue
            for rec in recs:
                if rec.key is None:
                    continue
                try:
                    key = gm.read_key(rec.key)
                    if isinstance(key, gm.OffsetKey):
                        value = None if rec.value is None else gm.read_offset_value(rec.value)
                        if header.is_transactional:
                            open_txns.setdefault(header.producer_id, []).append((key, value))
                        elif value is None:
                            group(key.group).offsets.pop((key.topic, key.partition), None)
                        else:
                            group(key.group).offsets[(key.topic, key.partition)] = value
                    elif isinstance(key, gm.ShareStateKey):
                        k = (key.group, key.topic_id, key.partition)
                        if rec.value is None:
                            self.share_states.pop(k, None)
                        else:
                            self.share_states[k] = gm.read_share_state_value(rec.value)
                    elif isinstance(key, gm.ShareKey):  # a KIP-932 share group's record
                        sg = shares.setdefault(key.group, ShareGroup(key.group))
                        sr.fold(sg, key, rec.value, ShareMember)
                        if key.kind == gm.SHARE_EPOCH:
                            share_kept[key.group] = rec.value is not None
                    elif isinstance(key, gm.ConsumerKey):  # a KIP-848 group's record
                        g = group(key.group)
                        if g.consumer is None:
                            g.consumer, g.members = ConsumerGroup(), {}
                        cr.fold(g.consumer, key, rec.value)
                        if key.kind == gm.GROUP_EPOCH:
                            has_metadata[key.group] = rec.value is not None
                    else:
                        has_metadata[key.group] = rec.value is not None
                        group(key.group).consumer = None  # the newer kind of group wins
                        self._restore(group(key.group), None if rec.value is None
                                      else gm.read_group_value(rec.value), self._now)
                except gm.GroupRecordError as exc:
                    raise gm.GroupRecordError(f"{OFFSETS_TOPIC}-{pid} offset {rec.offset}: "
                                              f"{exc}") from None
        for producer_id, items in open_txns.items():
            for key, value in items:
                group(key.group).txn_offsets.setdefault(producer_id, {})[
                    (key.topic, key.partition)] = value
        for g in groups.values():  # as Kafka loads: a group that has neither its metadata
            # nor offsets (deleted, or every offset deleted) is not there
            if has_metadata.get(g.group_id) or g.offsets or g.txn_offsets:
                self.groups[g.group_id] = g
            if g.consumer is not None:
                g.protocol_type, g.state = "consumer", EMPTY
                session_ms = group_configs.timing(self.rm.image, g.group_id, self.options)[0]
                for mb in g.consumer.members.values():  # sessions start again, as Kafka's
                    mb.expires_ms = self._now + (session_ms if mb.classic is None
                                                 else mb.classic.session_timeout_ms)
                    mb.revoke_deadline_ms = (self._now + mb.rebalance_timeout_ms
                                             if mb.current.state == UNREVOKED else None)
        self.share_load(pid, {gid: g for gid, g in shares.items() if share_kept.get(gid)})
        if count:  # (an empty partition says nothing: there are 50 of them)
            self._on_event(Reached("coordinator-loaded",
                                   f"{OFFSETS_TOPIC}-{pid}: coordinator in epoch {epoch}: loaded "
                                   f"{len(groups)} group(s) from {count} record(s)"))

    def _restore(self, g: Group, v: gm.GroupValue | None, now: int) -> None:
        if v is None:
            g.state, g.protocol_type, g.protocol, g.generation, g.leader = EMPTY, None, None, 0, None
            g.members = {}
            return
        g.protocol_type, g.generation, g.protocol, g.leader = (
            v.protocol_type or None, v.generation, v.protocol, v.leader)
        g.members = {}
        for mv in v.members:
            g.members[mv.member_id] = Member(
                mv.member_id, mv.client_id, mv.client_host, mv.session_timeout_ms,
                mv.rebalance_timeout_ms, v.protocol_type, ((v.protocol, mv.subscription),),
                expires_ms=now + mv.session_timeout_ms, assignment=mv.assignment,
                instance_id=mv.group_instance_id)
        g.state = STABLE if g.members else EMPTY  # as Kafka loads a group: no transition

    # ------------------------------------------------------------ writes

    def _store_group(self, g: Group, now: int, done: Callable[[int], None]) -> None:
        members = tuple(gm.MemberValue(mb.member_id, mb.instance_id, mb.client_id, mb.client_host,
                                       mb.rebalance_timeout_ms, mb.session_timeout_ms,
                                       mb.metadata(g.protocol), mb.assignment)
                        for mb in g.members.values())
        value = gm.GroupValue(g.protocol_type or "", g.generation, g.protocol, g.leader,
                              self.wall_clock(), members)
        self.log.write(g.partition, [(gm.group_key(g.group_id), gm.group_value(value))], now,
                       done)

    # ------------------------------------------------------------ JoinGroup

    def join(self, group_id: str, member_id: str, client_id: str, client_host: str,
             session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
             protocols: tuple, require_known_member_id: bool, now: int,
             respond: Callable[[JoinResult], None], instance_id: str | None = None,
             skip_ok: bool = False) -> None:
        """``instance_id``: a static member's (:mod:`.classic_static`); ``skip_ok``: the
        client reads JoinGroup v9's skip_assignment."""
        error = self._error_for(group_id)
        if error != m.NONE:
            respond(JoinResult(error, member_id))
            return
        opts = self.options
        if not (opts.group_min_session_timeout_ms <= session_timeout_ms
                <= opts.group_max_session_timeout_ms):
            respond(JoinResult(m.INVALID_SESSION_TIMEOUT, member_id))
            return
        if not protocol_type or not protocols:
            respond(JoinResult(m.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                respond(JoinResult(m.UNKNOWN_MEMBER_ID, member_id))
                return
            g = self.groups[group_id] = Group(group_id, self.partition_of(group_id))
        if g.consumer is not None and g.consumer.members:
            # a classic member in a KIP-848 group (.group_migration); one that downgraded it
            # joins the classic group below
            if self._classic_join_consumer(
                    g, member_id, client_id, client_host, session_timeout_ms,
                    rebalance_timeout_ms, protocol_type, protocols,
                    require_known_member_id and instance_id is None, now, respond, instance_id):
                return
        elif g.consumer is not None:
            g.consumer, g.protocol_type = None, None  # an empty one becomes classic
            self.log.write(g.partition, cr.group_gone(group_id), now, lambda error: None)
        if not self._protocols_fit(g, protocol_type, protocols):
            respond(JoinResult(m.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if instance_id is not None and self._static_join(g, member_id, Member(
                member_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                protocol_type, protocols, instance_id=instance_id), now, respond, skip_ok):
            return
        if not member_id:
            member_id = f"{client_id}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
            if require_known_member_id:
                g.pending[member_id] = now + session_timeout_ms
                respond(JoinResult(m.MEMBER_ID_REQUIRED, member_id))
                return
            self._add_member(g, Member(member_id, client_id, client_host, session_timeout_ms,
                                       rebalance_timeout_ms, protocol_type, protocols), now,
                             respond)
            return
        if member_id in g.pending:
            del g.pending[member_id]
            self._add_member(g, Member(member_id, client_id, client_host, session_timeout_ms,
                                       rebalance_timeout_ms, protocol_type, protocols), now,
                             respond)
            return
        mb = g.members.get(member_id)
        if mb is None:
            respond(JoinResult(m.UNKNOWN_MEMBER_ID, member_id))
            return
        same = mb.protocols == protocols
        mb.session_timeout_ms, mb.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        mb.expires_ms = now + session_timeout_ms
        if g.state == PREPARING:
            mb.protocols = protocols
            self._answer_join(mb, JoinResult(m.UNKNOWN_MEMBER_ID, member_id))  # a replaced join
            mb.on_join = respond
            self._maybe_complete_join(g, now)
        elif g.state == COMPLETING and same:
            respond(self._join_result(g, mb))  # the answer it missed
        elif g.state == STABLE and same and g.leader != member_id:
            respond(self._join_result(g, mb))
        else:
            mb.protocols = protocols
            mb.on_join = respond
            self._prepare_rebalance(g, now, f"member {member_id} rejoined with new metadata")

    def _protocols_fit(self, g: Group, protocol_type: str, protocols: tuple) -> bool:
        if g.state == EMPTY and not g.members:
            return True
        if g.protocol_type is not None and protocol_type != g.protocol_type:
            return False
        names = {n for n, _ in protocols}
        for mb in g.members.values():
            names &= {n for n, _ in mb.protocols}
        return bool(names)

    def _add_member(self, g: Group, mb: Member, now: int,
                    respond: Callable[[JoinResult], None]) -> None:
        mb.on_join = respond
        mb.expires_ms = now + mb.session_timeout_ms
        g.members[mb.member_id] = mb
        g.new_member_added = True
        if len(g.members) == 1:  # the first member of an empty group names its type
            g.protocol_type = mb.protocol_type
        if g.state == PREPARING:
            self._maybe_complete_join(g, now)
        else:
            self._prepare_rebalance(g, now, f"member {mb.member_id} joined")

    def _prepare_rebalance(self, g: Group, now: int, reason: str) -> None:
        if g.state == COMPLETING:
            for mb in g.members.values():
                mb.assignment = b""
                self._answer_sync(mb, m.REBALANCE_IN_PROGRESS)
        delay = self.options.group_initial_rebalance_delay_ms
        if g.state == EMPTY:
            budget = max((mb.rebalance_timeout_ms for mb in g.members.values()), default=0)
            g.initial_budget_ms = max(budget - delay, 0)
            g.join_deadline_ms = now + min(delay, budget) if delay > 0 else now
            g.new_member_added = False
        else:
            g.initial_budget_ms = -1
            g.join_deadline_ms = now + max(
                (mb.rebalance_timeout_ms for mb in g.members.values()), default=0)
        g.transition(PREPARING)
        self._on_event(Reached("group-rebalanced", f"group {g.group_id}: rebalancing from "
                               f"generation {g.generation} ({reason})"))
        self._maybe_complete_join(g, now)

    def _maybe_complete_join(self, g: Group, now: int) -> None:
        if g.state != PREPARING:
            return
        if g.initial_budget_ms >= 0:
            if now < g.join_deadline_ms:
                return
            if g.new_member_added and g.initial_budget_ms > 0:
                step = min(self.options.group_initial_rebalance_delay_ms, g.initial_budget_ms)
                g.initial_budget_ms -= step
                g.join_deadline_ms = now + step
                g.new_member_added = False
                return
        elif not g.all_joined() and now < g.join_deadline_ms:
            return
        g.initial_budget_ms = -1
        for mb in [mb for mb in g.members.values() if mb.on_join is None]:
            self._remove_member(g, mb, now, "did not rejoin in time", rebalance=False)
        g.pending.clear()
        g.generation += 1
        if not g.members:
            # Kafka keeps the protocol type of a group that emptied (ListGroups and
            # DescribeGroups still say "consumer"); the next first member sets it again
            g.protocol, g.leader = None, None
            g.transition(EMPTY)
            self._on_event(f"group {g.group_id}: empty at generation {g.generation}")
            self._store_group(g, now, lambda error: None)
            return
        g.protocol = self._select_protocol(g)
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.transition(COMPLETING)
        self._on_event(f"group {g.group_id}: generation {g.generation} with "
                       f"{len(g.members)} member(s), leader {g.leader}, protocol {g.protocol}")
        for mb in g.members.values():
            mb.expires_ms = now + mb.session_timeout_ms
            self._answer_join(mb, self._join_result(g, mb))

    def _select_protocol(self, g: Group) -> str:
        common = None
        for mb in g.members.values():
            names = [n for n, _ in mb.protocols]
            common = names if common is None else [n for n in common if n in names]
        votes = {n: 0 for n in common}
        for mb in g.members.values():
            first = next(n for n, _ in mb.protocols if n in votes)
            votes[first] += 1
        return max(common, key=lambda n: votes[n])

    def _join_result(self, g: Group, mb: Member) -> JoinResult:
        members = ()
        if mb.member_id == g.leader:
            members = tuple((x.member_id, x.metadata(g.protocol)) for x in g.members.values())
        return JoinResult(m.NONE, mb.member_id, g.generation, g.protocol, g.leader or "",
                          members)

    @staticmethod
    def _answer_join(mb: Member, result: JoinResult) -> None:
        respond, mb.on_join = mb.on_join, None
        if respond is not None:
            respond(result)

    @staticmethod
    def _answer_sync(mb: Member, error: int, assignment: bytes = b"") -> None:
        respond, mb.on_sync = mb.on_sync, None
        if respond is not None:
            respond(error, assignment)

    # ------------------------------------------------------------ SyncGroup

    def sync(self, group_id: str, generation: int, member_id: str, assignments: dict,
             now: int, respond: Callable[[int, bytes], None], protocol_type: str | None = None,
             protocol_name: str | None = None, instance_id: str | None = None) -> None:
        """``protocol_type`` and ``protocol_name`` (SyncGroup v5+), when given, must be the
        group's (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
        self._now = now
        error = self._error_for(group_id)
        g = self.groups.get(group_id)
        if error == m.NONE and g is not None and g.consumer is not None:
            return self._classic_sync_consumer(g, generation, member_id, protocol_type,
                                               protocol_name, instance_id, now, respond)
        mb = g.members.get(member_id) if g is not None else None
        if error == m.NONE:
            error = m.UNKNOWN_MEMBER_ID if g is None else (
                g.member_error(member_id, instance_id) or m.NONE)
        if error == m.NONE and generation != g.generation:
            error = m.ILLEGAL_GENERATION
        if error == m.NONE and any(given is not None and ours is not None and given != ours
                                   for given, ours in ((protocol_type, g.protocol_type),
                                                       (protocol_name, g.protocol))):
            error = m.INCONSISTENT_GROUP_PROTOCOL
        if error == m.NONE and g.state == PREPARING:
            error = m.REBALANCE_IN_PROGRESS
        if error != m.NONE:
            respond(error, b"")
            return
        mb.expires_ms = now + mb.session_timeout_ms
        if g.state == STABLE:
            respond(m.NONE, mb.assignment)
            return
        self._answer_sync(mb, m.REBALANCE_IN_PROGRESS)  # a replaced sync
        mb.on_sync = respond
        if member_id != g.leader:
            return
        for x in g.members.values():
            x.assignment = assignments.get(x.member_id, b"")
        gen = g.generation

        def stored(error: int) -> None:
            if self.groups.get(group_id) is not g or g.generation != gen or g.state != COMPLETING:
                return
            if error != m.NONE:
                if error == m.REQUEST_TIMED_OUT:
                    error = m.REBALANCE_IN_PROGRESS
                for x in g.members.values():
                    x.assignment = b""
                    self._answer_sync(x, error)
                self._prepare_rebalance(g, self._now, f"storing generation {gen} failed: "
                                        f"{m.ERROR_NAMES.get(error, error)}")
                return
            g.transition(STABLE)
            for x in g.members.values():
                self._answer_sync(x, m.NONE, x.assignment)
        self._store_group(g, now, stored)

    # ------------------------------------------------------------ Heartbeat, LeaveGroup

    def heartbeat(self, group_id: str, generation: int, member_id: str, now: int,
                  instance_id: str | None = None) -> int:
        error = self._error_for(group_id)
        if error != m.NONE:
            return error
        g = self.groups.get(group_id)
        if g is None:
            return m.UNKNOWN_MEMBER_ID
        if g.consumer is not None:
            return self._classic_heartbeat_consumer(g, generation, member_id, instance_id, now)
        error = g.member_error(member_id, instance_id)
        if error is not None:
            return error
        mb = g.members[member_id]
        if generation != g.generation:
            return m.ILLEGAL_GENERATION
        mb.expires_ms = now + mb.session_timeout_ms
        return m.REBALANCE_IN_PROGRESS if g.state == PREPARING else m.NONE

    def leave(self, group_id: str, member_id: str, now: int,
              instance_id: str | None = None) -> int:
        """A member leaving; from LeaveGroup v3 a static member may be named by its instance
        id alone (the admin client's removeMembersFromConsumerGroup)."""
        error = self._error_for(group_id)
        if error != m.NONE:
            return error
        g = self.groups.get(group_id)
        if g is None:
            return m.UNKNOWN_MEMBER_ID
        if g.consumer is not None:
            return self._classic_leave_consumer(g, member_id, instance_id, now)
        if not member_id and instance_id is not None:
            static = g.static_member(instance_id)
            member_id = static.member_id if static is not None else ""
        elif member_id in g.pending:
            del g.pending[member_id]
            self._maybe_complete_join(g, now)
            return m.NONE
        error = g.member_error(member_id, instance_id)
        if error is not None:
            return error
        self._remove_member(g, g.members[member_id], now, "left the group")
        return m.NONE

    def _remove_member(self, g: Group, mb: Member, now: int, reason: str,
                       rebalance: bool = True) -> None:
        del g.members[mb.member_id]
        self._on_event(f"group {g.group_id}: member {mb.member_id} removed ({reason})")
        self._answer_join(mb, JoinResult(m.UNKNOWN_MEMBER_ID, mb.member_id))
        self._answer_sync(mb, m.UNKNOWN_MEMBER_ID)
        if not rebalance:
            return
        if g.state in (STABLE, COMPLETING):
            self._prepare_rebalance(g, now, f"member {mb.member_id} {reason}")
        elif g.state == PREPARING:
            self._maybe_complete_join(g, now)

    # ------------------------------------------------------------ DescribeGroups, ListGroups

    def describe(self, group_id: str) -> tuple[int, Group | None]:
        error = self._error_for(group_id)
        return error, (self.groups.get(group_id) if error == m.NONE else None)

    def list_groups(self) -> list[Group]:
        return sorted(self.groups.values(), key=lambda g: g.group_id)

    # ------------------------------------------------------------ timers

    def poll(self, now: int, roles_changed: bool) -> None:
        self._now = now
        self.log.sync_ownership(now, roles_changed)
        self.log.complete(now)
        for g in list(self.groups.values()):
            for member_id, expiry in list(g.pending.items()):
                if now >= expiry:
                    del g.pending[member_id]
                    self._maybe_complete_join(g, now)
            for mb in list(g.members.values()):
                if now >= mb.expires_ms and mb.on_join is None and mb.on_sync is None \
                        and mb.member_id in g.members:
                    self._remove_member(g, mb, now, "session timed out")
            if g.state == PREPARING and now >= g.join_deadline_ms:
                self._maybe_complete_join(g, now)
            if g.consumer is not None:
                self._expire_consumers(g, now)

    def next_deadline_ms(self) -> int | None:
        times = [] if self.log.next_deadline_ms() is None else [self.log.next_deadline_ms()]
        for g in self.groups.values():
            times += g.pending.values()
            times += [mb.expires_ms for mb in g.members.values()
                      if mb.on_join is None and mb.on_sync is None]
            if g.state == PREPARING:
                times.append(g.join_deadline_ms)
            if g.consumer is not None:
                times += self._consumer_deadlines(g)
        return min(times) if times else None

    def shutdown(self) -> None:
        for g in self.groups.values():
            for mb in g.members.values():
                self._answer_join(mb, JoinResult(m.NOT_COORDINATOR, mb.member_id))
                self._answer_sync(mb, m.NOT_COORDINATOR)
        self.log.shutdown()
