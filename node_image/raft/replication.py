"""Replication: Fetch served by the leader (diverging epochs, snapshot ids, parked fetches)
and sent by followers and observers, the leader's high watermark under the own-epoch
commit rule, check quorum, appends, and the polls of leaders and followers."""
from __future__ import annotations

from .. import messages as m
from .. import records
from ..coverage import Reached
from ..log import OffsetAndEpoch
from .state import FollowerState, LeaderState, ReplicaState
from .api import SafetyViolation


class Replication:
    """Mixed into :class:`~node_image.raft.client.KafkaRaftClient`."""

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
            # the leader's own directory id is its own (it never fetches from itself)
            return (rid, self.directory_id if me else rs.directory_id, offset, since,
                    offset >= end)
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
        if offset is not None and offset >= self.log.end_offset:
            caught_up = now
        else:
            caught_up = None
        if voter is not None and voter.matches(req.replica_id, req.replica_directory_id):
            rs = s.voters[req.replica_id]
            rs.directory_id = req.replica_directory_id  # what kraft.version 1 will record
            rs.assumed = False
            self._note_voter_contact(s, req.replica_id, now)
            s.begin_acked.add(req.replica_id)
            rs.last_fetch_ms = now
            rs.caught_up_ms = caught_up or rs.caught_up_ms
            if offset is not None:
                rs.end_offset = offset
                self._maybe_advance_hwm(s, now)
        else:
            rs = s.observers.setdefault(req.replica_id, ReplicaState())
            rs.last_fetch_ms = now
            if rs.directory_id != req.replica_directory_id:
                rs.caught_up_ms = None
            rs.directory_id = req.replica_directory_id
            rs.caught_up_ms = caught_up or rs.caught_up_ms
            if offset is not None:
                rs.end_offset = offset

    def _note_voter_contact(self, s: LeaderState, voter: int, now: int) -> None:
        """Check quorum: a majority fetching within the timeout restarts the timer."""
        s.fetched_since_check.add(voter)
        me = {self.node_id} if self.is_voter else set()
        if len(s.fetched_since_check | me) >= self.majority():
            s.fetched_since_check = set()
            s.check_quorum_deadline_ms = now + self.config.check_quorum_timeout_ms()

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
            self._after_truncation()
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
                    self._note_batch(header, batch)
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

    def _poll_follower(self, s: FollowerState, now: int) -> None:
        if now >= s.fetch_deadline_ms:
            self._on_event(f"no fetch answer from leader {s.leader_id} for "
                           f"{self.config.fetch_timeout_ms} ms")
            if self.is_voter:
                self._to_prospective(now)
            else:
                self._to_unattached(s.epoch, now)
        else:
            self._send_fetch(s.leader_id, now)
            self._maybe_auto_join(s, now)
            self._maybe_update_voter(s, now)

    def _poll_leader(self, s: LeaderState, now: int) -> None:
        if self._removed_leader_done(s):
            self._to_resigned(now, "removed from the voter set, and the change is committed")
            return
        if now >= s.check_quorum_deadline_ms:
            if self.is_voter and len(self.voters) == 1:
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
        self.own_replica_state(s).end_offset = self.log.flushed_end_offset
        self._maybe_advance_hwm(s, now)
        if self._parked_fetches:
            parked, self._parked_fetches = self._parked_fetches, []
            for src, req, _ in parked:
                self._complete_fetch(src, req)

    def _maybe_advance_hwm(self, s: LeaderState, now: int) -> None:
        end = self.log.end_offset
        offsets = sorted((end if rs.assumed else rs.end_offset if rs.end_offset is not None
                          else -1 for rs in s.voters.values()), reverse=True)
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
        self._complete_voter_change(s)
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
