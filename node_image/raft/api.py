"""What the Raft client gives its state machine (committed batches, leader changes, the
listener it calls) and the error it raises when a safety rule would break."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .. import records
from ..log import OffsetAndEpoch


class SafetyViolation(AssertionError):
    """A Raft safety rule was about to be broken. ``invariant`` names the rule."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    base_offset: int
    last_offset: int
    epoch: int
    records: tuple[records.Record, ...]
    size_bytes: int


class Listener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...
    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch,
                             entries: list[records.Record]) -> None: ...
    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...
