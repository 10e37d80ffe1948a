"""CoordinatorLog: the partitions of an internal topic this broker leads, and writes to them.

Both coordinators (groups in ``__consumer_offsets``, transactions in
``__transaction_state``) keep their state in an internal topic replicated
like any other, and own the partitions this broker leads. This class tracks
that ownership (``owned``: partition -> the leader epoch it was loaded in),
calls ``on_load(partition, epoch, batches)`` with the partition's whole log
when the broker becomes its leader (or leader again in a new epoch) and
``on_unload(partition)`` when it stops, and appends records with acks=all,
calling ``done(error)`` once the replicas have them or the write failed.
Errors are mapped as Kafka maps them for coordinators: too few replicas is
COORDINATOR_NOT_AVAILABLE, lost leadership NOT_COORDINATOR; a write not
replicated in time is ``timed_out``: REQUEST_TIMED_OUT for the group
coordinator, COORDINATOR_NOT_AVAILABLE for the transaction coordinator (so
the client looks for it again and retries, as Kafka's TransactionStateManager
answers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import messages as m
from .. import records


@dataclass(slots=True)
class _Write:
    key: tuple[str, int]
    leader_epoch: int
    required_end: int
    deadline_ms: int
    done: Callable[[int], None]


class CoordinatorLog:
    def __init__(self, replica_manager, topic: str, timeout_ms: int, wall_clock,
                 on_load: Callable[[int, int, list], None],
                 on_unload: Callable[[int], None], timed_out: int = m.REQUEST_TIMED_OUT) -> None:
        self.rm = replica_manager
        self.timed_out = timed_out
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.wall_clock = wall_clock
        self.on_load = on_load
        self.on_unload = on_unload
        self.owned: dict[int, int] = {}
        self._writes: list[_Write] = []
        self._scanned = False

    def sync_ownership(self, now: int, roles_changed: bool) -> None:
        if not roles_changed and self._scanned:
            return
        self._scanned = True
        led = {pid: part.leader_epoch for (topic, pid), part in self.rm.partitions.items()
               if topic == self.topic and part.is_leader}
        for pid in [p for p in self.owned if led.get(p) != self.owned[p]]:
            del self.owned[pid]
            self.on_unload(pid)
        for pid, epoch in sorted(led.items()):
            if pid not in self.owned:
                log = self.rm.partitions[(self.topic, pid)].log
                data = (log.read_range(log.start_offset, 1 << 62, log.end_offset)
                        if log.end_offset > log.start_offset else b"")
                self.owned[pid] = epoch
                self.on_load(pid, epoch, list(records.iter_batches(data)))

    def write(self, pid: int, entries: list[tuple[bytes, bytes | None]], now: int,
              done: Callable[[int], None], **batch_options) -> None:
        """Append ``entries`` (key, value) as one batch to our partition ``pid``;
        ``batch_options`` go to :func:`records.build_batch` (a transactional batch's producer)."""
        self.append(pid, records.build_batch(0, 0, entries, self.wall_clock(), **batch_options),
                    now, done)

    def append(self, pid: int, batch: bytes, now: int, done: Callable[[int], None]) -> None:
        key = (self.topic, pid)
        part = self.rm.leader_partition(*key)
        if part is None or self.owned.get(pid) != part.leader_epoch:
            done(m.NOT_COORDINATOR)
            return
        if len(part.isr) < self.rm.min_isr(self.topic):
            done(m.COORDINATOR_NOT_AVAILABLE)
            return
        header = self.rm.append(part, batch)
        self._writes.append(_Write(key, part.leader_epoch, header.last_offset + 1,
                                   now + self.timeout_ms, done))
        self.complete(now)

    def barrier(self, pid: int, now: int, done: Callable[[int], None]) -> None:
        """``done(error)`` once everything appended to our partition ``pid`` so far is
        committed (an answer that reads state other writes are still making durable)."""
        key = (self.topic, pid)
        part = self.rm.leader_partition(*key)
        if part is None or self.owned.get(pid) != part.leader_epoch:
            done(m.NOT_COORDINATOR)
            return
        self._writes.append(_Write(key, part.leader_epoch, part.log.end_offset,
                                   now + self.timeout_ms, done))
        self.complete(now)

    def complete(self, now: int) -> None:
        pending, self._writes = self._writes, []
        for w in pending:
            outcome = self.rm.append_outcome(w.key, w.leader_epoch, w.required_end, now,
                                             w.deadline_ms)
            if outcome is None:
                self._writes.append(w)
            elif outcome in (m.NOT_ENOUGH_REPLICAS, m.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                             m.UNKNOWN_TOPIC_OR_PARTITION):
                w.done(m.COORDINATOR_NOT_AVAILABLE)
            elif outcome in (m.NOT_LEADER_OR_FOLLOWER, m.KAFKA_STORAGE_ERROR):
                w.done(m.NOT_COORDINATOR)
            elif outcome == m.REQUEST_TIMED_OUT:
                w.done(self.timed_out)
            else:
                w.done(outcome)  # a callback may add writes to self._writes

    def next_deadline_ms(self) -> int | None:
        return min((w.deadline_ms for w in self._writes), default=None)

    def shutdown(self) -> None:
        writes, self._writes = self._writes, []
        for w in writes:
            w.done(m.NOT_COORDINATOR)
