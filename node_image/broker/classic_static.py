"""Static members of classic groups (KIP-345, ``group.instance.id``), as Kafka's
GroupCoordinator keeps them.

A static member is known by its instance id across restarts: it does not leave when it
closes (the clients send no LeaveGroup), and a JoinGroup with its instance id and no member
id takes its place under a new member id (``<instance id>-<uuid>``) with its assignment:

- in a Stable group whose protocol the new member's protocols do not change, without a
  rebalance: the group is stored with the new member id and the join answered with the
  current generation (from JoinGroup v9 the leader is told to skip the assignment; before,
  the answer names the old leader id, so the rejoined leader does not assign);
- in CompletingRebalance, with a rebalance (the leader may have assigned under the old id);
- in PreparingRebalance, it joins the rebalance under way.

Whatever the old member id still waited for (a JoinGroup or SyncGroup answer) is answered
FENCED_INSTANCE_ID, as is any later request naming the instance with the old member id
(:meth:`~.group_state.Group.member_error`). A static member is removed, like any other,
when its session times out, when it does not rejoin a rebalance in time, or by a
LeaveGroup (v3+ may name only the instance id, as the admin client does).
"""
from __future__ import annotations

import uuid
from typing import Callable

from .. import messages as m
from .group_state import COMPLETING, PREPARING, STABLE, Group, JoinResult, Member


class StaticMembers:
    """Mixed into :class:`~.group_coordinator.GroupCoordinator`."""

    def _static_join(self, g: Group, member_id: str, joining: Member, now: int,
                     respond: Callable[[JoinResult], None], skip_ok: bool) -> bool:
        """A JoinGroup with an instance id; False when it goes on as a known member's
        join (the instance is that member's)."""
        instance = joining.instance_id
        static = g.static_member(instance)
        if member_id:
            error = g.member_error(member_id, instance)
            if error is not None:
                respond(JoinResult(error, member_id))
                return True
            return False
        joining.member_id = f"{instance}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
        if static is None:
            self._add_member(g, joining, now, respond)
            return True
        self._take_over_instance(g, static, joining, now, respond, skip_ok)
        return True

    def _take_over_instance(self, g: Group, static: Member, joining: Member, now: int,
                            respond: Callable[[JoinResult], None], skip_ok: bool) -> None:
        """``skip_ok``: the client reads JoinGroup v9's skip_assignment."""
        old_id, new_id, leader = static.member_id, joining.member_id, g.leader
        before = (static.protocols, static.session_timeout_ms, static.rebalance_timeout_ms,
                  static.client_id, static.client_host)
        self._rename_static(g, static, new_id)
        static.protocols = joining.protocols
        static.session_timeout_ms = joining.session_timeout_ms
        static.rebalance_timeout_ms = joining.rebalance_timeout_ms
        static.client_id, static.client_host = joining.client_id, joining.client_host
        static.expires_ms = now + static.session_timeout_ms
        static.on_join = respond
        self._on_event(f"group {g.group_id}: static member {static.instance_id} rejoined as "
                       f"{new_id} (was {old_id})")
        if g.state == COMPLETING or (g.state == STABLE and g.protocol != self._select_protocol(g)):
            self._prepare_rebalance(g, now, f"static member {static.instance_id} rejoined as "
                                    f"{new_id}" + (" with another protocol"
                                                   if g.state == STABLE else ""))
            return
        if g.state == PREPARING:
            self._maybe_complete_join(g, now)
            return
        if g.state != STABLE:
            raise AssertionError(f"group {g.group_id} in {g.state} with static member "
                                 f"{static.instance_id}")
        generation = g.generation

        def stored(error: int) -> None:
            if static.on_join is not respond or static.member_id != new_id:
                return  # answered already (a rebalance, or fenced in the meantime)
            static.on_join = None
            if error != m.NONE or g.generation != generation:  # as it was: the new one retries
                (static.protocols, static.session_timeout_ms, static.rebalance_timeout_ms,
                 static.client_id, static.client_host) = before
                self._rename_static(g, static, old_id)
                respond(JoinResult(error if error != m.NONE else m.REBALANCE_IN_PROGRESS, ""))
                return
            if not skip_ok:  # the old leader id: a rejoined leader must not assign
                respond(JoinResult(m.NONE, new_id, g.generation, g.protocol, leader or ""))
                return
            result = self._join_result(g, static)
            result.skip_assignment = g.leader == new_id
            respond(result)
        self._store_group(g, now, stored)

    def _rename_static(self, g: Group, mb: Member, new_id: str) -> None:
        """Kafka's replaceStaticMember: what the old member id waited for is fenced."""
        old_id = mb.member_id
        self._answer_join(mb, JoinResult(m.FENCED_INSTANCE_ID, old_id))
        self._answer_sync(mb, m.FENCED_INSTANCE_ID)
        del g.members[old_id]
        mb.member_id = new_id
        g.members[new_id] = mb
        if g.leader == old_id:
            g.leader = new_id
