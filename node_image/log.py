"""Segmented, append-only log of record batches, with snapshots.

Theory of operation
-------------------
A log directory holds segment files named ``<20-digit base offset>.log``,
each a run of record batches (``node_image.records``), and snapshot files
``<20-digit end offset>-<10-digit epoch>.checkpoint``. A snapshot holds the
state machine's state for every record below its end offset; once one exists
the log's *start offset* moves up to it and whole segments below it are
deleted. Readers asking for an offset below the start are told to fetch the
snapshot instead.

Rules
-----
- Batches are appended whole, at the log end offset (LEO), and are never
  modified; truncation cuts whole batches off the end.
- ``flush()`` fsyncs every segment written since the last flush. Nothing is
  durable before it; ``flushed_end_offset`` says how far durability reaches.
- Recovery (``open``) reads every segment, checks lengths, CRC-32C and offset
  continuity, and at the first bad batch truncates the log there, deletes any
  later segment and logs what it cut. A corrupt batch is never served.
- The leader-epoch cache, a list of (epoch, start offset), is derived from
  the batches' partition leader epochs on open and kept in step on append and
  truncate; ``end_offset_for_epoch`` answers Kafka's OffsetForLeaderEpoch.
- Snapshots are written ``.part`` first, fsynced, renamed, directory fsynced.
  A ``.part`` file found on open is an unfinished snapshot and is deleted.
- A data partition's start can also be moved up by Kafka's DeleteRecords
  (``delete_records_before``): the new start is written durably to
  ``log-start-offset`` before any segment goes, and on open the start is the
  higher of it and the first segment's base (a log that recovered shorter
  than it restarts empty there, as Kafka's does).
"""
from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from typing import Callable

from . import records
from .fs import FileSystem, write_durably

logger = logging.getLogger(__name__)

SEGMENT_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".part"
LOG_START = "log-start-offset"  # the start DeleteRecords moved a data log to


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BatchEntry:
    base_offset: int
    next_offset: int
    epoch: int
    segment: int  # base offset of the segment holding it
    position: int
    size: int
    crc: int
    max_timestamp: int  # the batch header's, kept so timestamp searches read no headers


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def snapshot_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> OffsetAndEpoch | None:
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    parts = stem.split("-")
    if len(parts) != 2 or len(parts[0]) != 20 or len(parts[1]) != 10:
        return None
    if not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return OffsetAndEpoch(int(parts[0]), int(parts[1]))


