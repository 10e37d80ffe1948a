"""TransactionCoordinator: Kafka's transactions, kept in ``__transaction_state``.

Theory of operation
-------------------
A transactional id belongs to one partition of ``__transaction_state``
(the same hash as groups); the leader of that partition is its coordinator.
What it knows of each transactional id (producer id and epoch, state,
partitions, timeout) is a record of Kafka's TransactionLog format in that
partition, written with acks=all before any answer depends on it, and read
back by the partition's next leader (:class:`~.coordinator_log.CoordinatorLog`).

The states and their moves are Kafka's (:data:`VALID_PREVIOUS`, checked in
:meth:`TxnMetadata.transition`, the one place a state changes)::

    Empty/CompleteCommit/CompleteAbort --AddPartitionsToTxn--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, fencing--> PrepareAbort --markers--> CompleteAbort
    Empty/CompleteCommit/CompleteAbort --InitProducerId--> Empty (epoch + 1)

- InitProducerId gives a new transactional id a producer id (from the
  broker's blocks) and epoch 0, and an existing one its epoch + 1, which
  fences the previous producer: a transaction it left open is aborted
  (with the new epoch, so its late batches are INVALID_PRODUCER_EPOCH) and
  the caller is told CONCURRENT_TRANSACTIONS until the abort is complete.
- EndTxn writes PrepareCommit/PrepareAbort, answers, then has a
  transaction marker (COMMIT/ABORT) written to every partition of the
  transaction by its leader (WriteTxnMarkers, retried until each is
  written) and then writes CompleteCommit/CompleteAbort. A coordinator that
  takes over a transaction in a Prepare state finishes it.
- A transaction open longer than its timeout (the wall clock, as Kafka's
  ``time.milliseconds()``) is aborted with a bumped epoch.

Not kept (documented): KIP-890's server-side partition verification and
epoch bump per transaction, two-phase commit (KIP-939), expiry of idle
transactional ids, compaction of the topic.
"""
from __future__ import annotations

import copy
import struct
from dataclasses import dataclass, field
from typing import Callable

from .. import messages as m
from .. import records
from ..coverage import Reached
from . import group_metadata as gm
from .coordinator_log import CoordinatorLog

TXN_TOPIC = "__transaction_state"
MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms
MARKER_RETRY_MS = 100
TIMEOUT_CHECK_MS = 1000

(EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
 PREPARE_EPOCH_FENCE) = range(8)  # Kafka's TransactionState ids, as written in the log
NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
         "Dead", "PrepareEpochFence")
