"""Dynamic quorum reconfiguration (KIP-853): the voter set read from the log, and
AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter at the leader.

The leader's rules, as Kafka's AddVoterHandler and RemoveVoterHandler:

- only under ``kraft.version`` 1 (else UNSUPPORTED_VERSION);
- only once the leader's epoch is committed (it has a high watermark) and no voter change
  is uncommitted: one change at a time (else REQUEST_TIMED_OUT, try again);
- a new voter must not be one already (DUPLICATE_VOTER) and must have caught up: it fetched
  as an observer, with the directory id named, up to the leader's log end within the fetch
  timeout (else REQUEST_TIMED_OUT);
- a voter removed must be one, with that directory id (VOTER_NOT_FOUND); the last voter
  cannot be removed (INVALID_REQUEST);
- the new set takes effect when its VotersRecord is appended (majorities are counted in it
  from then on), and the request is answered once the record is committed; a leader that
  loses its leadership first answers REQUEST_TIMED_OUT (the change may still commit);
- a leader that removed itself resigns once the change is committed and goes on as an
  observer.

UpdateRaftVoter, as Kafka's UpdateVoterHandler: a voter whose endpoint in the voter set is
not its own CONTROLLER address sends it while it follows a leader, with its first fetch and
then every three fetch timeouts (Kafka waits one period first; here every answer travels to
the address the voter set records, so a voter back at a new address hears nothing until
the leader has recorded it, and must not wait to time out first); the
leader checks the epoch, the request (a directory id, an endpoint, a sane kraft.version
range that includes the cluster's level), that no change is pending and the latest
VotersRecord is committed, and that the voter is one with that directory id
(VOTER_NOT_FOUND); it appends the set with the new endpoint and answers at once, without
waiting for the commit.
"""
from __future__ import annotations

from .. import messages as m
from .. import records
from ..coverage import Reached
from ..storage import ReplicaKey
from .state import LeaderState, ReplicaState
from .voters import (CONTROL_KRAFT_VERSION, VoterSet, VoterSetHistory, control_entries,
                     voters_in)


WILDCARDS = ("", "0.0.0.0", "::")  # bind addresses, not endpoints a peer can dial


