"""KafkaRaftClient: the KRaft replication protocol as a state machine without I/O.

Theory of operation
-------------------
The client is driven by three kinds of input, each carrying the current time
of the node's clock in milliseconds:

- ``handle(src, message, now_ms)``: a request from a peer (``src`` is an
  opaque token the runtime uses to route the answer) or the response to one
  of our requests (``src`` is then the peer's node id);
- ``poll(now_ms)``: timers (election, fetch, check-quorum, request
  timeouts, parked fetches);
- ``append(entries, now_ms)``: the state machine (controller) on the leader
  wants records written.

It never opens sockets or sleeps, and reads no clock but the one it is given
(``clock``). Its timers run on that clock as Kafka's do: ``KafkaRaftClient``
reads ``Time.milliseconds()``, the wall clock, and its ``Timer`` never runs
backward (``Timer.update`` keeps the largest time it has seen), so a clock
stepped back holds every Raft timer until it catches up, and a clock stepped
forward expires them at once. Deadlines are given back on the caller's clock
(``now_ms``, monotonic): ``next_deadline_ms`` is the last input's ``now_ms``
plus the time left on the Raft clock. Without ``clock`` the timers run on
``now_ms`` itself (the scenario tests). What it wants sent goes to
the node's ``Outbox`` (given at construction) as (destination, message)
pairs which the runtime takes; the state machine registers itself with
``register(listener)``, as with Kafka's ``RaftClient.register``;
``next_deadline_ms()`` says when to call ``poll`` at the latest. Durable
state goes through ``UnifiedLog`` and ``QuorumStateStore``, both on an
injected ``FileSystem``; every write that a message depends on is flushed
before the message is put in the outbox (persist before you send).

Rules (Kafka's KIP-595, KIP-996, KIP-853 and the KafkaRaftClient code):

- Epochs only grow; every change of epoch, vote or leader is written to
  ``quorum-state`` before it takes effect.
- A replica grants at most one vote per epoch, and only to a candidate whose
  log (last epoch, end offset) is at least as up to date as its own.
  Pre-votes do not change any state.
- Replication is pull-based: followers and observers send Fetch with their
  log end offset and last fetched epoch; the leader answers with records, or
  with the epoch and end offset where their logs diverge (the follower
  truncates there, never below its high watermark), or with a snapshot id
  when the offset is below the log start (the follower then FetchSnapshots).
- A new leader appends a LeaderChange control record; it exposes a high
  watermark only once a majority of voters holds an offset past that
  record (the own-epoch commit rule). The high watermark never decreases.
- A leader that has not heard a Fetch from a majority of voters for
  1.5 x fetch timeout resigns (check quorum) and tells the voters through
  EndQuorumEpoch, naming preferred successors by end offset.
- A replica that was leader when it stopped restarts as Resigned.
- The state machine only sees committed records, in order; a leader's
  listener hears of the leadership only after it has read every record
  before the epoch start; a leader never loads a snapshot.
A broken rule raises :class:`SafetyViolation` naming it: a bug, never repaired.
"""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import msgpack

from .. import messages as m
from .. import records
from ..config import RaftConfig
from ..coverage import Reached
from ..log import OffsetAndEpoch, UnifiedLog
from ..outbox import Outbox
from ..storage import ElectionState, QuorumStateStore, ReplicaKey
from .requests import RequestManager
from .state import (CandidateState, FollowerState, LeaderState, ProspectiveState, ReplicaState,
                    ResignedState, UnattachedState, illegal)

logger = logging.getLogger(__name__)


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


