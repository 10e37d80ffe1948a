"""A classic group's state: its members, generation and protocol, and the moves between
its states (Kafka's GroupState.validPreviousStates), checked in one place
(``Group.transition``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import group_metadata as gm
from ..messages import FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID
from .consumer_group import ConsumerGroup


EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")

# state -> the states a group may enter it from (Kafka's GroupState.validPreviousStates)
VALID_PREVIOUS = {
    DEAD: {STABLE, PREPARING, COMPLETING, EMPTY, DEAD},
    COMPLETING: {PREPARING},
    STABLE: {COMPLETING},
    PREPARING: {STABLE, COMPLETING, EMPTY},
    EMPTY: {PREPARING},
}


class GroupStateError(RuntimeError):
    """A transition the table does not allow: a bug of ours."""


@dataclass(slots=True)
class JoinResult:
    error: int
    member_id: str = ""
    generation: int = -1
    protocol: str | None = None
    leader: str = ""
    members: tuple = ()  # (member id, metadata) for the leader, else empty
    skip_assignment: bool = False  # JoinGroup v9: a static leader rejoined a stable group


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple  # ((name, metadata), ...), in the member's order of preference
    expires_ms: int = 0
    assignment: bytes = b""
    instance_id: str | None = None  # group.instance.id of a static member (KIP-345)
    on_join: Callable[[JoinResult], None] | None = None
    on_sync: Callable[[int, bytes], None] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""


@dataclass(eq=False, slots=True)
class Group:
    group_id: str
    partition: int
    state: str = EMPTY
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)  # member id -> expiry (v4 joins)
    offsets: dict[tuple[str, int], gm.OffsetValue] = field(default_factory=dict)
    # producer id -> offsets of its open transaction (TxnOffsetCommit), until its marker
    txn_offsets: dict[int, dict[tuple[str, int], gm.OffsetValue]] = field(default_factory=dict)
    # (topic, partition) -> transactional offset commits being written
    txn_writing: dict[tuple[str, int], int] = field(default_factory=dict)
    join_deadline_ms: int = 0
    initial_budget_ms: int = -1  # >= 0 while the first rebalance of an empty group waits
    new_member_added: bool = False
    consumer: ConsumerGroup | None = None  # a KIP-848 group: its members, epochs, target

    def transition(self, target: str) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise GroupStateError(f"group {self.group_id!r}: {self.state} -> {target} is not a "
                                  f"valid transition")
        self.state = target

    def static_member(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        for mb in self.members.values():
            if mb.instance_id == instance_id:
                return mb
        return None

    def member_error(self, member_id: str, instance_id: str | None) -> int | None:
        """Kafka's validateMember: a request naming an instance id whose member is now
        another is FENCED_INSTANCE_ID; an unknown member or instance UNKNOWN_MEMBER_ID."""
        if instance_id is not None:
            static = self.static_member(instance_id)
            if static is None:
                return UNKNOWN_MEMBER_ID
            if static.member_id != member_id:
                return FENCED_INSTANCE_ID
        return None if member_id in self.members else UNKNOWN_MEMBER_ID

    def all_joined(self) -> bool:
        return not self.pending and all(mb.on_join is not None for mb in self.members.values())
