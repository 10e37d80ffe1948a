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
themselves. These classes are plain data; ``TRANSITIONS`` is the one table
of the moves allowed between them and what each does to the epoch, checked
in one place (``illegal``) by ``node_image.raft.client``, which raises a
SafetyViolation on any other move.
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
    # The high watermark the last fetch response to this replica carried: a fetch at the
    # log end is parked only while the replica already knows the current one.
    hwm_sent: int | None = None
    # When its fetch last reached the leader's log end (KIP-853: a voter added must have)
    caught_up_ms: int | None = None
    # Under the planted bug voter-counted-before-catch-up: counted at the leader's log end
    # until its first fetch as a voter
    assumed: bool = False


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


# (from, to) -> what the move does to the epoch: "same", "next" (one more: a candidate's
# own), "higher" (a higher epoch was seen) or "same-or-higher".
TRANSITIONS: dict[tuple[str, str], str] = {
    ("Unattached", "Unattached"): "same-or-higher",  # a vote granted; a higher epoch seen
    ("Unattached", "Prospective"): "same",  # election timeout
    ("Unattached", "Follower"): "same-or-higher",  # a leader heard of
    ("Prospective", "Prospective"): "same",  # the pre-vote round timed out
    ("Prospective", "Candidate"): "next",  # a majority of pre-votes
    ("Prospective", "Unattached"): "same-or-higher",  # pre-votes rejected; a higher epoch
    ("Prospective", "Follower"): "same-or-higher",
    ("Candidate", "Leader"): "same",  # a majority of votes
    ("Candidate", "Prospective"): "same",  # election timeout
    ("Candidate", "Unattached"): "higher",
    ("Candidate", "Follower"): "same-or-higher",  # another won this epoch, or a later one
    ("Leader", "Resigned"): "same",  # check quorum, shutdown
    ("Leader", "Unattached"): "higher",
    ("Leader", "Follower"): "higher",
    ("Follower", "Prospective"): "same",  # fetch timeout (voters)
    ("Follower", "Unattached"): "same-or-higher",  # fetch timeout (observers); higher epoch
    ("Follower", "Follower"): "higher",  # the leader of a later epoch (never two in one)
    ("Resigned", "Prospective"): "same",  # election timeout
    ("Resigned", "Unattached"): "same-or-higher",  # removed from the voter set; higher epoch
    ("Resigned", "Follower"): "higher",
}
_EPOCH_RULES = {"same": lambda a, b: b == a, "next": lambda a, b: b == a + 1,
                "higher": lambda a, b: b > a, "same-or-higher": lambda a, b: b >= a}
assert set(TRANSITIONS.values()) <= set(_EPOCH_RULES)


def illegal(old, new) -> str | None:
    """Why the move from state ``old`` to ``new`` breaks the table, or None."""
    rule = TRANSITIONS.get((old.name, new.name))
    if rule is None:
        return f"{old.name} -> {new.name} is not a transition of KRaft"
    if not _EPOCH_RULES[rule](old.epoch, new.epoch):
        return (f"{old.name} -> {new.name} must keep the epoch {rule.replace('-', ' ')}, "
                f"went from {old.epoch} to {new.epoch}")
    return None

