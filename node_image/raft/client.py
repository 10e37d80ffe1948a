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
from typing import Any, Callable

from .. import messages as m
from .. import records
from ..config import RaftConfig
from ..log import UnifiedLog
from ..outbox import Outbox
from ..storage import ElectionState, QuorumStateStore, ReplicaKey
from .requests import RequestManager
from .state import (CandidateState, FollowerState, LeaderState, ProspectiveState,
                    ResignedState, UnattachedState)
from .api import CommittedBatch, LeaderAndEpoch, Listener, SafetyViolation
from .election import Election
from .reconfig import Reconfiguration
from .replication import Replication
from .snapshot import Snapshots

logger = logging.getLogger(__name__)

__all__ = ["CommittedBatch", "KafkaRaftClient", "LeaderAndEpoch", "Listener", "SafetyViolation"]


class KafkaRaftClient(Election, Replication, Snapshots, Reconfiguration):
    """One replica of the quorum: its inputs, timers and listener; elections, replication,
    snapshots and voter changes (``reconfig``) are in the modules of those names."""

    def __init__(self, *, node_id: int, directory_id: str, cluster_id: str,
                 voters: tuple[ReplicaKey, ...], log: UnifiedLog, store: QuorumStateStore,
                 config: RaftConfig, rng: random.Random, outbox: Outbox,
                 now_ms: int, bugs: frozenset[str] = frozenset(),
                 on_event: Callable[[str], None] | None = None,
                 clock: Callable[[], int] | None = None, kraft_version: int = 0,
                 bootstrap_servers: tuple[int, ...] = (),
                 local_endpoint: tuple[str, int] | None = None,
                 voter_endpoints: dict[int, tuple[str, int]] | None = None) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.cluster_id = cluster_id
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
        # Whom an observer asks for the leader besides the voters (Kafka's
        # controller.quorum.bootstrap.servers): a controller formatted to join a dynamic
        # quorum knows no voter until it has fetched.
        self.bootstrap_servers = tuple(b for b in bootstrap_servers if b != node_id)
        self._clock = clock
        self._input_ms = now_ms  # the caller's clock at the last input
        self._now = -1  # the Raft clock at the last input
        self._reading = -1  # the clock's reading then
        now_ms = self._input(now_ms)
        self._fired: LeaderAndEpoch | None = None
        self.high_watermark: int | None = None
        self.local_key = ReplicaKey(node_id, directory_id)
        self.local_endpoint = local_endpoint  # our CONTROLLER address, for auto-join
        self._join_at_ms = 0  # auto-join: when to ask the leader next
        self._join_requests: set[int] = set()  # correlation ids of our AddRaftVoter
        self._join_refused_said = False  # auto-join with a bind address: said once
        self._update_at_ms = now_ms  # UpdateRaftVoter: when a voter may ask the leader next
        self._init_voters(voters, kraft_version, voter_endpoints or {})  # self.voters, is_voter
        voter = self.voters.get(node_id)
        if voter is not None and not self.is_voter:
            self._on_event(
                f"directory id {directory_id} differs from the voter set's {voter.directory_id}: "
                f"the disk was replaced; running as an observer")
        self.state = self._initial_state(now_ms)

    def _input(self, now_ms: int) -> int:
        """An input at the caller's ``now_ms``: the Raft clock then (never below its last
        reading), kept as ``_now`` beside ``_input_ms``."""
        reading = now_ms if self._clock is None else self._clock()
        if "lease-read-step-proof" in self.bugs and self._now >= 0:
            # the planted bug's clock: the wall clock's advance, at most the caller's
            self._now += max(0, min(reading - self._reading, now_ms - self._input_ms))
        else:
            self._now = max(self._now, reading)
        self._reading, self._input_ms = reading, now_ms
        return self._now

    def register(self, listener: Listener) -> None:
        """The state machine that committed records, snapshots and leader changes go to; it
        gets the latest snapshot at once."""
        assert self.listener is None, "a Raft client has one listener"
        self.listener = listener
        self._load_snapshot_at_start()

    def _initial_state(self, now: int):
        election = self.store.read()
        if "forget-vote" in self.bugs:
            election = ElectionState(election.epoch, election.leader_id, None, election.voters,
                                     election.kraft_version)
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

    def poll(self, now: int) -> None:
        self._poll(self._input(now))

    def _poll(self, now: int) -> None:
        self._now = now
        getattr(self, self._ROLE_POLLS[type(self.state)])(self.state, now)
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
        getattr(self, handler)(src, msg, now)
        self._poll(now)

    def _common_request(self, src, cluster_id: str, epoch: int, now: int, reply) -> bool:
        """Cluster id check and stepping up to a newer epoch. True if the request was answered."""
        if cluster_id != self.cluster_id:
            self._send(src, reply(m.INCONSISTENT_CLUSTER_ID))
            return True
        return False

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

    def _maybe_fire_leader_change(self) -> None:
        s = self.state
        current = LeaderAndEpoch(self.leader_id(), s.epoch)
        if current == self._fired:
            return
        if isinstance(s, LeaderState) and self._next_listener_offset < s.epoch_start_offset:
            return
        self._fired = current
        self.listener.handle_leader_change(current)

    def listener_caught_up_as_leader(self) -> bool:
        s = self.state
        return isinstance(s, LeaderState) and self._fired == LeaderAndEpoch(self.node_id, s.epoch)

    # the poll of each role (one function per epoch state)
    _ROLE_POLLS = {
        LeaderState: "_poll_leader",
        CandidateState: "_poll_candidate",
        ProspectiveState: "_poll_prospective",
        FollowerState: "_poll_follower",
        UnattachedState: "_poll_unattached",
        ResignedState: "_poll_resigned",
    }

    _HANDLERS = {
        m.VoteRequest: "_handle_vote_request",
        m.VoteResponse: "_handle_vote_response",
        m.BeginQuorumEpochRequest: "_handle_begin_epoch",
        m.BeginQuorumEpochResponse: "_handle_begin_epoch_response",
        m.EndQuorumEpochRequest: "_handle_end_epoch",
        m.EndQuorumEpochResponse: "_handle_end_epoch_response",
        m.FetchRequest: "_handle_fetch_request",
        m.FetchResponse: "_handle_fetch_response",
        m.FetchSnapshotRequest: "_handle_fetch_snapshot_request",
        m.FetchSnapshotResponse: "_handle_fetch_snapshot_response",
        m.AddRaftVoterRequest: "_handle_add_voter",
        m.RemoveRaftVoterRequest: "_handle_remove_voter",
        m.RaftVoterResponse: "_handle_join_response",
        m.UpdateRaftVoterRequest: "_handle_update_voter",
        m.UpdateRaftVoterResponse: "_handle_update_voter_response",
    }