class KafkaRaftClient:
    def __init__(self, *, node_id: int, directory_id: str, cluster_id: str,
                 voters: tuple[ReplicaKey, ...], log: UnifiedLog, store: QuorumStateStore,
                 config: RaftConfig, rng: random.Random, outbox: Outbox,
                 now_ms: int, bugs: frozenset[str] = frozenset(),
                 on_event: Callable[[str], None] | None = None,
                 clock: Callable[[], int] | None = None) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.cluster_id = cluster_id
        self.voters = {v.node_id: v for v in voters}
        self.log = log
        self.store = store
        self.config = config
        self.rng = rng
        self.listener: Listener | None = None  # register(); Kafka's RaftClient.register
        self.bugs = bugs
        self.outbox = outbox
        self.requests = RequestManager(config.request_timeout_ms, config.retry_backoff_ms)
        self._on_event = on_event or (lambda msg: logger.info(msg))
        self._correlation = rng.randrange(1 << 30)
        self._parked_fetches: list[tuple[Any, m.FetchRequest, int]] = []
        self._next_listener_offset = 0
        self._bootstrap_index = node_id
        self._clock = clock
        self._input_ms = now_ms  # the caller's clock at the last input
        self._now = -1  # the Raft clock at the last input
        now_ms = self._input(now_ms)
        self._fired: LeaderAndEpoch | None = None
        self.high_watermark: int | None = None
        self.local_key = ReplicaKey(node_id, directory_id)
        voter = self.voters.get(node_id)
        self.is_voter = voter is not None and voter.matches(node_id, directory_id)
        if voter is not None and not self.is_voter:
            self._on_event(
                f"directory id {directory_id} differs from the voter set's {voter.directory_id}: "
                f"the disk was replaced; running as an observer")
        self.state = self._initial_state(now_ms)

    def _input(self, now_ms: int) -> int:
        """An input at the caller's ``now_ms``: the Raft clock then (never below its last
        reading), kept as ``_now`` beside ``_input_ms``."""
        self._input_ms = now_ms
        self._now = max(self._now, now_ms if self._clock is None else self._clock())
        return self._now

    def register(self, listener: Listener) -> None:
        """The state machine that committed records, snapshots and leader changes go to; it
        gets the latest snapshot at once."""
        assert self.listener is None, "a Raft client has one listener"
        self.listener = listener
        self._load_snapshot_at_start()

    # ------------------------------------------------------------- bootstrap

    def _initial_state(self, now: int):
        election = self.store.read()
        if "forget-vote" in self.bugs:
            election = ElectionState(election.epoch, election.leader_id, None, election.voters)
        self.persisted = election
        epoch = election.epoch
        last_epoch = self.log.last_fetched_epoch
        if epoch < last_epoch:
            self._on_event(f"quorum-state epoch {epoch} is below the log's last epoch "
                           f"{last_epoch}; starting unattached at {last_epoch}")
            return self._persist_unattached(last_epoch, None, now)
        if not self.is_voter:
            return UnattachedState(epoch, None, self._election_deadline(now))
        if election.leader_id == self.node_id:
            others = tuple(sorted(v for v in self.voters if v != self.node_id))
            return ResignedState(epoch, self._election_deadline(now), others, set(others))
        if election.leader_id is not None:
            return FollowerState(epoch, election.leader_id, election.voted_key,
                                 now + self.config.fetch_timeout_ms)
        return UnattachedState(epoch, election.voted_key, self._election_deadline(now))

    def _load_snapshot_at_start(self) -> None:
        snap = self.log.latest_snapshot_id()
        if snap is not None:
            self._deliver_snapshot(snap)

    # --------------------------------------------------------------- helpers

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def role(self) -> str:
        return self.state.name

    def leader_id(self) -> int | None:
        s = self.state
        if isinstance(s, LeaderState):
            return self.node_id
        if isinstance(s, FollowerState):
            return s.leader_id
        return None

    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _next_corr(self) -> int:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        return self._correlation

    def _election_deadline(self, now: int) -> int:
        t = self.config.election_timeout_ms
        return now + t + self.rng.randrange(t)

    def _backoff_deadline(self, now: int, attempt: int = 1) -> int:
        cap = self.config.election_backoff_max_ms
        base = min(cap, self.config.retry_backoff_ms * (1 << min(attempt, 16)))
        return now + self.rng.randrange(max(1, base))

    def _send(self, dest, msg) -> None:
        self.outbox.send(dest, msg)

    def _request(self, dest: int, make, now: int) -> None:
        corr = self._next_corr()
        self.requests.sent(dest, corr, now)
        self._send(dest, make(corr))

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        if "vote-ignores-log" in self.bugs:
            return True
        return (last_epoch, last_offset) >= (self.log.last_fetched_epoch, self.log.end_offset)

    # ----------------------------------------------------------- transitions

    def _persist(self, election: ElectionState) -> None:
        if election != self.persisted:
            self.store.write(election)
            self.persisted = election

    def _voters_tuple(self) -> tuple[ReplicaKey, ...]:
        return tuple(self.voters[v] for v in sorted(self.voters))

    def _persist_unattached(self, epoch: int, voted: ReplicaKey | None, now: int):
        self._persist(ElectionState(epoch, None, voted, self._voters_tuple()))
        return UnattachedState(epoch, voted, self._election_deadline(now))

    def _become(self, new) -> None:
        """The one place the epoch state changes: the move must be in state.TRANSITIONS."""
        why = illegal(self.state, new)
        if why is not None:
            raise SafetyViolation("StateTransition", f"node {self.node_id}: {why}")
        self.state = new

    def _leaving(self) -> None:
        s = self.state
        if isinstance(s, LeaderState):
            for src, req, _ in self._parked_fetches:
                self._send(src, self._fetch_error(req, m.NOT_LEADER_OR_FOLLOWER))
            self._parked_fetches.clear()
        self.requests.reset()

    def _to_unattached(self, epoch: int, now: int, voted: ReplicaKey | None = None) -> None:
        if epoch < self.epoch:
            raise AssertionError(f"transition to unattached epoch {epoch} below {self.epoch}")
        if epoch == self.epoch and voted is None and isinstance(self.state, (UnattachedState, ProspectiveState)):
            voted = self.state.voted_key
        self._leaving()
        self._become(self._persist_unattached(epoch, voted, now))
        self._on_event(f"unattached in epoch {epoch}" + (f", voted for {voted.node_id}" if voted else ""))

    def _to_follower(self, epoch: int, leader_id: int, now: int) -> None:
        s = self.state
        if leader_id == self.node_id and not (isinstance(s, LeaderState) and s.epoch == epoch):
            # Only a replaced disk hears that "it" leads: that was its previous self.
            if epoch > s.epoch:
                self._to_unattached(epoch, now)
            return
        if epoch < s.epoch:
            raise AssertionError(f"follow epoch {epoch} below {s.epoch}")
        if isinstance(s, FollowerState) and s.epoch == epoch and s.leader_id == leader_id:
            s.fetch_deadline_ms = now + self.config.fetch_timeout_ms
            return
        if isinstance(s, LeaderState) and s.epoch == epoch:
            raise SafetyViolation("SingleLeader",
                                  f"node {self.node_id} leads epoch {epoch} and hears of leader {leader_id}")
        voted = None
        if epoch == s.epoch and isinstance(s, (UnattachedState, ProspectiveState, FollowerState)):
            voted = s.voted_key
        elif epoch == s.epoch and isinstance(s, (CandidateState, ResignedState)):
            voted = self.local_key
        self._leaving()
        self._persist(ElectionState(epoch, leader_id, voted, self._voters_tuple()))
        self._become(FollowerState(epoch, leader_id, voted, now + self.config.fetch_timeout_ms))
        self._on_event(f"following leader {leader_id} in epoch {epoch}")

    def _to_prospective(self, now: int) -> None:
        s = self.state
        voted = s.voted_key if isinstance(s, (UnattachedState, FollowerState, ProspectiveState)) else None
        if isinstance(s, (CandidateState, ResignedState)):
            voted = self.local_key
        leader = s.leader_id if isinstance(s, FollowerState) else None
        self._leaving()
        self._become(ProspectiveState(s.epoch, voted, leader, self._election_deadline(now), {self.node_id}))
        self._on_event(f"prospective in epoch {s.epoch}: asking for pre-votes")
        self._maybe_win_prevote(now)

    def _to_candidate(self, now: int) -> None:
        epoch = self.epoch + 1
        self._leaving()
        self._persist(ElectionState(epoch, None, self.local_key, self._voters_tuple()))
        self._become(CandidateState(epoch, self._election_deadline(now), {self.node_id}))
        self._on_event(f"candidate in epoch {epoch}")
        self._maybe_win_election(now)

    def _to_leader(self, now: int) -> None:
        s = self.state
        assert isinstance(s, CandidateState)
        self._leaving()
        self._persist(ElectionState(s.epoch, self.node_id, self.local_key, self._voters_tuple()))
        start = self.log.end_offset
        voters = {v: ReplicaState(directory_id=self.voters[v].directory_id) for v in self.voters}
        self._become(LeaderState(s.epoch, start, voters, {},
                                 now + self.config.check_quorum_timeout_ms(),
                                 begin_acked={self.node_id}))
        body = msgpack.packb({"version": 0, "leaderId": self.node_id,
                              "voters": sorted(self.voters), "grantingVoters": sorted(s.granted)})
        batch = records.build_batch(start, s.epoch, [(records.control_key(
            records.CONTROL_LEADER_CHANGE), body)], now, control=True)
        self.log.append(batch)
        self.log.flush()
        self._on_event(Reached("raft-leader-elected",
                               f"leader in epoch {s.epoch}, epoch start offset {start}"))
        self._update_local_end(now)

    def _to_resigned(self, now: int, reason: str) -> None:
        s = self.state
        assert isinstance(s, LeaderState)
        others = [v for v in self.voters if v != self.node_id]
        others.sort(key=lambda v: (-(s.voters[v].end_offset or -1), v))
        self._leaving()
        self._become(ResignedState(s.epoch, self._election_deadline(now), tuple(others), set(others)))
        self._on_event(Reached("raft-leader-resigned", f"resigned in epoch {s.epoch}: {reason}"))

    # --------------------------------------------------------------- inputs

    def poll(self, now: int) -> None:
        self._poll(self._input(now))

    def _poll(self, now: int) -> None:
        self._now = now
        s = self.state
        if isinstance(s, LeaderState):
            self._poll_leader(s, now)
        elif isinstance(s, CandidateState):
            if now >= s.election_deadline_ms:
                self._to_prospective(now)
            else:
                self._send_votes(now, pre_vote=False)
        elif isinstance(s, ProspectiveState):
            if now >= s.election_deadline_ms:
                self._on_event(f"pre-vote round in epoch {s.epoch} timed out")
                self._to_prospective(now)
            else:
                self._send_votes(now, pre_vote=True)
        elif isinstance(s, FollowerState):
            if now >= s.fetch_deadline_ms:
                self._on_event(f"no fetch answer from leader {s.leader_id} for "
                               f"{self.config.fetch_timeout_ms} ms")
                if self.is_voter:
                    self._to_prospective(now)
                else:
                    self._to_unattached(s.epoch, now)
            else:
                self._send_fetch(s.leader_id, now)
        elif isinstance(s, UnattachedState):
            if self.is_voter:
                if now >= s.election_deadline_ms:
                    self._to_prospective(now)
            else:
                # Observers find the leader by asking the voters in turn.
                if now >= s.election_deadline_ms:
                    s.election_deadline_ms = now + self.config.fetch_timeout_ms
                voters = sorted(self.voters)
                target = voters[self._bootstrap_index % len(voters)]
                if all([self.requests.ready(v, now) for v in voters]):
                    self._bootstrap_index += 1
                    self._send_fetch(target, now)
        elif isinstance(s, ResignedState):
            if now >= s.election_deadline_ms:
                self._to_prospective(now)
            else:
                for v in sorted(s.unacked):
                    if self.requests.ready(v, now):
                        self._request(v, lambda c, v=v: m.EndQuorumEpochRequest(
                            self.cluster_id, c, s.epoch, self.node_id, s.preferred_successors), now)
        self._update_listener(now)

    def next_deadline_ms(self) -> int:
        s = self.state
        times = []
        if isinstance(s, LeaderState):
            times.append(s.check_quorum_deadline_ms)
            times += [d for _, _, d in self._parked_fetches]
        elif isinstance(s, FollowerState):
            times.append(s.fetch_deadline_ms)
        else:
            times.append(s.election_deadline_ms)
        rd = self.requests.next_deadline(self._now)
        if rd is not None:
            times.append(rd)
        return self._input_ms + max(min(times) - self._now, 0)

    def handle(self, src, msg, now: int) -> None:
        now = self._input(now)
        handler = self._HANDLERS.get(type(msg))
        if handler is None:
            raise TypeError(f"not a raft message: {type(msg).__name__}")
        handler(self, src, msg, now)
        self._poll(now)

    # ------------------------------------------------------------- requests

    def _common_request(self, src, cluster_id: str, epoch: int, now: int, reply) -> bool:
        """Cluster id check and stepping up to a newer epoch. True if the request was answered."""
        if cluster_id != self.cluster_id:
            self._send(src, reply(m.INCONSISTENT_CLUSTER_ID))
            return True
        return False

    def _handle_vote_request(self, src, req: m.VoteRequest, now: int) -> None:
        def reply(error: int, granted: bool = False):
            return m.VoteResponse(req.correlation_id, error, self.epoch,
                                  self.leader_id() if self.leader_id() is not None else -1,
                                  granted, req.pre_vote)
        if self._common_request(src, req.cluster_id, req.candidate_epoch, now, reply):
            return
        candidate = self.voters.get(req.candidate_id)
        if not self.is_voter or candidate is None or not candidate.matches(
                req.candidate_id, req.candidate_directory_id) or not self.local_key.matches(
                req.voter_id, req.voter_directory_id):
            self._send(src, reply(m.INVALID_VOTER_KEY))
            return
        up_to_date = self._log_up_to_date(req.last_offset_epoch, req.last_offset)
        s = self.state
        if req.pre_vote:
            # A pre-vote never changes our state (KIP-996).
            heard_from_leader = isinstance(s, LeaderState) or (
                isinstance(s, FollowerState) and s.last_fetch_ok_ms is not None
                and now < s.last_fetch_ok_ms + self.config.fetch_timeout_ms)
            granted = (req.candidate_epoch >= s.epoch and up_to_date and not heard_from_leader
                       and not (req.candidate_epoch == s.epoch and not isinstance(
                           s, (UnattachedState, ProspectiveState))))
            self._send(src, reply(m.NONE, granted))
            return
        if req.candidate_epoch < s.epoch:
            self._send(src, reply(m.FENCED_LEADER_EPOCH))
            return
        if req.candidate_epoch > s.epoch:
            if isinstance(s, LeaderState):
                self._on_event(f"vote request for epoch {req.candidate_epoch} from "
                               f"{req.candidate_id}: stepping down")
            self._to_unattached(req.candidate_epoch, now)
            s = self.state
        granted = False
        if isinstance(s, (UnattachedState, ProspectiveState)):
            already = s.voted_key
            if already is not None:
                granted = already.node_id == req.candidate_id
            elif up_to_date:
                granted = True
                self._persist(ElectionState(s.epoch, None, candidate, self._voters_tuple()))
                self._become(UnattachedState(s.epoch, candidate, self._election_deadline(now)))
                self.requests.reset()
                self._on_event(f"voted for {req.candidate_id} in epoch {s.epoch}")
        self._send(src, reply(m.NONE, granted))

    def _handle_begin_epoch(self, src, req: m.BeginQuorumEpochRequest, now: int) -> None:
        def reply(error: int):
            return m.BeginQuorumEpochResponse(req.correlation_id, error, self.epoch,
                                              self.leader_id() if self.leader_id() is not None else -1)
        if self._common_request(src, req.cluster_id, req.leader_epoch, now, reply):
            return
        if not self.local_key.matches(req.voter_id, req.voter_directory_id):
            self._send(src, reply(m.INVALID_VOTER_KEY))
            return
        if req.leader_epoch < self.epoch:
            self._send(src, reply(m.FENCED_LEADER_EPOCH))
            return
        self._to_follower(req.leader_epoch, req.leader_id, now)
        self._send(src, reply(m.NONE))

    def _handle_end_epoch(self, src, req: m.EndQuorumEpochRequest, now: int) -> None:
        def reply(error: int):
            return m.EndQuorumEpochResponse(req.correlation_id, error, self.epoch,
                                            self.leader_id() if self.leader_id() is not None else -1)
        if self._common_request(src, req.cluster_id, req.leader_epoch, now, reply):
            return
        if req.leader_epoch < self.epoch:
            self._send(src, reply(m.FENCED_LEADER_EPOCH))
            return
        if req.leader_epoch > self.epoch:
            self._to_follower(req.leader_epoch, req.leader_id, now)
        s = self.state
        if isinstance(s, FollowerState) and s.leader_id == req.leader_id and self.is_voter:
            succ = list(req.preferred_successors)
            pos = succ.index(self.node_id) if self.node_id in succ else len(succ)
            delay = 0 if pos == 0 else min(self.config.election_backoff_max_ms,
                                            self.config.retry_backoff_ms << pos)
            s.fetch_deadline_ms = min(s.fetch_deadline_ms, now + delay)
        self._send(src, reply(m.NONE))

    def _fetch_error(self, req: m.FetchRequest, error: int) -> m.FetchResponse:
        leader = self.leader_id()
        return m.FetchResponse(req.correlation_id, error, self.epoch,
                               -1 if leader is None else leader, -1, self.log.start_offset, b"")

    def _handle_fetch_request(self, src, req: m.FetchRequest, now: int) -> None:
        if req.cluster_id != self.cluster_id:
            self._send(src, self._fetch_error(req, m.INCONSISTENT_CLUSTER_ID))
            return
        s = self.state
        if req.epoch < s.epoch:
            self._send(src, self._fetch_error(req, m.FENCED_LEADER_EPOCH))
            return
        if req.epoch > s.epoch:
            self._send(src, self._fetch_error(req, m.UNKNOWN_LEADER_EPOCH))
            return
        if not isinstance(s, LeaderState):
            self._send(src, self._fetch_error(req, m.NOT_LEADER_OR_FOLLOWER))
            return
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0 or req.last_fetched_epoch > s.epoch:
            self._send(src, self._fetch_error(req, m.INVALID_REQUEST))
            return
        kind, where = self.log.validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch)
        if kind == "snapshot":
            self._note_fetch(s, req, None, now)
            self._send(src, m.FetchResponse(
                req.correlation_id, m.NONE, s.epoch, self.node_id, self._hwm_out(s),
                self.log.start_offset, b"", snapshot_offset=where.offset, snapshot_epoch=where.epoch))
            return
        if kind == "diverging":
            self._note_fetch(s, req, None, now)
            self._send(src, m.FetchResponse(
                req.correlation_id, m.NONE, s.epoch, self.node_id, self._hwm_out(s),
                self.log.start_offset, b"", diverging_epoch=where.epoch,
                diverging_end_offset=where.offset))
            return
        if not self.log.is_batch_start(req.fetch_offset):
            self._send(src, self._fetch_error(req, m.OFFSET_OUT_OF_RANGE))
            return
        self._note_fetch(s, req, req.fetch_offset, now)
        if (req.fetch_offset >= self.log.end_offset and req.max_wait_ms > 0
                and self._replica_state(s, req).hwm_sent == self._hwm_out(s)):
            # Nothing new for it, not even the high watermark (which this very fetch may
            # just have advanced): wait for records or a new high watermark.
            self._parked_fetches.append((src, req, now + min(req.max_wait_ms,
                                                              self.config.fetch_max_wait_ms)))
            return
        self._complete_fetch(src, req)

    def _complete_fetch(self, src, req: m.FetchRequest) -> None:
        s = self.state
        assert isinstance(s, LeaderState)
        data = b""
        if req.fetch_offset < self.log.end_offset:
            data = self.log.read(req.fetch_offset, min(req.max_bytes, self.config.fetch_max_bytes))
        self._replica_state(s, req).hwm_sent = self._hwm_out(s)
        self._send(src, m.FetchResponse(req.correlation_id, m.NONE, s.epoch, self.node_id,
                                        self._hwm_out(s), self.log.start_offset, data))

    def quorum_state(self, now: int) -> tuple | None:
        """As the leader: (epoch, high watermark, voters, observers), each replica a row
        (id, directory id, log end offset, ms since its last fetch or None, caught up with
        the log end); None on any other replica."""
        s = self.state
        if not isinstance(s, LeaderState):
            return None
        now = self._input(now)  # the Raft clock, which stamped the fetches
        end = self.log.end_offset

        def row(rid, rs, me=False):
            offset = end if me else (-1 if rs.end_offset is None else rs.end_offset)
            since = 0 if me else (None if rs.last_fetch_ms is None else now - rs.last_fetch_ms)
            return (rid, rs.directory_id, offset, since, offset >= end)
        voters = [row(v, rs, v == self.node_id) for v, rs in sorted(s.voters.items())]
        observers = [row(o, rs) for o, rs in sorted(s.observers.items())]
        return s.epoch, self._hwm_out(s), voters, observers

    def _replica_state(self, s: LeaderState, req: m.FetchRequest) -> ReplicaState:
        voter = self.voters.get(req.replica_id)
        if voter is not None and voter.matches(req.replica_id, req.replica_directory_id):
            return s.voters[req.replica_id]
        return s.observers.setdefault(req.replica_id, ReplicaState())

    def _hwm_out(self, s: LeaderState) -> int:
        return -1 if s.high_watermark is None else s.high_watermark

    def _note_fetch(self, s: LeaderState, req: m.FetchRequest, offset: int | None, now: int) -> None:
        voter = self.voters.get(req.replica_id)
        if voter is not None and voter.matches(req.replica_id, req.replica_directory_id):
            rs = s.voters[req.replica_id]
            self._note_voter_contact(s, req.replica_id, now)
            s.begin_acked.add(req.replica_id)
            rs.last_fetch_ms = now
            if offset is not None:
                rs.end_offset = offset
                self._maybe_advance_hwm(s, now)
        else:
            rs = s.observers.setdefault(req.replica_id, ReplicaState())
            rs.last_fetch_ms = now
            rs.directory_id = req.replica_directory_id
            if offset is not None:
                rs.end_offset = offset

    def _note_voter_contact(self, s: LeaderState, voter: int, now: int) -> None:
        """Check quorum: a majority fetching within the timeout restarts the timer."""
        s.fetched_since_check.add(voter)
        if len(s.fetched_since_check | {self.node_id}) >= self.majority():
            s.fetched_since_check = set()
            s.check_quorum_deadline_ms = now + self.config.check_quorum_timeout_ms()

    def _handle_fetch_snapshot_request(self, src, req: m.FetchSnapshotRequest, now: int) -> None:
        s = self.state

        def reply(error: int, size: int = 0, data: bytes = b""):
            leader = self.leader_id()
            return m.FetchSnapshotResponse(req.correlation_id, error, self.epoch,
                                           -1 if leader is None else leader, req.snapshot_offset,
                                           req.snapshot_epoch, size, req.position, data)
        if req.cluster_id != self.cluster_id:
            self._send(src, reply(m.INCONSISTENT_CLUSTER_ID))
            return
        if req.epoch != s.epoch or not isinstance(s, LeaderState):
            err = m.FENCED_LEADER_EPOCH if req.epoch < s.epoch else (
                m.UNKNOWN_LEADER_EPOCH if req.epoch > s.epoch else m.NOT_LEADER_OR_FOLLOWER)
            self._send(src, reply(err))
            return
        snap = OffsetAndEpoch(req.snapshot_offset, req.snapshot_epoch)
        if self.log.latest_snapshot_id() != snap:
            self._send(src, reply(m.SNAPSHOT_NOT_FOUND))
            return
        data = self.log.read_snapshot(snap)
        if not 0 <= req.position <= len(data):
            self._send(src, reply(m.POSITION_OUT_OF_RANGE))
            return
        if req.replica_id in s.voters:
            self._note_voter_contact(s, req.replica_id, now)
            s.voters[req.replica_id].last_fetch_ms = now
        chunk = data[req.position:req.position + min(req.max_bytes, self.config.snapshot_chunk_bytes)]
        self._send(src, reply(m.NONE, len(data), chunk))

    # ------------------------------------------------------------ responses

    def _common_response(self, error: int, epoch: int, leader_id: int, now: int) -> bool:
        """Learn of a newer epoch or the leader of ours. True if our state changed."""
        s = self.state
        if epoch > s.epoch:
            if leader_id >= 0:
                self._to_follower(epoch, leader_id, now)
            else:
                self._to_unattached(epoch, now)
            return True
        if epoch == s.epoch and leader_id >= 0 and leader_id != self.node_id and not isinstance(
                s, FollowerState):
            if isinstance(s, ProspectiveState) and s.leader_id == leader_id:
                # We left that leader because it stopped answering: hearing that others
                # still follow it is no reason to go back (KIP-996).
                return False
            if isinstance(s, (UnattachedState, ProspectiveState, CandidateState)):
                self._to_follower(epoch, leader_id, now)
                return True
            if isinstance(s, LeaderState):
                raise SafetyViolation("SingleLeader", f"node {self.node_id} leads epoch {epoch} "
                                                      f"and hears of leader {leader_id}")
        return False

    def _handle_vote_response(self, src: int, resp: m.VoteResponse, now: int) -> None:
        if not self.requests.matches(src, resp.correlation_id):
            return
        if self._common_response(resp.error, resp.leader_epoch, resp.leader_id, now):
            return
        s = self.state
        if resp.error != m.NONE:
            self.requests.backoff(src, now)
            return
        if resp.pre_vote and isinstance(s, ProspectiveState):
            (s.granted if resp.vote_granted else s.rejected).add(src)
            self._maybe_win_prevote(now)
        elif not resp.pre_vote and isinstance(s, CandidateState) and resp.leader_epoch == s.epoch:
            (s.granted if resp.vote_granted else s.rejected).add(src)
            self._maybe_win_election(now)

    def _maybe_win_prevote(self, now: int) -> None:
        s = self.state
        if not isinstance(s, ProspectiveState):
            return
        if len(s.granted) >= self.majority():
            self._to_candidate(now)
        elif len(s.rejected) >= len(self.voters) - self.majority() + 1:
            self._on_event(f"pre-vote in epoch {s.epoch} lost")
            if s.leader_id is not None:
                self._to_follower(s.epoch, s.leader_id, now)
            else:
                self._become(UnattachedState(s.epoch, s.voted_key, self._backoff_deadline(now, 4)
                                             + self.config.election_timeout_ms))
                self.requests.reset()

    def _maybe_win_election(self, now: int) -> None:
        s = self.state
        if not isinstance(s, CandidateState):
            return
        if len(s.granted) >= self.majority():
            self._to_leader(now)
        elif len(s.rejected) >= len(self.voters) - self.majority() + 1:
            # Lost: wait a randomised back-off, then try again through pre-vote.
            s.election_deadline_ms = min(s.election_deadline_ms, self._backoff_deadline(now, 4))

    def _send_votes(self, now: int, pre_vote: bool) -> None:
        s = self.state
        epoch = s.epoch + 1 if pre_vote else s.epoch
        for v in sorted(self.voters):
            if v == self.node_id or v in s.granted or v in s.rejected:
                continue
            if self.requests.ready(v, now):
                key = self.voters[v]
                self._request(v, lambda c, key=key: m.VoteRequest(
                    self.cluster_id, c, epoch, self.node_id, self.directory_id, key.node_id,
                    key.directory_id, self.log.last_fetched_epoch, self.log.end_offset, pre_vote), now)

    def _handle_begin_epoch_response(self, src: int, resp: m.BeginQuorumEpochResponse, now: int) -> None:
        if not self.requests.matches(src, resp.correlation_id):
            return
        if self._common_response(resp.error, resp.leader_epoch, resp.leader_id, now):
            return
        s = self.state
        if isinstance(s, LeaderState) and resp.error == m.NONE and resp.leader_epoch == s.epoch:
            s.begin_acked.add(src)
        elif resp.error != m.NONE:
            self.requests.backoff(src, now)

    def _handle_end_epoch_response(self, src: int, resp: m.EndQuorumEpochResponse, now: int) -> None:
        if not self.requests.matches(src, resp.correlation_id):
            return
        if self._common_response(resp.error, resp.leader_epoch, resp.leader_id, now):
            return
        s = self.state
        if isinstance(s, ResignedState) and resp.error == m.NONE:
            s.unacked.discard(src)

    def _handle_fetch_response(self, src: int, resp: m.FetchResponse, now: int) -> None:
        if not self.requests.matches(src, resp.correlation_id):
            return
        if self._common_response(resp.error, resp.leader_epoch, resp.leader_id, now):
            return
        s = self.state
        if not isinstance(s, FollowerState) or s.leader_id != src or resp.leader_epoch != s.epoch:
            if resp.error != m.NONE:
                self.requests.backoff(src, now)
            return
        if resp.error != m.NONE:
            self.requests.backoff(src, now)
            return
        s.fetch_deadline_ms = now + self.config.fetch_timeout_ms
        s.last_fetch_ok_ms = now
        if resp.diverging_epoch >= 0:
            committed = self.high_watermark or 0
            offset = self.log.truncate_to_end_offset(
                OffsetAndEpoch(resp.diverging_end_offset, resp.diverging_epoch))
            if offset < committed or offset < self._next_listener_offset:
                raise SafetyViolation(
                    "TruncateBelowHighWatermark",
                    f"node {self.node_id} truncated to {offset} below its high watermark "
                    f"{committed} (diverging epoch {resp.diverging_epoch} ends at "
                    f"{resp.diverging_end_offset})")
            self._on_event(Reached("raft-truncation",
                                   f"truncated to {offset}: diverged from leader {src} at epoch "
                                   f"{resp.diverging_epoch} end offset {resp.diverging_end_offset}"))
            self.log.flush()
            return
        if resp.snapshot_offset >= 0:
            snap = OffsetAndEpoch(resp.snapshot_offset, resp.snapshot_epoch)
            self._on_event(f"offset {self.log.end_offset} is below the leader's log start; "
                           f"fetching snapshot {snap.offset}-{snap.epoch}")
            s.fetching_snapshot = (snap, bytearray(), None)
            return
        if resp.records:
            try:
                for header, batch in records.iter_batches(resp.records):
                    if header.base_offset != self.log.end_offset:
                        raise records.CorruptBatchError(
                            f"batch at {header.base_offset}, our log ends at {self.log.end_offset}")
                    self.log.append(batch)
            except (records.CorruptBatchError, ValueError) as exc:
                self._on_event(f"fetch response from {src} rejected: {exc}")
            self.log.flush()
        if resp.high_watermark >= 0:
            self._update_follower_hwm(resp.high_watermark)

    def _update_follower_hwm(self, hwm: int) -> None:
        if self.high_watermark is not None and hwm < self.high_watermark:
            raise SafetyViolation("MonotonicHighWatermark",
                                  f"node {self.node_id}: leader sent high watermark {hwm} "
                                  f"below ours {self.high_watermark}")
        self.high_watermark = hwm

    def _handle_fetch_snapshot_response(self, src: int, resp: m.FetchSnapshotResponse, now: int) -> None:
        if not self.requests.matches(src, resp.correlation_id):
            return
        if self._common_response(resp.error, resp.leader_epoch, resp.leader_id, now):
            return
        s = self.state
        if not isinstance(s, FollowerState) or s.fetching_snapshot is None:
            return
        snap, buf, _ = s.fetching_snapshot
        if resp.error != m.NONE or OffsetAndEpoch(resp.snapshot_offset, resp.snapshot_epoch) != snap:
            self._on_event(f"snapshot {snap.offset}-{snap.epoch} fetch failed with error "
                           f"{m.ERROR_NAMES.get(resp.error, resp.error)}; fetching again")
            s.fetching_snapshot = None
            self.requests.backoff(src, now)
            return
        s.fetch_deadline_ms = now + self.config.fetch_timeout_ms
        if resp.position != len(buf):
            return
        buf += resp.data
        s.fetching_snapshot = (snap, buf, resp.size)
        if len(buf) < resp.size:
            return
        s.fetching_snapshot = None
        data = bytes(buf)
        try:
            for _ in records.iter_batches(data):
                pass
        except records.CorruptBatchError as exc:
            self._on_event(f"downloaded snapshot {snap.offset}-{snap.epoch} is corrupt ({exc}); "
                           f"fetching again")
            return
        self.log.install_snapshot(snap, data)
        self._on_event(Reached("snapshot-loaded",
                               f"installed snapshot {snap.offset}-{snap.epoch}; log restarts there"))
        if self.high_watermark is None or self.high_watermark < snap.offset:
            self.high_watermark = snap.offset
        self._deliver_snapshot(snap)

    # ---------------------------------------------------------------- leader

    def _poll_leader(self, s: LeaderState, now: int) -> None:
        if now >= s.check_quorum_deadline_ms:
            if len(self.voters) == 1:
                s.check_quorum_deadline_ms = now + self.config.check_quorum_timeout_ms()
            else:
                fetched = sorted(s.fetched_since_check | {self.node_id})
                self._to_resigned(now, f"check quorum: only {fetched} fetched within "
                                       f"{self.config.check_quorum_timeout_ms()} ms")
                return
        if self._parked_fetches:
            keep = []
            for src, req, deadline in self._parked_fetches:
                if now >= deadline:
                    self._complete_fetch(src, req)
                else:
                    keep.append((src, req, deadline))
            self._parked_fetches = keep
        for v in sorted(self.voters):
            if v not in s.begin_acked and self.requests.ready(v, now):
                key = self.voters[v]
                self._request(v, lambda c, key=key: m.BeginQuorumEpochRequest(
                    self.cluster_id, c, s.epoch, self.node_id, key.node_id, key.directory_id), now)

    def _update_local_end(self, now: int) -> None:
        s = self.state
        assert isinstance(s, LeaderState)
        s.voters[self.node_id].end_offset = self.log.flushed_end_offset
        self._maybe_advance_hwm(s, now)
        if self._parked_fetches:
            parked, self._parked_fetches = self._parked_fetches, []
            for src, req, _ in parked:
                self._complete_fetch(src, req)

    def _maybe_advance_hwm(self, s: LeaderState, now: int) -> None:
        offsets = sorted((rs.end_offset if rs.end_offset is not None else -1
                          for rs in s.voters.values()), reverse=True)
        index = 1 if "hwm-without-majority" in self.bugs and len(offsets) > 1 else len(offsets) // 2
        candidate = offsets[index]
        if candidate < 0:
            return
        if candidate <= s.epoch_start_offset and "hwm-ignores-epoch" not in self.bugs:
            return
        if s.high_watermark is not None and candidate <= s.high_watermark:
            return
        s.high_watermark = candidate
        self.high_watermark = max(self.high_watermark or 0, candidate) \
            if "hwm-ignores-epoch" not in self.bugs else candidate
        if self._parked_fetches:
            parked, self._parked_fetches = self._parked_fetches, []
            for src, req, _ in parked:
                self._complete_fetch(src, req)

    def append(self, entries: list[tuple[bytes | None, bytes]], now: int) -> int:
        """Append records as leader (flushed before return). Returns the last offset."""
        now = self._input(now)
        s = self.state
        if not isinstance(s, LeaderState):
            raise AssertionError("append on a replica that is not the leader")
        batch = records.build_batch(self.log.end_offset, s.epoch, entries, now)
        header = self.log.append(batch)
        self.log.flush()
        self._update_local_end(now)
        return header.last_offset

    # ------------------------------------------------------------- follower

    def _send_fetch(self, dest: int, now: int) -> None:
        if not self.requests.ready(dest, now):
            return
        s = self.state
        if isinstance(s, FollowerState) and s.fetching_snapshot is not None:
            snap, buf, _ = s.fetching_snapshot
            self._request(dest, lambda c: m.FetchSnapshotRequest(
                self.cluster_id, c, self.node_id, s.epoch, snap.offset, snap.epoch, len(buf),
                self.config.snapshot_chunk_bytes), now)
            return
        self._request(dest, lambda c: m.FetchRequest(
            self.cluster_id, c, self.node_id, self.directory_id, s.epoch, self.log.end_offset,
            self.log.last_fetched_epoch, self.config.fetch_max_wait_ms,
            self.config.fetch_max_bytes), now)

    # ------------------------------------------------------------- listener

    def committed_offset(self) -> int:
        """End (exclusive) of what the state machine may read: min(HWM, log end offset)."""
        hwm = self.high_watermark
        if isinstance(self.state, LeaderState):
            hwm = self.state.high_watermark
        if hwm is None:
            return self._next_listener_offset
        return max(self._next_listener_offset, min(hwm, self.log.end_offset))

    def _update_listener(self, now: int) -> None:
        if self._next_listener_offset < self.log.start_offset:
            self._deliver_snapshot(self.log.latest_snapshot_id())
        end = self.committed_offset()
        if end > self._next_listener_offset:
            for entry in self.log.batch_entries(self._next_listener_offset, end):
                if entry.next_offset > end:
                    break
                header, recs = records.decode_records(self.log.read_entry(entry))
                self._next_listener_offset = header.next_offset
                if not header.is_control:
                    self.listener.handle_commit(CommittedBatch(
                        header.base_offset, header.last_offset, header.partition_leader_epoch,
                        tuple(recs), header.size))
        self._maybe_fire_leader_change()

    def _deliver_snapshot(self, snap: OffsetAndEpoch | None) -> None:
        if snap is None:
            return
        if isinstance(self.state, LeaderState):
            raise SafetyViolation("LeaderNeverLoadsSnapshot",
                                  f"leader {self.node_id} asked to load snapshot {snap}")
        entries = []
        for header, batch in records.iter_batches(self.log.read_snapshot(snap)):
            if not header.is_control:
                entries.extend(records.decode_records(batch)[1])
        self.listener.handle_load_snapshot(snap, entries)
        self._next_listener_offset = snap.offset

    def _maybe_fire_leader_change(self) -> None:
        s = self.state
        current = LeaderAndEpoch(self.leader_id(), s.epoch)
        if current == self._fired:
            return
        if isinstance(s, LeaderState) and self._next_listener_offset < s.epoch_start_offset:
            return
        self._fired = current
        self.listener.handle_leader_change(current)

    def lease_holds(self, now: int) -> bool:
        """A leader's lease: a majority of voters (this one among them) fetched within
        ``fetch_timeout_ms``, on the Raft clock. Until then no other voter can win a
        PreVote (each rejects one for ``fetch_timeout_ms`` after it last heard from the
        leader), so no other leader can exist. Only as safe as the clock it is measured on:
        nothing in the correct node relies on it (reads take the barrier); the planted bug
        ``lease-read`` does."""
        s = self.state
        if not isinstance(s, LeaderState):
            return False
        now = self._input(now)
        need = self.majority() - 1
        if need == 0:
            return True
        fetched = sorted((rs.last_fetch_ms for v, rs in s.voters.items()
                          if v != self.node_id and rs.last_fetch_ms is not None), reverse=True)
        return len(fetched) >= need and now - fetched[need - 1] < self.config.fetch_timeout_ms

    def listener_caught_up_as_leader(self) -> bool:
        s = self.state
        return isinstance(s, LeaderState) and self._fired == LeaderAndEpoch(self.node_id, s.epoch)

    def create_snapshot(self, end_offset: int, entries: list[tuple[bytes | None, bytes]],
                        now: int) -> OffsetAndEpoch:
        """Write a snapshot of the state machine at ``end_offset`` (<= committed)."""
        now = self._input(now)
        if end_offset > self.committed_offset() or end_offset <= self.log.start_offset:
            raise AssertionError(f"snapshot at {end_offset} outside ({self.log.start_offset}, "
                                 f"{self.committed_offset()}]")
        snap = OffsetAndEpoch(end_offset, self.log.epoch_at(end_offset - 1))
        header = msgpack.packb({"version": 0, "lastContainedLogTimestamp": now})
        parts = [records.build_batch(0, snap.epoch, [(records.control_key(
            records.CONTROL_SNAPSHOT_HEADER), header)], now, control=True)]
        offset = 1
        for i in range(0, len(entries), 200):
            chunk = entries[i:i + 200]
            parts.append(records.build_batch(offset, snap.epoch, chunk, now))
            offset += len(chunk)
        parts.append(records.build_batch(offset, snap.epoch, [(records.control_key(
            records.CONTROL_SNAPSHOT_FOOTER), msgpack.packb({"version": 0}))], now, control=True))
        self.log.write_snapshot(snap, b"".join(parts))
        self.log.advance_start_to_snapshot()
        self._on_event(Reached("snapshot-written", f"snapshot {snap.offset}-{snap.epoch} written; "
                               f"log start is now {self.log.start_offset}"))
        return snap

    def resign(self, now: int) -> None:
        """Controlled shutdown of a leader: hand over through EndQuorumEpoch."""
        now = self._input(now)
        if isinstance(self.state, LeaderState):
            self._to_resigned(now, "shutting down")
            self._poll(now)

    _HANDLERS = {
        m.VoteRequest: _handle_vote_request,
        m.VoteResponse: _handle_vote_response,
        m.BeginQuorumEpochRequest: _handle_begin_epoch,
        m.BeginQuorumEpochResponse: _handle_begin_epoch_response,
        m.EndQuorumEpochRequest: _handle_end_epoch,
        m.EndQuorumEpochResponse: _handle_end_epoch_response,
        m.FetchRequest: _handle_fetch_request,
        m.FetchResponse: _handle_fetch_response,
        m.FetchSnapshotRequest: _handle_fetch_snapshot_request,
        m.FetchSnapshotResponse: _handle_fetch_snapshot_response,
    }