VALID_PREVIOUS = {
    EMPTY: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    ONGOING: {ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    PREPARE_COMMIT: {ONGOING},
    PREPARE_ABORT: {ONGOING, PREPARE_EPOCH_FENCE},
    COMPLETE_COMMIT: {PREPARE_COMMIT},
    COMPLETE_ABORT: {PREPARE_ABORT},
    DEAD: {EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT},
    PREPARE_EPOCH_FENCE: {ONGOING},
}


def epoch_exhausted(epoch: int) -> bool:
    """No epoch is left to bump to (Kafka keeps Short.MaxValue for fencing markers)."""
    return epoch >= 32766


class TxnStateError(RuntimeError):
    """A transition the table does not allow: a bug of ours."""


@dataclass(eq=False, slots=True)
class TxnMetadata:
    txn_id: str
    partition: int
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int = EMPTY
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    writing: bool = False  # a state write is in flight: answer CONCURRENT_TRANSACTIONS
    markers: set = field(default_factory=set)  # partitions still without their marker
    marker_sent: dict = field(default_factory=dict)  # (topic, partition) -> resend time
    retry_ms: int = 0  # a failed completion is written again from then on
    # The producer id and epoch before the last bump asked for by their holder (KIP-360):
    # a retry of that InitProducerId, whose answer was lost, gets the bumped ones again.
    # Kept in memory only, as Kafka's TransactionLogValue v0 has no field for them.
    last_producer_id: int = -1
    last_producer_epoch: int = -1

    def transition(self, target: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise TxnStateError(f"transactional id {self.txn_id!r}: {NAMES[self.state]} -> "
                                f"{NAMES[target]} is not a valid transition")
        self.state = target


# ------------------------------------------------------------ records (Kafka's TransactionLog)

def txn_key(txn_id: str) -> bytes:
    b = txn_id.encode()
    return struct.pack(">hh", 0, len(b)) + b


def txn_value(t: TxnMetadata, now_ms: int) -> bytes:
    out = [struct.pack(">qhib", t.producer_id, t.producer_epoch, t.timeout_ms, t.state)]
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(t.partitions):
        by_topic.setdefault(topic, []).append(p)
    out.append(struct.pack(">i", len(by_topic)))
    for topic, parts in by_topic.items():
        b = topic.encode()
        out.append(struct.pack(">h", len(b)) + b + struct.pack(f">i{len(parts)}i", len(parts),
                                                               *parts))
    out.append(struct.pack(">qq", now_ms, t.start_ms))
    return struct.pack(">h", 0) + b"".join(out)


def read_txn(key: bytes, value: bytes | None, partition: int) -> tuple[str, TxnMetadata | None]:
    try:
        version, n = struct.unpack_from(">hh", key)
        if version != 0:
            raise gm.GroupRecordError(f"key: unknown version {version} (0 known)")
        txn_id = key[4:4 + n].decode()
        if value is None:
            return txn_id, None
        (version,) = struct.unpack_from(">h", value)
        if version != 0:
            raise gm.GroupRecordError(f"value: unknown version {version} (0 known)")
        pid, epoch, timeout, state = struct.unpack_from(">qhib", value, 2)
        pos = 17
        (topics,) = struct.unpack_from(">i", value, pos)
        pos += 4
        parts = set()
        for _ in range(max(topics, 0)):
            (n,) = struct.unpack_from(">h", value, pos)
            topic = value[pos + 2:pos + 2 + n].decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", value, pos)
            pos += 4
            for p in struct.unpack_from(f">{count}i", value, pos):
                parts.add((topic, p))
            pos += 4 * count
        _, start = struct.unpack_from(">qq", value, pos)
    except (struct.error, UnicodeDecodeError) as exc:
        raise gm.GroupRecordError(f"transaction record is truncated or garbled: {exc}") from None
    if not 0 <= state < len(NAMES):
        raise gm.GroupRecordError(f"value: unknown transaction state {state}")
    return txn_id, TxnMetadata(txn_id, partition, pid, epoch, timeout, state, parts, start)


# ------------------------------------------------------------ the coordinator

class TransactionCoordinator:
    def __init__(self, replica_manager, options, on_event: Callable[[str], None],
                 wall_clock: Callable[[], int], next_producer_id: Callable[[], int | None],
                 send_markers: Callable[[int, object], None], next_correlation,
                 bugs: frozenset[str] = frozenset()) -> None:
        self.rm = replica_manager
        self.bugs = bugs
        self.options = options
        self._on_event = on_event
        self.wall_clock = wall_clock
        self.next_producer_id = next_producer_id
        self.send_markers = send_markers  # (leader id, m.WriteTxnMarkersRequest)
        self.next_correlation = next_correlation
        self.txns: dict[str, TxnMetadata] = {}
        # a state write not replicated in time: the client finds the coordinator again and
        # retries, as Kafka answers (its TransactionStateManager), not REQUEST_TIMED_OUT
        self.log = CoordinatorLog(replica_manager, TXN_TOPIC, options.offsets_commit_timeout_ms,
                                  wall_clock, self._load, self._unload,
                                  timed_out=m.COORDINATOR_NOT_AVAILABLE)
        self.owned = self.log.owned
        self._inflight: dict[int, tuple[str, tuple, int]] = {}  # corr -> (txn id, partitions, deadline)
        self._next_timeout_check = 0
        self._now = 0

    def partition_of(self, txn_id: str) -> int:
        return gm.partition_for(txn_id, self.options.transaction_topic_partitions)

    def _error_for(self, txn_id: str | None) -> int:
        if not txn_id:
            return m.INVALID_REQUEST
        return m.NONE if self.partition_of(txn_id) in self.owned else m.NOT_COORDINATOR

    # ------------------------------------------------------------ load / unload

    def _load(self, pid: int, epoch: int, batches: list) -> None:
        found: dict[str, TxnMetadata | None] = {}
        for header, batch in batches:
            if header.is_control:
                continue
            for rec in records.decode_records(batch)[1]:
                if rec.key is None:
                    continue
                try:
                    txn_id, meta = read_txn(rec.key, rec.value, pid)
                except gm.GroupRecordError as exc:
                    raise gm.GroupRecordError(f"{TXN_TOPIC}-{pid} offset {rec.offset}: "
                                              f"{exc}") from None
                found[txn_id] = meta
        loaded = [t for t in found.values() if t is not None]
        for t in loaded:
            self.txns[t.txn_id] = t
            if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
                t.markers = set(t.partitions)  # finish what the previous coordinator began
        if loaded:
            self._on_event(Reached("coordinator-loaded",
                                   f"{TXN_TOPIC}-{pid}: coordinator in epoch {epoch}: loaded "
                                   f"{len(loaded)} transactional id(s)"))

    def _unload(self, pid: int) -> None:
        for t in [t for t in self.txns.values() if t.partition == pid]:
            del self.txns[t.txn_id]

    def _store(self, t: TxnMetadata, now: int, done: Callable[[int], None],
               **changes) -> None:
        """Write ``t`` with ``changes`` (Kafka's pending transition) and apply them to ``t``
        only once the write is replicated: a failed write leaves ``t`` as the log has it. A
        ``state`` change is checked against the table first."""
        pending = copy.copy(t)
        for name, value in changes.items():
            if name == "state":
                pending.transition(value)
            else:
                setattr(pending, name, value)
        t.writing = True

        def stored(error: int) -> None:
            t.writing = False
            if error == m.NONE:
                for name in changes:
                    setattr(t, name, getattr(pending, name))
            done(error)
        self.log.write(t.partition, [(txn_key(t.txn_id),
                                      txn_value(pending, self.wall_clock()))], now, stored)

    # ------------------------------------------------------------ InitProducerId

    def init_producer_id(self, txn_id: str, timeout_ms: int, now: int,
                         respond: Callable[[int, int, int], None],
                         expected: tuple[int, int] | None = None) -> None:
        """InitProducerId for a transactional id. ``expected``: the producer id and epoch
        its caller holds (InitProducerId v3+, KIP-360), or None: a new producer, which fences
        whoever held the id. A caller holding the current id bumps the epoch and keeps its
        producer after an abortable error; one holding an older epoch is PRODUCER_FENCED."""
        self._now = now
        error = self._error_for(txn_id)
        if error == m.NONE and not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            error = m.INVALID_TRANSACTION_TIMEOUT
        if error != m.NONE:
            respond(error, -1, -1)
            return
        t = self.txns.get(txn_id)
        if t is None:
            pid = self.next_producer_id()
            if pid is None:
                respond(m.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
                return
            # known from now on, as Empty at epoch -1 until the first record is written
            t = self.txns[txn_id] = TxnMetadata(txn_id, self.partition_of(txn_id), pid, -1,
                                                timeout_ms)
        if t.writing:
            respond(m.CONCURRENT_TRANSACTIONS, -1, -1)
            return
        if expected is not None and not (
                t.producer_epoch == -1  # just created: a producer after UNKNOWN_PRODUCER_ID
                or expected[0] == t.producer_id  # its epoch is checked below
                or (expected[0] == t.last_producer_id and epoch_exhausted(expected[1]))):
            respond(m.PRODUCER_FENCED, -1, -1)
            return
        if t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            respond(m.CONCURRENT_TRANSACTIONS, -1, -1)
            return
        if t.state == ONGOING:  # fence the producer that left it open, then abort it
            self._abort(t, now, "a new producer of its transactional id")
            respond(m.CONCURRENT_TRANSACTIONS, -1, -1)
            return
        last_pid = t.last_producer_id
        if epoch_exhausted(t.producer_epoch) and (expected is None or expected[1] == t.producer_epoch):
            # no epoch left: a new producer id
            pid, epoch = self.next_producer_id(), 0
            if pid is None:
                respond(m.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
                return
            last_pid, last_epoch = t.producer_id, t.producer_epoch if expected else -1
        elif expected is None:
            pid, epoch, last_epoch = t.producer_id, t.producer_epoch + 1, -1
        elif t.producer_epoch == -1 or expected[1] == t.producer_epoch:
            pid, epoch, last_epoch = t.producer_id, t.producer_epoch + 1, t.producer_epoch
        elif expected[1] == t.last_producer_epoch:
            # a retry of the bump it asked for: the same id and epoch again
            pid, epoch, last_epoch = t.producer_id, t.producer_epoch, t.last_producer_epoch
        else:
            respond(m.PRODUCER_FENCED, -1, -1)
            return
        self._store(t, now, lambda error: respond(error, pid, epoch) if error == m.NONE
                    else respond(error, -1, -1),
                    producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                    partitions=set(), state=EMPTY, last_producer_id=last_pid,
                    last_producer_epoch=last_epoch)

    # ------------------------------------------------------------ admin

    def describe(self, txn_id: str) -> tuple[int, TxnMetadata | None]:
        """DescribeTransactions of one id: its state here, or why not."""
        error = self._error_for(txn_id)
        if error != m.NONE:
            return error, None
        t = self.txns.get(txn_id)
        if t is None or t.state == DEAD:
            return m.TRANSACTIONAL_ID_NOT_FOUND, None
        return m.NONE, t

    def listed(self, states: set[str], producer_ids: set[int], min_duration_ms: int,
               pattern) -> list[TxnMetadata]:
        """ListTransactions: the transactional ids this coordinator owns, filtered (an empty
        filter lets all through; ``min_duration_ms`` < 0: any age; ``pattern``: a compiled
        regular expression the whole id must match, or None)."""
        wall = self.wall_clock()
        out = []
        for t in sorted(self.txns.values(), key=lambda t: t.txn_id):
            if t.state == DEAD or self.partition_of(t.txn_id) not in self.owned:
                continue
            if states and NAMES[t.state] not in states:
                continue
            if producer_ids and t.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and wall - t.start_ms < min_duration_ms:
                continue  # as Kafka: the age of its last transaction's start
            if pattern is not None and not pattern.fullmatch(t.txn_id):
                continue
            out.append(t)
        return out

    # ------------------------------------------------------------ AddPartitionsToTxn

    def _check_producer(self, txn_id: str, producer_id: int, epoch: int) -> tuple[int, TxnMetadata | None]:
        error = self._error_for(txn_id)
        if error != m.NONE:
            return error, None
        t = self.txns.get(txn_id)
        if t is None or t.producer_id != producer_id:
            return m.INVALID_PRODUCER_ID_MAPPING, None
        if epoch != t.producer_epoch:
            return m.INVALID_PRODUCER_EPOCH, None
        if t.writing or t.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return m.CONCURRENT_TRANSACTIONS, t
        return m.NONE, t

    def add_partitions(self, txn_id: str, producer_id: int, epoch: int, partitions: list,
                       now: int, respond: Callable[[dict], None]) -> None:
        """``respond``: (topic, partition) -> error."""
        self._now = now
        error, t = self._check_producer(txn_id, producer_id, epoch)
        if error == m.NONE:
            unknown = [p for p in partitions if self.rm.image.partition(*p) is None]
            if unknown:
                respond({p: m.UNKNOWN_TOPIC_OR_PARTITION if p in unknown
                         else m.OPERATION_NOT_ATTEMPTED for p in partitions})
                return
        if error != m.NONE:
            respond({p: error for p in partitions})
            return
        if t.state == ONGOING and set(partitions) <= t.partitions:
            respond({p: m.NONE for p in partitions})  # already in the log
            return
        changes = {"partitions": t.partitions | set(partitions)}
        if t.state != ONGOING:
            changes.update(start_ms=self.wall_clock(), state=ONGOING)
        self._store(t, now, lambda e: respond({p: e for p in partitions}), **changes)

    # ------------------------------------------------------------ EndTxn

    def end_txn(self, txn_id: str, producer_id: int, epoch: int, commit: bool, now: int,
                respond: Callable[[int], None]) -> None:
        self._now = now
        error, t = self._check_producer(txn_id, producer_id, epoch)
        if error == m.CONCURRENT_TRANSACTIONS and t.state in (PREPARE_COMMIT, PREPARE_ABORT) \
                and t.state != (PREPARE_COMMIT if commit else PREPARE_ABORT):
            error = m.INVALID_TXN_STATE  # ending the other way than it is ending
        if error != m.NONE:
            respond(error)  # CONCURRENT_TRANSACTIONS: a retry while it is written or marked
            return
        if t.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
            respond(m.NONE)  # a retry of an EndTxn that completed
            return
        if t.state != ONGOING:
            respond(m.INVALID_TXN_STATE)
            return
        self._prepare(t, commit, now, respond)

    def _prepare(self, t: TxnMetadata, commit: bool, now: int,
                 respond: Callable[[int], None], epoch: int | None = None) -> None:
        def stored(error: int) -> None:
            respond(error)
            if error == m.NONE:
                t.markers = set(t.partitions)
                if commit and "partial-commit-markers" in self.bugs:
                    t.markers = set(sorted(t.partitions)[:1])
                t.marker_sent = {}
                self._send_markers(self._now)
        # a fencing abort bumps the epoch, and no retry of an earlier bump may get it
        fence = {} if epoch is None else {"producer_epoch": epoch, "last_producer_epoch": -1}
        self._store(t, now, stored, state=PREPARE_COMMIT if commit else PREPARE_ABORT, **fence)

    def _abort(self, t: TxnMetadata, now: int, reason: str, timed_out: bool = False) -> None:
        """Abort an open transaction with a bumped epoch (fencing its producer)."""
        msg = (f"transaction {t.txn_id!r} (producer {t.producer_id}, epoch "
               f"{t.producer_epoch}) aborted: {reason}")
        self._on_event(Reached("txn-aborted-by-timeout", msg) if timed_out else msg)
        self._prepare(t, False, now, lambda error: None, epoch=t.producer_epoch + 1)

    # ------------------------------------------------------------ markers

    def _send_markers(self, now: int) -> None:
        for t in list(self.txns.values()):
            if t.state not in (PREPARE_COMMIT, PREPARE_ABORT) or t.writing:
                continue
            if not t.markers:
                if now >= t.retry_ms:
                    self._complete(t, now)
                continue
            by_leader: dict[int, list] = {}
            for key in sorted(t.markers):
                if t.marker_sent.get(key, -1) > now:
                    continue
                reg = self.rm.image.partition(*key)
                if reg is None:  # the topic is gone: nothing to mark
                    t.markers.discard(key)
                    continue
                if reg.leader >= 0:
                    by_leader.setdefault(reg.leader, []).append(key)
                else:  # no leader to write it yet: look again a little later, not at once
                    t.marker_sent[key] = now + MARKER_RETRY_MS
            for leader, keys in by_leader.items():
                corr = self.next_correlation()
                deadline = now + self.options.rpc_timeout_ms
                for key in keys:
                    t.marker_sent[key] = deadline
                self._inflight[corr] = (t.txn_id, tuple(keys), deadline)
                self.send_markers(leader, m.WriteTxnMarkersRequest(
                    corr, t.producer_id, t.producer_epoch,
                    t.state == PREPARE_COMMIT or "abort-as-commit" in self.bugs,
                    self.owned.get(t.partition, -1), tuple(keys)))
            if not t.markers:
                self._complete(t, now)

    def handle_markers_response(self, resp, now: int) -> None:
        self._now = now
        entry = self._inflight.pop(resp.correlation_id, None)
        if entry is None:
            return
        t = self.txns.get(entry[0])
        if t is None:
            return
        for topic, partition, error in resp.partitions:
            key = (topic, partition)
            if error == m.NONE:
                t.markers.discard(key)
            else:
                t.marker_sent[key] = now + MARKER_RETRY_MS
        if not t.markers and t.state in (PREPARE_COMMIT, PREPARE_ABORT) and not t.writing:
            self._complete(t, now)

    def _complete(self, t: TxnMetadata, now: int) -> None:
        def stored(error: int) -> None:
            if error != m.NONE:  # still prepared: written again a little later
                t.retry_ms = self._now + MARKER_RETRY_MS
                self._on_event(f"transaction {t.txn_id!r}: writing its completion failed: "
                               f"{m.ERROR_NAMES.get(error, error)}")
        self._store(t, now, stored, partitions=set(),
                    state=COMPLETE_COMMIT if t.state == PREPARE_COMMIT else COMPLETE_ABORT)

    # ------------------------------------------------------------ timers

    def poll(self, now: int, roles_changed: bool) -> None:
        self._now = now
        self.log.sync_ownership(now, roles_changed)
        self.log.complete(now)
        for corr, (_, _, deadline) in list(self._inflight.items()):
            if now >= deadline:
                del self._inflight[corr]
        if any(t.state in (PREPARE_COMMIT, PREPARE_ABORT) for t in self.txns.values()):
            self._send_markers(now)
        if now >= self._next_timeout_check:
            self._next_timeout_check = now + TIMEOUT_CHECK_MS
            wall = self.wall_clock()
            for t in list(self.txns.values()):
                if t.state == ONGOING and not t.writing and wall > t.start_ms + t.timeout_ms:
                    self._abort(t, now, f"open longer than its timeout ({t.timeout_ms} ms)",
                                timed_out=True)

    def next_deadline_ms(self) -> int | None:
        times = [self._next_timeout_check] if any(
            t.state == ONGOING for t in self.txns.values()) else []
        if self.log.next_deadline_ms() is not None:
            times.append(self.log.next_deadline_ms())
        for t in self.txns.values():
            if t.state in (PREPARE_COMMIT, PREPARE_ABORT) and not t.writing:
                pending = [t.marker_sent.get(k, self._now) for k in t.markers]
                times.append(min(pending, default=max(self._now, t.retry_ms)))
        return min(times) if times else None

    def shutdown(self) -> None:
        self.log.shutdown()