class Reconfiguration:
    """Mixed into :class:`~node_image.raft.client.KafkaRaftClient`."""

    def _init_voters(self, bootstrap: tuple[ReplicaKey, ...], kraft_version: int,
                     endpoints: dict[int, tuple[str, int]]) -> None:
        """The bootstrap set carries the configured endpoints of its voters
        (controller.quorum.voters), as Kafka's bootstrap checkpoint does."""
        self.kraft_version = self._formatted_kraft_version = kraft_version
        ids = {k.node_id for k in bootstrap}
        self.history = VoterSetHistory(VoterSet(tuple(bootstrap), tuple(sorted(
            (nid, host, port) for nid, (host, port) in endpoints.items() if nid in ids))))
        self._voter_change = None  # (record offset, src, correlation id) at the leader
        # a quorum formatted at kraft.version 0 may have been upgraded since: read both
        snap = self.log.latest_snapshot_id()
        if snap is not None:
            self._voters_from_snapshot(snap)
        for data in self.log.control_batches(self.log.start_offset):
            self._note_batch(records.parse_header(data), data)
        self._refresh_voters()

    def _voters_from_snapshot(self, snap) -> None:
        for header, batch in records.iter_batches(self.log.read_snapshot(snap)):
            for _, voters in voters_in(header, batch):
                self.kraft_version = 1
                self.history.reset(snap.offset - 1, voters)

    def _note_batch(self, header: records.BatchHeader, batch: bytes) -> bool:
        """Read a batch appended to the log for voter sets; True if the set changed."""
        if not header.is_control:
            return False
        changed = False
        for offset, voters in voters_in(header, batch):
            self.kraft_version = 1
            self.history.add(offset, voters)
            changed = True
        if not changed and self.kraft_version == 0 and any(
                r.key == records.control_key(CONTROL_KRAFT_VERSION)
                for r in records.decode_records(batch)[1]):
            self.kraft_version = 1
        if changed:
            self._refresh_voters()
        return changed

    def _after_truncation(self) -> None:
        if self.history.truncate(self.log.end_offset):  # the voter set goes back with the log
            if self.history.latest_offset < 0:  # an upgrade of kraft.version cut off with it
                self.kraft_version = self._formatted_kraft_version
            self._refresh_voters()

    def _after_snapshot_install(self, snap) -> None:
        self._voters_from_snapshot(snap)
        self._refresh_voters()

    def _refresh_voters(self) -> None:
        voters = self.history.current.as_dict()
        old = getattr(self, "voters", None)
        self.voters = voters
        key = voters.get(self.node_id)
        self.is_voter = key is not None and key.matches(self.node_id, self.directory_id)
        s = getattr(self, "state", None)
        if old is not None and old != voters:
            self._on_event(f"voter set is now {sorted(voters)}"
                           + ("" if self.is_voter else " (this node observes)"))
        if not isinstance(s, LeaderState):
            return
        for v, key in voters.items():
            if v not in s.voters:
                rs = s.observers.pop(v, None)
                if rs is None or (key.directory_id is not None and rs.directory_id is not None
                                  and rs.directory_id != key.directory_id):
                    rs = ReplicaState(directory_id=key.directory_id)
                rs.assumed = "voter-counted-before-catch-up" in self.bugs and old is not None
                s.voters[v] = rs
        for v in [v for v in s.voters if v not in voters]:
            s.observers[v] = s.voters.pop(v)
        self._maybe_advance_hwm(s, self._now)

    def own_replica_state(self, s: LeaderState) -> ReplicaState:
        rs = s.voters.get(self.node_id)
        return rs if rs is not None else s.observers.setdefault(self.node_id, ReplicaState())

    def voter_endpoint(self, node_id: int) -> tuple[str, int] | None:
        return self.history.current.endpoint(node_id)

    # ------------------------------------------------------------ auto-join

    def _maybe_auto_join(self, s, now: int) -> None:
        """controller.quorum.auto.join.enable: an observer of a dynamic quorum that has a
        leader asks it to add us, every fetch timeout until we are a voter; the leader
        refuses (REQUEST_TIMED_OUT) until we have caught up."""
        if (not self.config.auto_join or self.kraft_version < 1 or self.is_voter
                or self.local_endpoint is None or now < self._join_at_ms):
            return
        self._join_at_ms = now + self.config.fetch_timeout_ms
        if self.local_endpoint[0] in WILDCARDS:  # the voters would dial themselves
            if not self._join_refused_said:  # once: the address does not change as we run
                self._join_refused_said = True
                self._on_event(f"auto-join: not asking: this node's CONTROLLER address is the "
                               f"bind address {self.local_endpoint[0]}; name the node in "
                               f"controller.quorum.voters")
            return
        corr = self._next_corr()
        self._join_requests = {corr}
        host, port = self.local_endpoint
        self._send(s.leader_id, m.AddRaftVoterRequest(
            corr, self.cluster_id, self.node_id, self.directory_id, host, port))

    def _maybe_update_voter(self, s, now: int) -> None:
        """A voter whose endpoint in the voter set is not its own asks the leader to record
        it (Kafka's shouldSendUpdateVoteRequest): on following, then every three fetch
        timeouts."""
        if now < self._update_at_ms:
            return
        self._update_at_ms = now + 3 * self.config.fetch_timeout_ms
        if (self.kraft_version < 1 or not self.is_voter or self.local_endpoint is None
                or self.local_endpoint[0] in WILDCARDS  # a bind address only
                or self.voter_endpoint(self.node_id) == tuple(self.local_endpoint)):
            return
        host, port = self.local_endpoint
        recorded = self.voter_endpoint(self.node_id)
        self._on_event(f"the voter set records node {self.node_id} at "
                       f"{'%s:%s' % recorded if recorded else 'no endpoint'}, not {host}:{port}: "
                       f"asking leader {s.leader_id} to update it")
        self._send(s.leader_id, m.UpdateRaftVoterRequest(
            self._next_corr(), self.cluster_id, s.epoch, self.node_id, self.directory_id,
            host, port, 0, 1))

    def _handle_update_voter_response(self, src, resp: m.UpdateRaftVoterResponse,
                                      now: int) -> None:
        if resp.error != m.NONE:
            self._on_event(f"UpdateRaftVoter refused by node {src} "
                           f"({m.ERROR_NAMES.get(resp.error)}: {resp.message}); asking again "
                           f"in {3 * self.config.fetch_timeout_ms} ms if still needed")

    def owns_voter_response(self, resp: m.RaftVoterResponse) -> bool:
        """Whether ``resp`` answers our own auto-join (else a forwarded client request's)."""
        return resp.correlation_id in self._join_requests

    def _handle_join_response(self, src, resp: m.RaftVoterResponse, now: int) -> None:
        if resp.correlation_id not in self._join_requests:
            return
        self._join_requests = set()
        if resp.error == m.NONE:
            self._on_event(f"auto-join: node {self.node_id} was added to the voters")
        elif resp.error == m.DUPLICATE_VOTER:
            pass  # an earlier request of ours took effect
        else:
            self._on_event(f"auto-join: the leader refused ({m.ERROR_NAMES.get(resp.error)}: "
                           f"{resp.message}); asking again in "
                           f"{self.config.fetch_timeout_ms} ms")

    # ------------------------------------------------------------ kraft.version 0 -> 1

    def upgrade_kraft_version(self, level: int, validate_only: bool,
                              now: int) -> tuple[int, str | None]:
        """UpdateFeatures' kraft.version at the quorum leader (Kafka's upgradeKRaftVersion):
        0 -> 1 appends a KRaftVersionRecord and a VotersRecord of the voters as they are,
        each with the directory id it fetches with and its configured endpoint; from then
        on the quorum is dynamic. Refused (INVALID_UPDATE_VERSION) as a downgrade, past 1,
        or while a voter has not fetched from this leader with its directory id."""
        def refuse(why: str) -> tuple[int, str]:
            return m.INVALID_UPDATE_VERSION, (f"Invalid update version {level} for feature "
                                              f"kraft.version. {why}")
        s = self.state
        if level == self.kraft_version:
            return m.NONE, None
        if level < self.kraft_version:
            return refuse("kraft.version cannot be downgraded.")
        if level > 1:
            return refuse("The controller only supports versions 0-1.")
        if not isinstance(s, LeaderState) or s.high_watermark is None:
            return m.NOT_CONTROLLER, f"node {self.node_id} is not the committed quorum leader"
        keys = []
        for v in sorted(self.voters):
            directory = self.directory_id if v == self.node_id else s.voters[v].directory_id
            if not directory:
                return refuse(f"Voter {v} has not fetched with its directory id from this "
                              f"leader yet.")
            keys.append(ReplicaKey(v, directory))
        if not validate_only:
            self._append_voters(VoterSet(tuple(keys), self.history.current.endpoints), now,
                                "kraft.version upgraded to 1", bootstrap=True)
        return m.NONE, None

    # ------------------------------------------------------------ the leader's handlers

    def _voter_change_refusal(self, cluster_id: str) -> tuple[int, str] | None:
        s = self.state
        if cluster_id and cluster_id != self.cluster_id:
            return m.INCONSISTENT_CLUSTER_ID, f"cluster {cluster_id!r} is not {self.cluster_id!r}"
        if not isinstance(s, LeaderState):
            return m.NOT_LEADER_OR_FOLLOWER, f"node {self.node_id} is not the quorum leader"
        if self.kraft_version < 1:
            return m.UNSUPPORTED_VERSION, "kraft.version is 0: the voter set is static"
        if s.high_watermark is None:
            return m.REQUEST_TIMED_OUT, f"epoch {s.epoch} is not committed yet"
        if "concurrent-voter-changes" in self.bugs:
            return None
        if self._voter_change is not None or self.history.latest_offset >= s.high_watermark:
            return m.REQUEST_TIMED_OUT, "a voter change is not committed yet"
        return None

    def _handle_add_voter(self, src, req: m.AddRaftVoterRequest, now: int) -> None:
        why = self._voter_change_refusal(req.cluster_id) or self._add_refusal(req, now)
        if why is not None:
            self._send(src, m.RaftVoterResponse(req.correlation_id, *why))
            return
        voters = self.history.current.with_voter(
            ReplicaKey(req.voter_id, req.voter_directory_id),
            (req.host, req.port) if req.host else None)
        self._append_voters(voters, now, f"adding voter {req.voter_id}",
                            change=(src, req.correlation_id))

    def _add_refusal(self, req: m.AddRaftVoterRequest, now: int) -> tuple[int, str] | None:
        if req.voter_id in self.voters:
            return m.DUPLICATE_VOTER, f"{req.voter_id} is a voter already"
        if "voter-counted-before-catch-up" in self.bugs:
            return None  # the planted bug: neither fetching nor caught up is asked
        rs = self.state.observers.get(req.voter_id)
        if rs is None or rs.directory_id != req.voter_directory_id:
            return m.REQUEST_TIMED_OUT, (f"{req.voter_id} with directory "
                                         f"{req.voter_directory_id} does not fetch from the "
                                         f"leader")
        if rs.caught_up_ms is None or now - rs.caught_up_ms > self.config.fetch_timeout_ms:
            return m.REQUEST_TIMED_OUT, (f"{req.voter_id} has not caught up with the leader "
                                         f"(fetched to {rs.end_offset}, log end "
                                         f"{self.log.end_offset})")
        return None

    def _handle_remove_voter(self, src, req: m.RemoveRaftVoterRequest, now: int) -> None:
        why = self._voter_change_refusal(req.cluster_id) or self._remove_refusal(req)
        if why is not None:
            self._send(src, m.RaftVoterResponse(req.correlation_id, *why))
            return
        self._append_voters(self.history.current.without(req.voter_id), now,
                            f"removing voter {req.voter_id}", change=(src, req.correlation_id))

    def _remove_refusal(self, req: m.RemoveRaftVoterRequest) -> tuple[int, str] | None:
        key = self.voters.get(req.voter_id)
        if key is None or not key.matches(req.voter_id, req.voter_directory_id or None):
            return m.VOTER_NOT_FOUND, (f"{req.voter_id} with directory "
                                       f"{req.voter_directory_id} is not a voter")
        if len(self.voters) == 1:
            return m.INVALID_REQUEST, f"{req.voter_id} is the only voter"
        return None

    def _handle_update_voter(self, src, req: m.UpdateRaftVoterRequest, now: int) -> None:
        s = self.state
        why = self._update_refusal(req)
        if why is None:
            self._append_voters(self.history.current.with_endpoint(req.voter_id,
                                                                   (req.host, req.port)),
                                now, f"voter {req.voter_id} is at {req.host}:{req.port}")
        error, message = why or (m.NONE, None)
        leader = self.leader_id()
        self._send(src, m.UpdateRaftVoterResponse(req.correlation_id, error, message,
                                                  -1 if leader is None else leader, s.epoch))

    def _update_refusal(self, req: m.UpdateRaftVoterRequest) -> tuple[int, str] | None:
        s = self.state
        if req.cluster_id and req.cluster_id != self.cluster_id:
            return m.INCONSISTENT_CLUSTER_ID, f"cluster {req.cluster_id!r} is not {self.cluster_id!r}"
        if req.current_leader_epoch < s.epoch:
            return m.FENCED_LEADER_EPOCH, f"epoch {req.current_leader_epoch} is before {s.epoch}"
        if req.current_leader_epoch > s.epoch:
            return m.UNKNOWN_LEADER_EPOCH, f"epoch {req.current_leader_epoch} is after {s.epoch}"
        if not isinstance(s, LeaderState):
            return m.NOT_LEADER_OR_FOLLOWER, f"node {self.node_id} is not the quorum leader"
        if not req.voter_directory_id:
            return m.INVALID_REQUEST, "the voter's directory id is missing"
        if not req.host or not 0 <= req.port <= 65535:
            return m.INVALID_REQUEST, f"no CONTROLLER endpoint ({req.host!r}, {req.port})"
        lo, hi = req.min_kraft_version, req.max_kraft_version
        if lo < 0 or hi < 0 or hi < lo:
            return m.INVALID_REQUEST, f"kraft.version range [{lo}, {hi}] is not one"
        if self._voter_change is not None or s.high_watermark is None:
            return m.REQUEST_TIMED_OUT, "a voter change or the epoch is not committed yet"
        if self.kraft_version < 1:
            return m.UNSUPPORTED_VERSION, "kraft.version is 0: the voter set is static"
        if self.history.latest_offset < 0 or self.history.latest_offset >= s.high_watermark:
            return m.REQUEST_TIMED_OUT, "the latest voter set is not committed yet"
        if not lo <= self.kraft_version <= hi:
            return m.INVALID_REQUEST, (f"kraft.version {self.kraft_version} is outside "
                                       f"[{lo}, {hi}]")
        key = self.voters.get(req.voter_id)
        if key is None or not key.matches(req.voter_id, req.voter_directory_id):
            return m.VOTER_NOT_FOUND, (f"{req.voter_id} with directory "
                                       f"{req.voter_directory_id} is not a voter")
        return None

    def _append_voters(self, voters: VoterSet, now: int, why: str, change: tuple | None = None,
                       bootstrap: bool = False) -> int:
        """Append ``voters`` as a VotersRecord (with the KRaftVersionRecord when it is the
        bootstrap set the first leader writes); its offset. ``change`` (src, correlation id):
        an Add/RemoveRaftVoter answered once the record commits."""
        s = self.state
        assert isinstance(s, LeaderState)
        offset = self.log.end_offset
        entries = control_entries(voters)
        if not bootstrap:  # the KRaftVersionRecord went in with the bootstrap set
            entries = entries[1:]
        batch = records.build_batch(offset, s.epoch, entries, now, control=True)
        header = self.log.append(batch)
        self.log.flush()
        self._on_event(Reached("raft-voters-changed",
                               f"{why}: voter set {sorted(voters.as_dict())} at offset {offset}"))
        if change is not None:
            self._voter_change = (offset, *change)
        self._note_batch(header, batch)
        self._update_local_end(now)
        return offset

    def _complete_voter_change(self, s: LeaderState) -> None:
        """Answer the pending change once committed; a removed leader then resigns."""
        change = self._voter_change
        if change is not None and s.high_watermark is not None and s.high_watermark > change[0]:
            self._voter_change = None
            self._send(change[1], m.RaftVoterResponse(change[2], m.NONE, None))

    def _abandon_voter_change(self) -> None:
        change, self._voter_change = self._voter_change, None
        if change is not None:
            self._send(change[1], m.RaftVoterResponse(
                change[2], m.REQUEST_TIMED_OUT,
                "leadership lost before the change committed: it may still take effect"))

    def _removed_leader_done(self, s: LeaderState) -> bool:
        """A leader no longer in the voter set whose removal is committed."""
        return (not self.is_voter and s.high_watermark is not None
                and s.high_watermark > self.history.latest_offset)
