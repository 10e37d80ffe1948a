"""One share group's view of one partition (KIP-932's SharePartition), kept by the
partition's leader, without I/O.

Theory of operation
-------------------
Records of a share group are not owned by a member for a whole assignment, as in a
consumer group: each record is *acquired* by one member for a while (the acquisition lock,
``share.record.lock.duration.ms``), and then *acknowledged* by it. The share-partition
start offset (SPSO) is the first record not yet done with; the end offset (SPEO) the first
never acquired. Every offset in ``[SPSO, SPEO)`` is *in flight* and has a state:

================  =====================================================================
AVAILABLE         may be acquired (again): released, or its lock ran out
ACQUIRED          given to one member until its lock runs out
ARCHIVED          done with: accepted, rejected, a gap, or delivered too often
================  =====================================================================

The transitions (checked in :data:`TRANSITIONS`, one place):

- acquire: AVAILABLE -> ACQUIRED, the delivery count raised; an offset at SPEO and beyond
  enters as ACQUIRED with count 1 (whole batches are acquired, as Kafka does, but where
  the in-flight limit ends inside a batch, only its first part; a control
  batch, or under read_committed an aborted transaction's batch, which no consumer is
  given, is ARCHIVED at once);
- acknowledge ACCEPT, REJECT or GAP: ACQUIRED -> ARCHIVED; RELEASE: ACQUIRED -> AVAILABLE,
  or ARCHIVED if the record has been delivered ``max_deliveries`` times;
- the lock runs out, or the member's share session ends: as RELEASE.

:meth:`snapshot` and :meth:`restore` carry the state to a new leader: SPSO, and each
in-flight record archived or available (a held record is released) with its delivery
count.

Only the member that holds a record may acknowledge it; anything else is
INVALID_RECORD_STATE and changes nothing (a batch of acknowledgements is applied whole or
not at all). When the records at SPSO are ARCHIVED, SPSO moves past them and they are
forgotten. At most ``max_in_flight`` offsets are in flight (Kafka's
``group.share.partition.max.record.locks``): beyond that nothing new is acquired until
SPSO moves.
"""
from __future__ import annotations

from dataclasses import dataclass

AVAILABLE, ACQUIRED, ARCHIVED = "available", "acquired", "archived"
# acknowledgement types, as the wire has them
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
ACK_NAMES = {GAP: "gap", ACCEPT: "accept", RELEASE: "release", REJECT: "reject"}

# (state, event) -> state; "release" is where a released record goes while it may be
# delivered again, "exhausted" once it may not
TRANSITIONS = {
    (AVAILABLE, "acquire"): ACQUIRED,
    (ACQUIRED, "accept"): ARCHIVED,
    (ACQUIRED, "reject"): ARCHIVED,
    (ACQUIRED, "gap"): ARCHIVED,
    (ACQUIRED, "release"): AVAILABLE,
    (ACQUIRED, "exhausted"): ARCHIVED,
}


class InvalidTransition(AssertionError):
    """A bug of ours: a transition :data:`TRANSITIONS` does not have."""


@dataclass(slots=True)
class InFlight:
    state: str
    delivery_count: int = 0
    owner: str = ""
    deadline_ms: int = 0


def _step(rec: InFlight, event: str) -> None:
    nxt = TRANSITIONS.get((rec.state, event))
    if nxt is None:
        raise InvalidTransition(f"share record: no transition from {rec.state} on {event}")
    rec.state = nxt
    if nxt != ACQUIRED:
        rec.owner, rec.deadline_ms = "", 0


