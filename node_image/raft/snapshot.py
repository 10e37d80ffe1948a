"""Snapshots: FetchSnapshot served and fetched in chunks, snapshots written by the state
machine, and the latest one delivered to the listener."""
from __future__ import annotations

import msgpack

from .. import messages as m
from .. import records
from ..coverage import Reached
from ..log import OffsetAndEpoch
from .state import FollowerState, LeaderState
from .api import SafetyViolation
from .voters import control_entries


class Snapshots:
    """Mixed into :class:`~node_image.raft.client.KafkaRaftClient`."""

    def _load_snapshot_at_start(self) -> None:
        snap = self.log.latest_snapshot_id()
        if snap is not None:
            self._deliver_snapshot(snap)

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
        self._after_snapshot_install(snap)
        self._on_event(Reached("snapshot-loaded",
                               f"installed snapshot {snap.offset}-{snap.epoch}; log restarts there"))
        if self.high_watermark is None or self.high_watermark < snap.offset:
            self.high_watermark = snap.offset
        self._deliver_snapshot(snap)

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
        if self.kraft_version >= 1:  # the voter set at the snapshot's end (KIP-853)
            control = control_entries(self.history.at(end_offset - 1))
            parts.append(records.build_batch(offset, snap.epoch, control, now, control=True))
            offset += len(control)
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