class UnifiedLog:
    """One partition's log (the metadata log ``__cluster_metadata-0`` or, later, a data partition)."""

    def __init__(self, fs: FileSystem, directory: str, segment_bytes: int,
                 on_event: Callable[[str], None] | None = None) -> None:
        if segment_bytes < records.HEADER_SIZE:
            raise ValueError(f"segment bytes {segment_bytes} is smaller than one batch header")
        self.fs = fs
        self.dir = directory
        self.segment_bytes = segment_bytes
        self._on_event = on_event or (lambda msg: logger.warning(msg))
        self._segments: list[int] = []  # base offsets, ascending
        self._segment_size: dict[int, int] = {}
        self._batches: list[BatchEntry] = []
        self._bases: list[int] = []  # base offsets of _batches, for bisect
        self._epochs: list[tuple[int, int]] = []  # (epoch, start offset), ascending
        self._unflushed: set[int] = set()
        self._snapshots: list[OffsetAndEpoch] = []
        self._dir_dirty = False  # a segment was created or removed since the last flush
        self.start_offset = 0
        self.end_offset = 0
        self.flushed_end_offset = 0
        self._open()

    @property
    def size_bytes(self) -> int:
        """The bytes the log's segments hold (Kafka's ``UnifiedLog.size``)."""
        return sum(self._segment_size.values())

    # ------------------------------------------------------------------ open

    def _path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def _stored_start(self) -> int | None:
        """The start DeleteRecords last moved the log to, or None."""
        path = self._path(LOG_START)
        if not self.fs.exists(path):
            return None
        text = self.fs.read(path).decode(errors="replace").strip()
        if not text.isdigit():
            raise ValueError(f"{path}: not a log start offset: {text[:40]!r}")
        return int(text)

    def _open(self) -> None:
        self.fs.makedirs(self.dir)
        names = self.fs.listdir(self.dir)
        for name in names:
            if name.endswith(PART_SUFFIX):
                self._on_event(f"recovery: deleting unfinished file {name}")
                self.fs.remove(self._path(name))
        snapshots = sorted(s for s in (parse_snapshot_name(n) for n in names) if s is not None)
        for snap in snapshots:
            if self._snapshot_valid(snap):
                self._snapshots.append(snap)
            else:
                self._on_event(f"recovery: deleting corrupt snapshot {snapshot_name(snap)}")
                self.fs.remove(self._path(snapshot_name(snap)))
        segs = sorted(int(n[:-len(SEGMENT_SUFFIX)]) for n in names
                      if n.endswith(SEGMENT_SUFFIX) and n[:-len(SEGMENT_SUFFIX)].isdigit())
        expected: int | None = None
        for i, base in enumerate(segs):
            if expected is not None and base != expected:
                self._on_event(
                    f"recovery: segment {segment_name(base)} starts at {base} but the log "
                    f"ends at {expected}; deleting it and every later segment")
                for later in segs[i:]:
                    self.fs.remove(self._path(segment_name(later)))
                break
            ok = self._recover_segment(base)
            expected = self.end_offset if self._segments else None
            if not ok:
                for later in segs[i + 1:]:
                    self._on_event(f"recovery: deleting segment {segment_name(later)} after the cut")
                    self.fs.remove(self._path(segment_name(later)))
                break
        latest = self.latest_snapshot_id()
        if latest is not None:
            if latest.offset > self.end_offset or not self._batches or (
                    self._batches[0].base_offset > latest.offset):
                self._reset_to(latest.offset)
            self.start_offset = latest.offset
            self.advance_start_to_snapshot()
        elif self._segments:
            self.start_offset = self._segments[0]
        stored = self._stored_start()
        if stored is not None and stored > self.start_offset:
            if stored > self.end_offset:
                self._on_event(f"recovery: the log ends at {self.end_offset}, below its start "
                               f"{stored} (DeleteRecords); it restarts empty there")
                self._reset_to(stored)
            else:
                self.start_offset = stored
        if not self._segments:
            self._new_segment(self.end_offset)
        self.flushed_end_offset = self.end_offset
        self.fs.fsync_dir(self.dir)

    def _recover_segment(self, base: int) -> bool:
        """Load one segment's batches; truncate at the first bad one. False if it cut."""
        path = self._path(segment_name(base))
        data = self.fs.read(path)
        if not self._segments:
            self.end_offset = base
        self._segments.append(base)
        pos = 0
        view = memoryview(data)
        while pos < len(data):
            try:
                header = records.check_batch(view, pos)
                if header.base_offset != self.end_offset:
                    raise records.CorruptBatchError(
                        f"batch base offset {header.base_offset}, expected {self.end_offset}")
            except records.CorruptBatchError as exc:
                self._on_event(
                    f"recovery: {segment_name(base)} truncated at byte {pos} of {len(data)} "
                    f"(log end offset {self.end_offset}): {exc}")
                self.fs.truncate(path, pos)
                self.fs.fsync(path)
                self._segment_size[base] = pos
                return False
            self._add_entry(header, base, pos)
            pos += header.size
        self._segment_size[base] = pos
        return True

    def _snapshot_valid(self, snap: OffsetAndEpoch) -> bool:
        try:
            for _ in records.iter_batches(self.fs.read(self._path(snapshot_name(snap)))):
                pass
        except records.CorruptBatchError:
            return False
        return True

    # ---------------------------------------------------------------- entries

    def _add_entry(self, header: records.BatchHeader, segment: int, position: int) -> None:
        entry = BatchEntry(header.base_offset, header.next_offset, header.partition_leader_epoch,
                           segment, position, header.size, header.crc, header.max_timestamp)
        self._batches.append(entry)
        self._bases.append(entry.base_offset)
        if not self._epochs or entry.epoch > self._epochs[-1][0]:
            self._epochs.append((entry.epoch, entry.base_offset))
        elif entry.epoch < self._epochs[-1][0]:
            # Kafka's LeaderEpochFileCache.assign: a batch of an older epoch (a follower copying
            # a leader whose log kept what a later epoch should have cut away) removes, from the
            # end, the entries that would break monotonicity, and starts its own.
            dropped = []
            while self._epochs and (self._epochs[-1][0] >= entry.epoch
                                    or self._epochs[-1][1] >= entry.base_offset):
                dropped.append(self._epochs.pop())
            self._epochs.append((entry.epoch, entry.base_offset))
            self._on_event(f"batch at {entry.base_offset} has epoch {entry.epoch}, below the "
                           f"log's latest; removed epoch entries {dropped[::-1]}")
        self.end_offset = entry.next_offset

    def _new_segment(self, base: int) -> None:
        path = self._path(segment_name(base))
        self.fs.write(path, b"")
        self._dir_dirty = True
        self._segments.append(base)
        self._segment_size[base] = 0
        self._unflushed.add(base)

    # ------------------------------------------------------------------ write

    def append(self, batch: bytes) -> records.BatchHeader:
        """Append one CRC-checked batch whose base offset is the log end offset."""
        header = records.check_batch(batch)
        if header.size != len(batch):
            raise records.CorruptBatchError(f"batch says {header.size} bytes, got {len(batch)}")
        if header.base_offset != self.end_offset:
            raise ValueError(
                f"append at offset {header.base_offset}, log end offset is {self.end_offset}")
        active = self._segments[-1]
        if self._segment_size[active] > 0 and self._segment_size[active] + len(batch) > self.segment_bytes:
            self._new_segment(self.end_offset)
            active = self._segments[-1]
        position = self._segment_size[active]
        self.fs.append(self._path(segment_name(active)), batch)
        self._segment_size[active] = position + len(batch)
        self._unflushed.add(active)
        self._add_entry(header, active, position)
        return header

    def flush(self) -> None:
        for base in sorted(self._unflushed):
            if base in self._segment_size:
                self.fs.fsync(self._path(segment_name(base)))
        if self._dir_dirty:
            self.fs.fsync_dir(self.dir)
            self._dir_dirty = False
        self._unflushed.clear()
        self.flushed_end_offset = self.end_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after ``offset`` (rounded down to a batch start)."""
        if offset >= self.end_offset:
            return
        if offset < self.start_offset:
            raise AssertionError(f"truncate to {offset} below log start {self.start_offset}")
        i = bisect.bisect_right(self._bases, offset) - 1
        if i >= 0 and self._batches[i].next_offset <= offset:
            i += 1
        i = max(i, 0)
        cut = self._batches[i] if i < len(self._batches) else None
        if cut is None:
            return
        for base in [s for s in self._segments if s > cut.segment]:
            self._dir_dirty = True
            self.fs.remove(self._path(segment_name(base)))
            self._segments.remove(base)
            del self._segment_size[base]
            self._unflushed.discard(base)
        self.fs.truncate(self._path(segment_name(cut.segment)), cut.position)
        self._segment_size[cut.segment] = cut.position
        self._unflushed.add(cut.segment)
        del self._batches[i:]
        del self._bases[i:]
        self.end_offset = cut.base_offset
        self.flushed_end_offset = min(self.flushed_end_offset, self.end_offset)
        while self._epochs and self._epochs[-1][1] >= self.end_offset:
            self._epochs.pop()
        if self._segments[-1] == cut.segment and cut.position == 0 and len(self._segments) > 1:
            # An empty segment in the middle would break the continuity check.
            self.fs.remove(self._path(segment_name(cut.segment)))
            self._segments.pop()
            del self._segment_size[cut.segment]
            self._unflushed.discard(cut.segment)
            self._new_segment(self.end_offset)

    def truncate_to_end_offset(self, diverging: OffsetAndEpoch, raft: bool = True) -> int:
        """Kafka's truncateToEndOffset: cut where our log leaves the leader's. Returns the offset.

        In the Raft log (``raft``) epoch 0 is no leader's, the prefix before any epoch, and is
        cut at the leader's end of it, as Kafka's ReplicatedLog does. A partition's first
        leader epoch is 0, a real one: the follower cuts where its own epoch 0 ends too, as
        Kafka's fetcher truncates to the smaller of the two ends (a replica that led epoch 1
        alone from offset 186 keeps nothing of it when the leader's epoch 0 ends at 206)."""
        if diverging.epoch == 0 and raft:
            offset = min(diverging.offset, self.end_offset)
        else:
            local = self.end_offset_for_epoch(diverging.epoch)
            if local.epoch == diverging.epoch:
                offset = min(local.offset, diverging.offset)
            else:
                offset = local.offset
        offset = max(offset, self.start_offset)
        self.truncate_to(offset)
        return self.end_offset

    # ------------------------------------------------------------------- read

    @property
    def last_fetched_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        latest = self.latest_snapshot_id()
        return latest.epoch if latest else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's endOffsetForEpoch: the largest epoch <= ``epoch`` we have and where it ends.

        An epoch older than every one we hold ends where our first epoch starts.
        """
        if not self._epochs:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        latest = self._epochs[-1][0]
        if epoch >= latest:
            return OffsetAndEpoch(self.end_offset, latest)
        idx = next(i for i, (e, _) in enumerate(self._epochs) if e > epoch)
        higher_start = self._epochs[idx][1]
        result = OffsetAndEpoch(higher_start, epoch if idx == 0 else self._epochs[idx - 1][0])
        earliest = self._snapshots[0] if self._snapshots else None
        if earliest is not None and result.offset == earliest.offset and result.epoch < earliest.epoch:
            result = OffsetAndEpoch(earliest.offset, earliest.epoch)
        return result

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> tuple[str, OffsetAndEpoch]:
        """Kafka's validateOffsetAndEpoch for a follower's (fetch offset, last fetched epoch).

        Returns ("valid" | "diverging" | "snapshot", OffsetAndEpoch).
        """
        if self.start_offset == 0 and offset == 0:
            return "valid", OffsetAndEpoch(0, 0)
        earliest = self._snapshots[0] if self._snapshots else None
        if earliest is not None and (
                offset < self.start_offset
                or (offset == self.start_offset and epoch != earliest.epoch)
                or epoch < earliest.epoch):
            return "snapshot", self._snapshots[-1]
        end = self.end_offset_for_epoch(epoch)
        if end.epoch != epoch or end.offset < offset:
            return "diverging", end
        return "valid", OffsetAndEpoch(offset, epoch)

    def epoch_at(self, offset: int) -> int:
        """Epoch of the batch holding ``offset`` (the snapshot's epoch at the log start)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        if i < 0 or self._batches[i].next_offset <= offset:
            latest = self.latest_snapshot_id()
            if latest is not None and offset == latest.offset - 1:
                return latest.epoch
            raise KeyError(f"offset {offset} is not in the log")
        return self._batches[i].epoch

    def batch_entries(self, start: int, end: int) -> list[BatchEntry]:
        """Entries of the batches that start in [start, end)."""
        i = bisect.bisect_left(self._bases, start)
        j = bisect.bisect_left(self._bases, end)
        return self._batches[i:j]

    def read_entry(self, entry: BatchEntry) -> bytes:
        return self.fs.read_at(self._path(segment_name(entry.segment)), entry.position, entry.size)

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Batches from ``offset`` (a batch start) up to about ``max_bytes``; at least one."""
        return self._read_from(bisect.bisect_left(self._bases, offset), offset, max_bytes,
                               self.end_offset)

    def read_range(self, offset: int, max_bytes: int, upper: int) -> bytes:
        """Whole batches from the one holding ``offset``, each ending at or below ``upper``
        (a data partition's high watermark), up to about ``max_bytes`` (at least one batch)."""
        return self._read_from(max(bisect.bisect_right(self._bases, offset) - 1, 0), offset,
                               max_bytes, upper)

    def _read_from(self, i: int, offset: int, max_bytes: int, upper: int) -> bytes:
        """The batches from entry ``i`` on that end after ``offset`` and at or below ``upper``,
        up to about ``max_bytes`` (at least one). Batches lying end to end in one segment are
        read with one call, as Kafka sends a file range: a consumer starting over from offset
        0 costs a read per segment, not a file opened per batch."""
        runs: list[list[int]] = []  # [segment, position, size]
        total = 0
        while i < len(self._batches):
            entry = self._batches[i]
            if entry.next_offset > upper or (total and total + entry.size > max_bytes):
                break
            if entry.next_offset > offset:
                last = runs[-1] if runs else None
                if last is not None and last[0] == entry.segment \
                        and last[1] + last[2] == entry.position:
                    last[2] += entry.size
                else:
                    runs.append([entry.segment, entry.position, entry.size])
                total += entry.size
            i += 1
        return b"".join(self.fs.read_at(self._path(segment_name(seg)), pos, size)
                        for seg, pos, size in runs)

    def batch_headers(self, start: int = 0):
        """Headers of the batches starting at or after ``start``, read from disk."""
        for entry in self.batch_entries(start, self.end_offset):
            yield self._header(entry)

    def control_batches(self, start: int = 0):
        """The control batches starting at or after ``start``, whole; of the others only
        the header is read."""
        for entry in self.batch_entries(start, self.end_offset):
            if self._header(entry).is_control:
                yield self.read_entry(entry)

    def _header(self, entry: BatchEntry) -> records.BatchHeader:
        return records.parse_header(self.fs.read_at(self._path(segment_name(entry.segment)),
                                                    entry.position, records.HEADER_SIZE))

    def offset_for_timestamp(self, target: int, upper: int) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record below ``upper`` stamped at
        or after ``target``, as Kafka's LogSegment.findOffsetByTimestamp; None if none is."""
        for entry in self.batch_entries(self.start_offset, upper):
            if entry.max_timestamp >= target:
                batch = self.read_entry(entry)
                header = records.parse_header(batch)
                for ts, offset in _stamps(batch, header):
                    if ts >= target:
                        return (ts, offset, header.partition_leader_epoch) if offset < upper \
                            else None
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record with the log's greatest
        timestamp (ListOffsets' MAX_TIMESTAMP, KIP-734); None for an empty log."""
        entries = self.batch_entries(self.start_offset, self.end_offset)
        if not entries:
            return None
        best_entry = max(entries, key=lambda e: e.max_timestamp)  # the first of equals
        best = best_entry.max_timestamp
        batch = self.read_entry(best_entry)
        header = records.parse_header(batch)
        offset = next((o for ts, o in _stamps(batch, header) if ts == best), header.last_offset)
        return best, offset, header.partition_leader_epoch

    @property
    def epoch_entries(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: (epoch, start offset), ascending."""
        return list(self._epochs)

    def is_batch_start(self, offset: int) -> bool:
        if offset == self.end_offset:
            return True
        i = bisect.bisect_left(self._bases, offset)
        return i < len(self._bases) and self._bases[i] == offset

    # -------------------------------------------------------------- snapshots

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self._snapshots[-1] if self._snapshots else None

    def snapshot_path(self, snapshot_id: OffsetAndEpoch) -> str:
        return self._path(snapshot_name(snapshot_id))

    def read_snapshot(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self.fs.read(self.snapshot_path(snapshot_id))

    def write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a snapshot durably (part file, fsync, rename, fsync dir)."""
        if self._snapshots and snapshot_id <= self._snapshots[-1]:
            return
        path = self.snapshot_path(snapshot_id)
        part = path + PART_SUFFIX
        self.fs.write(part, data)
        self.fs.fsync(part)
        self.fs.rename(part, path)
        self.fs.fsync_dir(self.dir)
        self._snapshots.append(snapshot_id)

    def advance_start_to_snapshot(self) -> None:
        """Move the log start to the latest snapshot; delete segments wholly below it."""
        latest = self.latest_snapshot_id()
        if latest is None:
            return
        for old in self._snapshots[:-1]:
            self.fs.remove(self.snapshot_path(old))
        self._snapshots = self._snapshots[-1:]
        if latest.offset <= self.start_offset:
            return
        if latest.offset > self.end_offset:
            self._reset_to(latest.offset)
        self.start_offset = latest.offset
        self._drop_below(latest.offset)

    def _drop_below(self, offset: int) -> None:
        """Delete the segments wholly below ``offset`` and the epochs that ended there."""
        while len(self._segments) > 1 and self._segments[1] <= offset:
            base = self._segments.pop(0)
            self.fs.remove(self._path(segment_name(base)))
            del self._segment_size[base]
            self._unflushed.discard(base)
            k = bisect.bisect_left(self._bases, self._segments[0])
            del self._batches[:k]
            del self._bases[:k]
        while len(self._epochs) > 1 and self._epochs[1][1] <= offset:
            self._epochs.pop(0)
        self.fs.fsync_dir(self.dir)

    def delete_records_before(self, offset: int) -> None:
        """Kafka's DeleteRecords on this log: the start moves up to ``offset`` (at most the
        end), durably, and the segments wholly below it are deleted. Reads below it are out
        of range from now on."""
        if offset <= self.start_offset:
            return
        if offset > self.end_offset:
            raise AssertionError(f"log start {offset} past the log end {self.end_offset}")
        write_durably(self.fs, self._path(LOG_START), f"{offset}\n".encode())
        self.start_offset = offset
        self._drop_below(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower whose log ends below its leader's start: everything goes and the log
        restarts empty at ``offset`` (Kafka's truncateFullyAndStartAt)."""
        write_durably(self.fs, self._path(LOG_START), f"{offset}\n".encode())
        self._reset_to(offset)

    def _reset_to(self, offset: int) -> None:
        """Drop every batch and segment; the log restarts empty at ``offset``."""
        for base in self._segments:
            self.fs.remove(self._path(segment_name(base)))
        self._segments.clear()
        self._segment_size.clear()
        self._unflushed.clear()
        self._batches.clear()
        self._bases.clear()
        self._epochs.clear()
        self.fs.fsync_dir(self.dir)
        self.end_offset = offset
        self.flushed_end_offset = offset
        self.start_offset = offset
        self._new_segment(offset)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A follower's downloaded snapshot: store it and restart the log at its offset. The
        records after it are kept only where the log holds the snapshot's last offset in
        the snapshot's epoch (they then follow it); a log whose records there are of another
        epoch diverged before the snapshot and starts again at it (else the follower fetches
        from its own end in that older epoch, is sent the snapshot again, and loops)."""
        self.write_snapshot(snapshot_id, data)
        end = self.end_offset_for_epoch(snapshot_id.epoch)
        if snapshot_id.offset >= self.end_offset or end.epoch != snapshot_id.epoch or \
                end.offset < snapshot_id.offset:
            self._reset_to(snapshot_id.offset)
        self.advance_start_to_snapshot()
        self.flush()


def _stamps(batch: bytes, header: records.BatchHeader):
    """(timestamp, offset) of each record of ``batch``: a LogAppendTime batch stamps every
    record with its max timestamp, as Kafka's clients read it."""
    if header.attributes & records.ATTR_LOG_APPEND_TIME:
        return [(header.max_timestamp, o) for o in range(header.base_offset, header.next_offset)]
    return [(r.timestamp, r.offset) for r in records.decode_records(batch)[1]]
