"""QuorumController: the single-threaded metadata state machine, and the register service.

Theory of operation
-------------------
Every node with the controller role runs one QuorumController as the
listener of its KafkaRaftClient. It keeps two views of the metadata:

- ``committed``: every committed record replayed in log order. Standbys only
  have this one (``current`` *is* ``committed``).
- ``current`` (active controller only): ``committed`` plus the records this
  leader has appended but not yet seen committed.

A write on the active controller computes its records from ``current``,
replays them into ``current``, appends them to the Raft log and parks its
reply at the offset of the last record. The reply is released when the
committed offset passes it. An operation that writes nothing (a failed cas)
is parked at the last written offset, as Kafka's controller does, so that it
never exposes a state that might not commit.

When leadership is lost, every parked reply fails with NOT_CONTROLLER (a
write whose records were appended is reported "unknown": they may still
commit under the next leader) and ``current`` reverts to ``committed``. The
controller claims leadership only once Raft tells it, which happens after it
has replayed every record before the leader's epoch start. On an empty log
it first writes the bootstrap records (``metadata.version``). While active
and idle it appends a NoOpRecord every ``metadata.max.idle.interval.ms``.
Every ``metadata.log.max.record.bytes.between.snapshots`` committed bytes it
writes a snapshot of ``committed``.

Register service and its read barrier
-------------------------------------
``write(key, value)`` and ``cas(key, expected, new)`` are ordinary controller
writes. ``read(key)`` appends a NoOpRecord marker in the leader's epoch and
answers from ``committed`` when that marker commits. A marker can only commit
in epoch e if a majority still follows the leader of epoch e after the read
arrived, so no later leader can have committed a write the read misses; a
deposed leader's markers never commit and its reads fail. Reads arriving in
the same event share one marker.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

from . import messages as m
from . import metadata_records as mr
from .log import OffsetAndEpoch
from .raft.client import CommittedBatch, KafkaRaftClient, LeaderAndEpoch


@dataclass(slots=True)
class ControllerState:
    features: dict[str, int] = field(default_factory=dict)
    registers: dict[str, int] = field(default_factory=dict)

    def copy(self) -> "ControllerState":
        return ControllerState(dict(self.features), dict(self.registers))

    def replay(self, record) -> None:
        if isinstance(record, mr.RegisterValueRecord):
            self.registers[record.key] = record.value
        elif isinstance(record, mr.FeatureLevelRecord):
            self.features[record.name] = record.feature_level
        elif isinstance(record, mr.NoOpRecord):
            pass
        else:
            raise AssertionError(f"controller cannot replay {record!r}")

    def records(self) -> list:
        out: list = [mr.FeatureLevelRecord(k, v) for k, v in sorted(self.features.items())]
        out += [mr.RegisterValueRecord(k, v) for k, v in sorted(self.registers.items())]
        return out

    def digest(self) -> int:
        return zlib.crc32(repr((sorted(self.features.items()),
                                sorted(self.registers.items()))).encode())


@dataclass(slots=True)
class Deferred:
    offset: int
    src: object
    request: m.RegisterRequest
    on_resign: str  # outcome reported if leadership is lost first: "unknown" or "fail"
    result: Callable[[], m.RegisterResponse]


class QuorumController:
    def __init__(self, node_id: int, *, idle_interval_ms: int, snapshot_max_bytes: int,
                 bugs: frozenset[str], outbox: list, can_lead: bool = True,
                 on_event: Callable[[str], None] | None = None) -> None:
        self.node_id = node_id
        self.idle_interval_ms = idle_interval_ms
        self.snapshot_max_bytes = snapshot_max_bytes
        self.bugs = bugs
        self.outbox = outbox
        self.can_lead = can_lead
        self._on_event = on_event or (lambda msg: None)
        self.raft: KafkaRaftClient | None = None
        self.committed = ControllerState()
        self.current = self.committed
        self.active = False
        self.applied_offset = 0  # end (exclusive) of what ``committed`` holds
        self.last_written_offset = -1
        self._last_append_ms = 0
        self._deferred: list[Deferred] = []
        self._bytes_since_snapshot = 0
        self._read_marker: int | None = None
        self.on_applied: Callable[[int, int], None] | None = None  # (end offset, digest), for the simulator

    # ------------------------------------------------------- Raft listener

    def handle_commit(self, batch: CommittedBatch) -> None:
        for rec in batch.records:
            record = mr.decode(rec.value)
            self.committed.replay(record)
        self.applied_offset = batch.last_offset + 1
        if self.on_applied is not None:
            self.on_applied(self.applied_offset, self.committed.digest())
        self._complete_deferred(batch.last_offset)
        self._bytes_since_snapshot += batch.size_bytes
        if self._bytes_since_snapshot >= self.snapshot_max_bytes and self.raft is not None:
            self.raft.create_snapshot(self.applied_offset,
                                      [(None, mr.encode(r)) for r in self.committed.records()],
                                      self._last_append_ms)
            self._bytes_since_snapshot = 0

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, entries) -> None:
        state = ControllerState()
        for rec in entries:
            state.replay(mr.decode(rec.value))
        self.committed = state
        self.current = state if not self.active else state.copy()
        self.applied_offset = snapshot_id.offset
        self._bytes_since_snapshot = 0
        self._on_event(f"controller loaded snapshot {snapshot_id.offset}-{snapshot_id.epoch}")
        if self.on_applied is not None:
            self.on_applied(self.applied_offset, self.committed.digest())

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.leader_id == self.node_id and self.can_lead:
            self._claim(leader.epoch)
        elif self.active:
            self._renounce(leader)

    # ------------------------------------------------------ leadership

    def _claim(self, epoch: int) -> None:
        self.active = True
        self.current = self.committed.copy()
        self.last_written_offset = self.raft.log.end_offset - 1
        self._on_event(f"active controller in epoch {epoch}")
        if "metadata.version" not in self.current.features:
            self._write([mr.FeatureLevelRecord("metadata.version", mr.METADATA_VERSION_LEVEL)],
                        self._last_append_ms)

    def _renounce(self, leader: LeaderAndEpoch) -> None:
        self.active = False
        self.current = self.committed
        self._read_marker = None
        deferred, self._deferred = self._deferred, []
        for d in deferred:
            self.outbox.append((d.src, m.RegisterResponse(
                d.request.request_id, d.on_resign, m.NOT_CONTROLLER, None,
                -1 if leader.leader_id is None else leader.leader_id, leader.epoch)))
        self._on_event(f"no longer the active controller (leader now {leader.leader_id} "
                       f"in epoch {leader.epoch}); {len(deferred)} parked replies failed")

    def _write(self, records: list, now: int) -> int:
        for r in records:
            self.current.replay(r)
        offset = self.raft.append([(None, mr.encode(r)) for r in records], now)
        self.last_written_offset = offset
        self._last_append_ms = now
        return offset

    def _complete_deferred(self, committed_last: int) -> None:
        while self._deferred and self._deferred[0].offset <= committed_last:
            d = self._deferred.pop(0)
            self.outbox.append((d.src, d.result()))
        if self._read_marker is not None and self._read_marker <= committed_last:
            self._read_marker = None

    def _park(self, d: Deferred) -> None:
        self._deferred.append(d)  # offsets are non-decreasing: appended in log order

    def tick(self, now: int) -> None:
        if self.active and self.idle_interval_ms and self.raft.listener_caught_up_as_leader() and \
                now >= self._last_append_ms + self.idle_interval_ms:
            self._write([mr.NoOpRecord()], now)

    def next_deadline_ms(self) -> int | None:
        if self.active and self.idle_interval_ms:
            return self._last_append_ms + self.idle_interval_ms
        return None

    # ------------------------------------------------------ register service

    def leader_hint(self) -> tuple[int, int]:
        if self.raft is None:
            return -1, -1
        leader = self.raft.leader_id()
        return (-1 if leader is None else leader), self.raft.epoch

    def handle_register(self, src, req: m.RegisterRequest, now: int) -> None:
        leader, epoch = self.leader_hint()

        def reply(outcome: str, error: int = m.NONE, value=None) -> m.RegisterResponse:
            return m.RegisterResponse(req.request_id, outcome, error, value, leader, epoch)
        bad = self._validate(req)
        if bad:
            self.outbox.append((src, reply("fail", m.INVALID_REQUEST)))
            return
        if not (self.active and self.raft.listener_caught_up_as_leader()):
            self.outbox.append((src, reply("fail", m.NOT_CONTROLLER)))
            return
        key = req.key
        if req.op == "read":
            if "read-without-barrier" in self.bugs:
                self.outbox.append((src, reply("ok", value=self.current.registers.get(key))))
                return
            if self._read_marker is None or self._read_marker != self.last_written_offset:
                self._read_marker = self._write([mr.NoOpRecord()], now)
            self._park(Deferred(self._read_marker, src, req, "fail",
                                lambda: reply("ok", value=self.committed.registers.get(key))))
            return
        if req.op == "cas" and self.current.registers.get(key) != req.expected:
            self._park(Deferred(max(self.last_written_offset, 0), src, req, "fail",
                                lambda: reply("fail")))
            if self.last_written_offset < 0 or self.last_written_offset < self.applied_offset:
                self._complete_deferred(self.applied_offset - 1)
            return
        offset = self._write([mr.RegisterValueRecord(key, req.value)], now)
        if "reply-before-commit" in self.bugs:
            self.outbox.append((src, reply("ok")))
            return
        self._park(Deferred(offset, src, req, "unknown", lambda: reply("ok")))

    @staticmethod
    def _validate(req: m.RegisterRequest) -> str | None:
        if req.op not in ("read", "write", "cas"):
            return f"unknown op {req.op!r}"
        if req.op in ("write", "cas") and not isinstance(req.value, int):
            return "value must be an integer"
        return None