class SharePartition:
    def __init__(self, start: int, lock_ms: int = 30_000, max_deliveries: int = 5,
                 max_in_flight: int = 2000) -> None:
        self.spso = self.speo = start
        self.lock_ms = lock_ms
        self.max_deliveries = max_deliveries
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}

    # -- acquiring --------------------------------------------------------------------
    def available(self, now: int) -> list[int]:
        """The in-flight offsets that may be acquired now (locks that ran out released)."""
        self.expire(now)
        return [o for o in range(self.spso, self.speo) if self.records[o].state == AVAILABLE]

    def may_take_new(self) -> bool:
        return self.speo - self.spso < self.max_in_flight

    def acquire_offsets(self, offsets, member: str, now: int) -> None:
        """Acquire in-flight AVAILABLE ``offsets`` for ``member``."""
        for o in offsets:
            rec = self.records[o]
            _step(rec, "acquire")
            rec.delivery_count += 1
            rec.owner, rec.deadline_ms = member, now + self.lock_ms

    def acquire_new(self, first: int, last: int, member: str, now: int,
                    undeliverable: bool = False) -> None:
        """A batch ``[first, last]`` at or beyond SPEO enters: acquired by ``member``
        (``undeliverable``, a control batch or an aborted transaction's records under
        read_committed: archived). Offsets between SPEO and ``first`` (none in the log) are
        archived as gaps."""
        if last < self.speo:
            return
        for o in range(self.speo, max(first, self.speo)):
            self.records[o] = InFlight(ARCHIVED)
        for o in range(max(first, self.speo), last + 1):
            self.records[o] = (InFlight(ARCHIVED) if undeliverable
                               else InFlight(ACQUIRED, 1, member, now + self.lock_ms))
        self.speo = last + 1
        self._advance()

    def acquired_ranges(self, member: str, offsets) -> list[tuple[int, int, int]]:
        """``offsets`` held by ``member`` as (first, last, delivery count) runs."""
        out: list[list[int]] = []
        for o in sorted(offsets):
            rec = self.records.get(o)
            if rec is None or rec.state != ACQUIRED or rec.owner != member:
                continue
            if out and out[-1][1] == o - 1 and out[-1][2] == rec.delivery_count:
                out[-1][1] = o
            else:
                out.append([o, o, rec.delivery_count])
        return [tuple(r) for r in out]

    # -- acknowledging ----------------------------------------------------------------
    def acknowledge(self, member: str, first: int, last: int, types: list[int],
                    now: int) -> str | None:
        """Apply one acknowledgement batch: ``types`` has one type for the whole range or
        one per offset. Returns why it is refused (INVALID_RECORD_STATE), or None."""
        if last < first or (len(types) not in (1, last - first + 1)):
            return f"acknowledgement batch {first}-{last} with {len(types)} types"
        if any(t not in ACK_NAMES for t in types):
            return f"unknown acknowledge type in {types}"
        if first < self.spso or last >= self.speo:  # checked before any loop over the range
            return (f"offsets {first}-{last} are not all in flight "
                    f"({self.spso}-{self.speo - 1} are)")
        self.expire(now)
        for o in range(first, last + 1):
            rec = self.records.get(o)
            if rec is None or rec.state != ACQUIRED or rec.owner != member:
                state = "not in flight" if rec is None else rec.state
                return f"offset {o} is {state}, not acquired by member {member}"
        for i, o in enumerate(range(first, last + 1)):
            self._finish(self.records[o], ACK_NAMES[types[0] if len(types) == 1 else types[i]])
        self._advance()
        return None

    def release_member(self, member: str) -> int:
        """The member's share session ended: what it holds is released. Returns how many."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.owner == member:
                self._finish(rec, "release")
                n += 1
        self._advance()
        return n

    def expire(self, now: int) -> None:
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.deadline_ms <= now:
                self._finish(rec, "release")
        self._advance()

    def truncate_below(self, start: int) -> None:
        """The log now starts at ``start`` (DeleteRecords, retention): what lies below is
        gone for this group too."""
        if start <= self.spso:
            return
        for o in range(self.spso, min(start, self.speo)):
            self.records.pop(o, None)
        self.spso = start
        self.speo = max(self.speo, start)

    # -- persisting ------------------------------------------------------------------
    def snapshot(self) -> tuple[int, tuple]:
        """(SPSO, runs): every in-flight offset in runs (first, last, archived?, delivery
        count) of one state and count; an acquired record is written as available (its
        lock does not outlive the leader), with the deliveries it has had."""
        runs: list[list] = []
        for o in range(self.spso, self.speo):
            rec = self.records[o]
            archived = rec.state == ARCHIVED
            if runs and runs[-1][1] == o - 1 and runs[-1][2:] == [archived, rec.delivery_count]:
                runs[-1][1] = o
            else:
                runs.append([o, o, archived, rec.delivery_count])
        return self.spso, tuple(tuple(r) for r in runs)

    @classmethod
    def restore(cls, spso: int, runs, **options) -> "SharePartition":
        """A share partition as :meth:`snapshot` left it: nothing acquired, and a record
        delivered the limit times archived (as its release would have). Offsets the runs
        skip (none that a snapshot writes) are archived."""
        sp = cls(spso, **options)
        for first, last, archived, count in runs:
            if last < sp.speo:
                continue
            for o in range(sp.speo, first):
                sp.records[o] = InFlight(ARCHIVED)
            count = min(count, sp.max_deliveries)
            state = ARCHIVED if archived or count >= sp.max_deliveries else AVAILABLE
            for o in range(max(first, sp.speo), last + 1):
                sp.records[o] = InFlight(state, count)
            sp.speo = last + 1
        sp._advance()
        return sp

    def _finish(self, rec: InFlight, event: str) -> None:
        if event == "release" and rec.delivery_count >= self.max_deliveries:
            event = "exhausted"
        _step(rec, event)

    def _advance(self) -> None:
        while self.spso < self.speo and self.records[self.spso].state == ARCHIVED:
            del self.records[self.spso]
            self.spso += 1

    def check(self) -> None:
        """The invariants (tests call this after every step)."""
        assert self.spso <= self.speo, (self.spso, self.speo)
        assert set(self.records) == set(range(self.spso, self.speo)), "in-flight offsets"
        assert self.spso == self.speo or self.records[self.spso].state != ARCHIVED
        for o, rec in self.records.items():
            assert (rec.state == ACQUIRED) == bool(rec.owner), (o, rec)
            assert rec.delivery_count <= self.max_deliveries, (o, rec)
