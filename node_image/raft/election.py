"""Elections and epochs (KIP-595, KIP-996): the moves between epoch states, each persisted
before it takes effect and checked against ``state.TRANSITIONS``; Vote, BeginQuorumEpoch and
EndQuorumEpoch; the polls of candidates, prospectives, unattached replicas and resigned
leaders."""
from __future__ import annotations

import dataclasses

import msgpack

from .. import messages as m
from .. import records
from ..coverage import Reached
from ..storage import ElectionState, ReplicaKey
from .state import (CandidateState, FollowerState, LeaderState, ProspectiveState, ReplicaState,
                    ResignedState, UnattachedState, illegal)
from .api import SafetyViolation


class Election:
    """Mixed into :class:`~node_image.raft.client.KafkaRaftClient`."""

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        if "vote-ignores-log" in self.bugs:
            return True
        return (last_epoch, last_offset) >= (self.log.last_fetched_epoch, self.log.end_offset)

    def _persist(self, election: ElectionState) -> None:
        election = dataclasses.replace(election, kraft_version=self.kraft_version)
        if election != self.persisted:
            self.store.write(election)
            self.persisted = election

    def _voters_tuple(self) -> tuple[ReplicaKey, ...]:
        """What quorum-state keeps: the voter set (kraft.version 0), or the bootstrap one
        (1: the current one is in the log)."""
        return self.history.entries[0][1].keys

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
            self._abandon_voter_change()
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
        self._update_at_ms = now  # UpdateRaftVoter, if needed, with the first fetch
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
        if self.kraft_version >= 1 and self.history.latest_offset < 0:
            # A dynamic quorum's first leader: the bootstrap voter set goes into the log,
            # where observers (and controllers formatted to join) learn it.
            self._append_voters(self.history.current, now, "bootstrap", bootstrap=True)
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

    def _handle_vote_request(self, src, req: m.VoteRequest, now: int) -> None:
        def reply(error: int, granted: bool = False):
            return m.VoteResponse(req.correlation_id, error, self.epoch,
                                  self.leader_id() if self.leader_id() is not None else -1,
                                  granted, req.pre_vote)
        if self._common_request(src, req.cluster_id, req.candidate_epoch, now, reply):
            return
        # The request must be meant for this replica (its id and directory id). A static
        # quorum also wants both in its voter set; a dynamic one (KIP-853), as Kafka's,
        # answers whether or not its own voter set, which may be behind (a voter added
        # while it was away), lists them: the candidate counts the votes of its own voter
        # set, and the log comparison keeps a replica missing committed records from winning.
        known = self.voters.get(req.candidate_id)
        static_refuses = self.kraft_version == 0 and (
            not self.is_voter or known is None
            or not known.matches(req.candidate_id, req.candidate_directory_id))
        if static_refuses or not self.local_key.matches(req.voter_id, req.voter_directory_id):
            self._send(src, reply(m.INVALID_VOTER_KEY))
            return
        candidate = known if self.kraft_version == 0 else ReplicaKey(
            req.candidate_id, req.candidate_directory_id)
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

    def resign(self, now: int) -> None:
        """Controlled shutdown of a leader: hand over through EndQuorumEpoch."""
        now = self._input(now)
        if isinstance(self.state, LeaderState):
            self._to_resigned(now, "shutting down")
            self._poll(now)

    # ------------------------------------------------------------ role polls

    def _poll_candidate(self, s: CandidateState, now: int) -> None:
        if now >= s.election_deadline_ms:
            self._to_prospective(now)
        else:
            self._send_votes(now, pre_vote=False)

    def _poll_prospective(self, s: ProspectiveState, now: int) -> None:
        if now >= s.election_deadline_ms:
            self._on_event(f"pre-vote round in epoch {s.epoch} timed out")
            self._to_prospective(now)
        else:
            self._send_votes(now, pre_vote=True)

    def _poll_unattached(self, s: UnattachedState, now: int) -> None:
        if self.is_voter:
            if now >= s.election_deadline_ms:
                self._to_prospective(now)
            return
        # Observers find the leader by asking the voters in turn.
        if now >= s.election_deadline_ms:
            s.election_deadline_ms = now + self.config.fetch_timeout_ms
        voters = sorted((set(self.voters) | set(self.bootstrap_servers)) - {self.node_id})
        if not voters:
            return
        target = voters[self._bootstrap_index % len(voters)]
        if all([self.requests.ready(v, now) for v in voters]):
            self._bootstrap_index += 1
            self._send_fetch(target, now)

    def _poll_resigned(self, s: ResignedState, now: int) -> None:
        if now >= s.election_deadline_ms:
            if self.is_voter:
                self._to_prospective(now)
            else:  # removed from the voter set: an observer from now on
                self._to_unattached(s.epoch, now, voted=self.local_key)
            return
        for v in sorted(s.unacked):
            if self.requests.ready(v, now):
                self._request(v, lambda c, v=v: m.EndQuorumEpochRequest(
                    self.cluster_id, c, s.epoch, self.node_id, s.preferred_successors), now)
