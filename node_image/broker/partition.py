"""Partition: one data partition's replica on this broker, as leader or follower.

Theory of operation
-------------------
The log is a :class:`~node_image.log.UnifiedLog` in ``<log.dirs>/<topic>-<n>``
(record batch v2, CRC-checked recovery, leader-epoch cache from the batches'
partition leader epochs). The metadata image says who leads with which
leader epoch, which replicas exist, and the committed ISR with its partition
epoch; :meth:`apply_registration` moves this replica to the role the image
gives it.

As leader it tracks every follower's log end offset (LEO) from its fetches
and when it was last caught up (Kafka's rule: a fetch at or past the
leader's LEO of the previous fetch proves the follower was caught up at the
time of that previous fetch).

Rules
-----
- The high watermark (HW) is the minimum LEO over the *maximal* ISR (the
  committed ISR plus members of an AlterPartition in flight), and it only
  advances while the committed ISR has at least ``min.insync.replicas``
  members (KIP-966's rule: data below the HW is on every ISR member, and
  there are enough of them). On the leader the HW never decreases.
- ISR changes go to the controller as AlterPartition, one at a time; the
  committed ISR only changes when the controller's answer (or the metadata
  image) says so. A follower joins when its LEO has reached both the HW and
  the start of the leader's epoch, while in sync (caught up within
  ``replica.lag.time.max.ms``) and fetching under its current broker
  registration (KIP-903); it leaves after ``replica.lag.time.max.ms``
  without being caught up.
- A follower truncates where its log diverges from the leader's (the leader
  answers its fetch with the diverging epoch and end offset), appends what
  the leader sends, and takes HW = min(leader's HW, own LEO).
- Flush policy: ``flush.messages`` (topic) or ``log.flush.interval.messages``
  (broker): fsync after that many messages; Kafka's default never fsyncs
  explicitly and relies on replication, and so does chaoskraft's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .. import messages as m
from .. import records
from ..coverage import Reached
from ..fs import FileSystem, write_durably
from ..log import OffsetAndEpoch, UnifiedLog
from ..metadata_image import PartitionRegistration
from .producer_state import ProducerStateManager, marker_of

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


@dataclass(slots=True)
class RemoteReplica:
    broker_id: int
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch said (DeleteRecords' low watermark)
    # the broker epoch its last fetch came with (KIP-903): a state fetched by an earlier
    # incarnation (which may have lost records since) never takes it into the ISR
    broker_epoch: int = -1

    def update_fetch_state(self, fetch_offset: int, leader_leo: int, now: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now


PARTITION_METADATA = "partition.metadata"  # Kafka's: which topic id the directory holds


def claim_directory(fs: FileSystem, directory: str, topic_id: str, on_event) -> None:
    """Make ``directory`` hold ``topic_id``'s partition. What an earlier topic of the same
    name left there (its deletion cut short by a crash, or done while this broker was down)
    is removed first; a directory without the file (written before it existed) is kept."""
    path = os.path.join(directory, PARTITION_METADATA)
    if fs.exists(path):
        fields = dict(line.split(": ", 1) for line in fs.read(path).decode(errors="replace")
                      .splitlines() if ": " in line)
        if fields.get("topic_id") == topic_id:
            return
        on_event(f"{directory} holds topic id {fields.get('topic_id')!r}, a deleted topic of "
                 f"the same name: its files are removed")
        remove_files(fs, directory)
    fs.makedirs(directory)
    write_durably(fs, path, f"version: 0\ntopic_id: {topic_id}\n".encode())


def remove_files(fs: FileSystem, directory: str) -> None:
    """Remove every file of a partition's directory, its metadata file last: cut short,
    the directory still names the topic the rest belonged to."""
    names = fs.listdir(directory)
    for name in sorted(names, key=lambda n: n == PARTITION_METADATA):
        fs.remove(os.path.join(directory, name))
    fs.fsync_dir(directory)


class Partition:
    def __init__(self, node_id: int, topic: str, partition: int, fs: FileSystem, log_dir: str,
                 segment_bytes: int, high_watermark: int, on_event,
                 hw_ignores_isr: bool = False, skip_fsync: bool = False,
                 topic_id: str | None = None) -> None:
        self.node_id = node_id
        self.hw_ignores_isr = hw_ignores_isr  # planted bug
        self.skip_fsync = skip_fsync  # planted bug
        self.topic = topic
        self.partition = partition
        self.fs = fs
        self.dir = os.path.join(log_dir, f"{topic}-{partition}")
        self._on_event = on_event
        if topic_id is not None:
            claim_directory(fs, self.dir, topic_id, lambda msg: on_event(msg))
        self.log = UnifiedLog(fs, self.dir, segment_bytes,
                              lambda msg: on_event(f"{topic}-{partition}: {msg}"))
        self.producers = ProducerStateManager()
        self._rebuild_producer_state()
        self.high_watermark = min(high_watermark, self.log.end_offset)
        self.replicas: tuple = ()
        self.isr: tuple = ()
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.is_leader = False
        self.leader_epoch_start_offset = 0
        self.remote: dict[int, RemoteReplica] = {}
        self.pending_isr: tuple | None = None  # AlterPartition in flight
        self.pending_deadline_ms = 0
        self.unflushed_messages = 0
        self._checkpointed_epochs = self.log.epoch_entries
        self._held_back = False  # the HW is held below the log end by a short ISR (coverage)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition

    def delete(self) -> None:
        """The topic was deleted: its data goes from this broker."""
        self.is_leader = False
        remove_files(self.fs, self.dir)

    @property
    def maximal_isr(self) -> tuple:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(b for b in self.pending_isr if b not in self.isr)

    def _rebuild_producer_state(self) -> None:
        self.producers.clear()
        for header in self.log.batch_headers(self.log.start_offset):
            marker = None
            if header.is_control and header.is_transactional:
                batch = self.log.read_range(header.base_offset, 1, header.next_offset)
                marker = marker_of(header, batch[:header.size])
            self.producers.update(header, marker)

    @property
    def last_stable_offset(self) -> int:
        """The HW, or the first offset of the oldest open transaction if that is lower."""
        first = self.producers.first_unstable_offset()
        return self.high_watermark if first is None else min(first, self.high_watermark)

    # ------------------------------------------------------------ roles

    def apply_registration(self, reg: PartitionRegistration, now: int) -> str | None:
        """Follow the image; returns "leader"/"follower" when the role or epoch changed."""
        replicas_changed = reg.replicas != self.replicas
        self.replicas = reg.replicas
        if reg.leader_epoch < self.leader_epoch or (reg.leader_epoch == self.leader_epoch and
                                                    reg.partition_epoch <= self.partition_epoch):
            return None
        new_epoch = reg.leader_epoch != self.leader_epoch or reg.leader != self.leader
        self.isr = reg.isr
        self.partition_epoch = reg.partition_epoch
        if self.pending_isr is not None:
            self.pending_isr = None  # the controller decided; the image is the truth
        if not new_epoch:
            if self.is_leader and replicas_changed:
                # a reassignment added replicas (removing them bumps the leader epoch): they
                # fetch from this leader as followers from now on
                self.remote = {b: self.remote.get(b) or RemoteReplica(b, last_caught_up_ms=0)
                               for b in reg.replicas if b != self.node_id}
            return None
        self.leader = reg.leader
        self.leader_epoch = reg.leader_epoch
        if reg.leader == self.node_id:
            self.is_leader = True
            self.leader_epoch_start_offset = self.log.end_offset
            self.remote = {b: RemoteReplica(b, last_caught_up_ms=now if b in reg.isr else 0)
                           for b in reg.replicas if b != self.node_id}
            self._on_event(f"{self.topic}-{self.partition}: leader in epoch {reg.leader_epoch} "
                           f"at offset {self.log.end_offset}, ISR {list(reg.isr)}, "
                           f"HW {self.high_watermark}")
            return "leader"
        if self.is_leader:
            # a leader handing over (Kafka logs the same): what it keeps, for the log's reader
            self._on_event(f"{self.topic}-{self.partition}: follower of n{reg.leader} in epoch "
                           f"{reg.leader_epoch} at offset {self.log.end_offset}, "
                           f"HW {self.high_watermark}")
        self.is_leader = False
        self.remote = {}
        return "follower"

    # ------------------------------------------------------------ leader

    def append_as_leader(self, batch: bytes, flush_messages: int) -> records.BatchHeader:
        header = self.log.append(records.restamp(batch, self.log.end_offset, self.leader_epoch))
        self.producers.update(header, marker_of(header, batch))
        self._after_append(header.records_count, flush_messages)
        return header

    def _after_append(self, count: int, flush_messages: int) -> None:
        self.unflushed_messages += count
        if self.unflushed_messages >= flush_messages:
            if self.skip_fsync:  # counted as flushed, never synced
                self.log.flushed_end_offset = self.log.end_offset
            else:
                self.log.flush()
            self.unflushed_messages = 0
        self._checkpoint_epochs()

    def _checkpoint_epochs(self) -> None:
        epochs = self.log.epoch_entries
        if epochs != self._checkpointed_epochs:
            text = f"0\n{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs)
            write_durably(self.fs, os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), text.encode())
            self._checkpointed_epochs = epochs

    def maybe_increment_hw(self, min_isr: int) -> bool:
        """Advance the HW as far as the maximal ISR allows. True if it moved."""
        if self.is_leader and self.hw_ignores_isr:
            moved = self.log.end_offset > self.high_watermark
            self.high_watermark = max(self.high_watermark, self.log.end_offset)
            return moved
        if self.is_leader and len(self.isr) < min_isr:
            if not self._held_back and self.log.end_offset > self.high_watermark:
                self._held_back = True
                self._on_event(Reached("hwm-held-back", f"{self.topic}-{self.partition}: high "
                                       f"watermark held at {self.high_watermark}: ISR "
                                       f"{list(self.isr)} is below min.insync.replicas {min_isr}"))
            return False
        self._held_back = False
        if not self.is_leader:
            return False
        leos = [self.log.end_offset]
        for b in self.maximal_isr:
            if b != self.node_id:
                r = self.remote.get(b)
                leos.append(r.log_end_offset if r is not None else -1)
        new_hw = min(leos)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def delete_records(self, offset: int) -> tuple[int, int]:
        """Kafka's DeleteRecords on the leader: (error, the offset the log now starts at or
        past). -1 means the high watermark; an offset past it, or negative, is out of range."""
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            return m.OFFSET_OUT_OF_RANGE, -1
        if self._move_start(offset):
            self._on_event(f"{self.topic}-{self.partition}: records before {offset} deleted "
                           f"(DeleteRecords)")
        return m.NONE, offset

    def low_watermark(self, live: set[int]) -> int:
        """The lowest log start among this leader and its ``live`` followers (a follower not
        heard from yet counts as -1)."""
        return min([self.log.start_offset] + [r.log_start_offset for b, r in self.remote.items()
                                               if b in live])

    def out_of_sync_replicas(self, now: int, lag_max_ms: int) -> list[int]:
        return [b for b in self.isr if b != self.node_id and b in self.remote
                and now - self.remote[b].last_caught_up_ms > lag_max_ms]

    def caught_up_outside_isr(self, now: int, lag_max_ms: int) -> list[int]:
        """Followers outside the ISR that may join: past the HW and the start of this
        leader's epoch, and in sync (caught up within ``lag_max_ms``, as Kafka's
        isFollowerInSync), so a follower that stopped fetching never joins on what it
        fetched before (a dead one, taken in on its old position, flapped in and out)."""
        return [b for b, r in self.remote.items() if b not in self.maximal_isr
                and r.log_end_offset >= self.high_watermark
                and r.log_end_offset >= self.leader_epoch_start_offset
                and now - r.last_caught_up_ms <= lag_max_ms]

    # ------------------------------------------------------------ follower

    def truncate_to_diverging(self, diverging: OffsetAndEpoch) -> int:
        before = self.log.end_offset
        end = self.log.truncate_to_end_offset(diverging, raft=False)
        if end < before:
            self._on_event(Reached("epoch-truncation",
                                   f"{self.topic}-{self.partition}: truncated from {before} to "
                                   f"{end} (diverging epoch {diverging.epoch} ends at "
                                   f"{diverging.offset})"))
            self._rebuild_producer_state()
            self._checkpoint_epochs()
        self.high_watermark = min(self.high_watermark, end)
        return end

    def start_at(self, leader_start: int) -> None:
        """This follower's log ends below its leader's start (records deleted while it was
        away): it restarts empty at the leader's start, as Kafka's follower does."""
        self._on_event(f"{self.topic}-{self.partition}: the log ends at {self.log.end_offset}, "
                       f"below the leader's start {leader_start}: restarting there")
        self.log.truncate_fully_and_start_at(leader_start)
        self._rebuild_producer_state()
        self._checkpoint_epochs()
        self.high_watermark = leader_start

    def follow_log_start(self, leader_start: int) -> None:
        """The leader's log start, as its fetch answer says, up to this follower's HW."""
        self._move_start(min(leader_start, self.high_watermark))

    def _move_start(self, offset: int) -> bool:
        """The log starts at ``offset`` if that is higher; the producers whose records all
        went are forgotten, as Kafka evicts them. True if it moved."""
        if offset <= self.log.start_offset:
            return False
        self.log.delete_records_before(offset)
        self._rebuild_producer_state()
        return True

    def append_as_follower(self, data: bytes, leader_hw: int, flush_messages: int) -> None:
        count = 0
        for header, batch in records.iter_batches(data):
            if header.base_offset != self.log.end_offset:
                break
            self.log.append(batch)
            self.producers.update(header, marker_of(header, batch))
            count += header.records_count
        if count:
            self._after_append(count, flush_messages)
        self.high_watermark = min(leader_hw, self.log.end_offset)
