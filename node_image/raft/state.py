"""Epoch states of a KRaft replica (Kafka's EpochState classes).

Transitions (KIP-595 with KIP-996 pre-vote):

    Unattached --election timeout--> Prospective --majority pre-votes--> Candidate
    Candidate --majority votes--> Leader --check-quorum / shutdown--> Resigned
    Candidate --election timeout--> Prospective
    Prospective --pre-votes rejected--> Unattached
    any --higher epoch seen--> Unattached or Follower
    Follower --fetch timeout--> Prospective (voters) / Unattached (observers)
    Resigned --election timeout--> Prospective

Every state knows its epoch; only Unattached and Prospective may hold a vote
for another replica; Candidate, Leader and Resigned hold a vote for
themselves. These classes are plain data: the transitions and their
persistence live in ``node_image.raft.client``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..storage import ReplicaKey


@dataclass(slots=True)
class UnattachedState:
    epoch: int
    voted_key: ReplicaKey | None
    election_deadline_ms: int
    name = "Unattached"


@dataclass(slots=True)
class ProspectiveState:
    epoch: int
    voted_key: ReplicaKey | None
    leader_id: int | None  # a leader we lost contact with, if any
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name = "Prospective"


@dataclass(slots=True)
class CandidateState:
    epoch: int
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    name = "Candidate"


@dataclass(slots=True)
class ReplicaState:
    end_offset: int | None = None
    last_fetch_ms: int | None = None
    directory_id: str | None = None


@dataclass(slots=True)
class LeaderState:
    epoch: int
    epoch_start_offset: int
    voters: dict[int, ReplicaState]
    observers: dict[int, ReplicaState]
    check_quorum_deadline_ms: int
    high_watermark: int | None = None
    fetched_since_check: set[int] = field(default_factory=set)
    begin_acked: set[int] = field(default_factory=set)
    name = "Leader"


@dataclass(slots=True)
class FollowerState:
    epoch: int
    leader_id: int
    voted_key: ReplicaKey | None
    fetch_deadline_ms: int
    fetching_snapshot: tuple | None = None  # (OffsetAndEpoch, bytearray, size)
    last_fetch_ok_ms: int | None = None  # last successful fetch answer from the leader
    name = "Follower"


@dataclass(slots=True)
class ResignedState:
    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...]
    unacked: set[int]
    name = "Resigned"


EpochState = (UnattachedState | ProspectiveState | CandidateState | LeaderState
              | FollowerState | ResignedState)
