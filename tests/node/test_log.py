"""Storage: segment recovery cuts torn or corrupt tails and serves nothing after them."""
import os
import random

import pytest

from node_image import records
from node_image.fs import RealFileSystem
from node_image.log import OffsetAndEpoch, UnifiedLog, segment_name
from simulator.disk import SimDisk


def fill(log, n, epoch=1, size=20):
    for i in range(n):
        log.append(records.build_batch(log.end_offset, epoch, [(None, bytes([i % 256]) * size)], i))
    log.flush()


@pytest.fixture(params=["real", "sim"])
def fs_and_dir(request, tmp_path):
    if request.param == "real":
        fs = RealFileSystem()
        yield fs, str(tmp_path / "log")
        fs.close()
    else:
        yield SimDisk(), "/d/log"


def segment_path(d, base=0):
    return os.path.join(d, segment_name(base))


def test_cut_mid_batch_is_truncated(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 1 << 20)
    fill(log, 10)
    size = fs.size(segment_path(d))
    batch_size = size // 10
    fs.truncate(segment_path(d), size - batch_size // 2)  # tear the last batch
    events = []
    log2 = UnifiedLog(fs, d, 1 << 20, events.append)
    assert log2.end_offset == 9
    assert fs.size(segment_path(d)) == 9 * batch_size
    assert any("truncated" in e for e in events)
    data = log2.read(0, 1 << 20)
    assert [h.base_offset for h, _ in records.iter_batches(data)] == list(range(9))


def test_flipped_byte_is_detected_and_nothing_after_it_is_served(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 1 << 20)
    fill(log, 10)
    path = segment_path(d)
    data = bytearray(fs.read(path))
    batch_size = len(data) // 10
    data[4 * batch_size + 40] ^= 0x10  # inside batch 4, within the CRC'd part
    fs.write(path, bytes(data))
    events = []
    log2 = UnifiedLog(fs, d, 1 << 20, events.append)
    assert log2.end_offset == 4, "batches 4..9 must be cut: 4 is corrupt, 5..9 come after it"
    assert any("CRC mismatch" in e for e in events)
    served = log2.read(0, 1 << 20)
    assert len(served) == 4 * batch_size
    assert [h.base_offset for h, _ in records.iter_batches(served)] == [0, 1, 2, 3]
    # the log is writable again right where it was cut
    log2.append(records.build_batch(4, 1, [(None, b"new")], 0))
    assert log2.end_offset == 5


def test_corruption_in_an_earlier_segment_drops_later_segments(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 200)
    fill(log, 12, size=40)
    segs = sorted(n for n in fs.listdir(d) if n.endswith(".log"))
    assert len(segs) > 3
    second = os.path.join(d, segs[1])
    data = bytearray(fs.read(second))
    data[30] ^= 0xFF
    fs.write(second, bytes(data))
    log2 = UnifiedLog(fs, d, 200)
    assert log2.end_offset == int(segs[1][:20])
    assert sorted(n for n in fs.listdir(d) if n.endswith(".log")) == segs[:2]


def test_power_loss_keeps_only_fsynced_batches():
    disk = SimDisk()
    log = UnifiedLog(disk, "/d/log", 1 << 20)
    fill(log, 5)
    for i in range(3):  # appended, never flushed
        log.append(records.build_batch(log.end_offset, 1, [(None, b"unsynced")], 0))
    disk.crash(random.Random(1))
    assert UnifiedLog(disk, "/d/log", 1 << 20).end_offset == 5


def test_torn_write_after_power_loss_is_cut():
    disk = SimDisk()
    log = UnifiedLog(disk, "/d/log", 1 << 20)
    fill(log, 5)
    for i in range(3):
        log.append(records.build_batch(log.end_offset, 1, [(None, b"x" * 50)], 0))
    rng = random.Random(7)
    disk.crash(rng, torn_write_prob=1.0)  # keeps a random prefix of the unsynced tail
    log2 = UnifiedLog(disk, "/d/log", 1 << 20)
    assert 5 <= log2.end_offset <= 8
    for h, _ in records.iter_batches(log2.read(0, 1 << 20)):
        assert h.base_offset < log2.end_offset


def test_epoch_cache_and_divergence(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 1 << 20)
    fill(log, 3, epoch=1)   # offsets 0..2
    fill(log, 2, epoch=3)   # offsets 3..4
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 1)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.validate_offset_and_epoch(3, 1) == ("valid", OffsetAndEpoch(3, 1))
    assert log.validate_offset_and_epoch(4, 1) == ("diverging", OffsetAndEpoch(3, 1))
    assert log.validate_offset_and_epoch(4, 2) == ("diverging", OffsetAndEpoch(3, 1))
    assert log.truncate_to_end_offset(OffsetAndEpoch(4, 3)) == 4
    assert log.last_fetched_epoch == 3
    log.truncate_to(2)
    assert (log.end_offset, log.last_fetched_epoch) == (2, 1)
    # reopening derives the same epochs from the batches
    log.flush()
    assert UnifiedLog(fs, d, 1 << 20).end_offset_for_epoch(1) == OffsetAndEpoch(2, 1)


def test_snapshot_advances_log_start_and_survives_restart(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 300)
    fill(log, 20, size=30)
    snap = OffsetAndEpoch(12, 1)
    log.write_snapshot(snap, records.build_batch(0, 1, [(None, b"state")], 0))
    log.advance_start_to_snapshot()
    assert log.start_offset == 12
    assert "00000000000000000012-0000000001.checkpoint" in fs.listdir(d)
    assert min(int(n[:20]) for n in fs.listdir(d) if n.endswith(".log")) <= 12
    assert log.validate_offset_and_epoch(5, 1)[0] == "snapshot"
    reopened = UnifiedLog(fs, d, 300)
    assert (reopened.start_offset, reopened.end_offset) == (12, 20)
    assert reopened.latest_snapshot_id() == snap


def test_a_snapshot_installed_over_records_of_an_older_epoch_restarts_the_log_at_it(
        fs_and_dir):
    """A follower whose records past the snapshot are of an older epoch than the snapshot's
    diverged before it: it starts again at the snapshot (keeping them, it fetched from its
    end in the older epoch, was sent the same snapshot, and looped: found by the simulator,
    seed 42 of the voter-split package)."""
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 1 << 20)
    fill(log, 33, epoch=1)  # offsets 0..32, all in epoch 1
    log.install_snapshot(OffsetAndEpoch(30, 3), records.build_batch(0, 3, [(None, b"s")], 0))
    assert (log.start_offset, log.end_offset) == (30, 30)
    assert log.validate_offset_and_epoch(30, 3)[0] == "valid"
    # records that follow the snapshot in its own epoch are kept
    log = UnifiedLog(fs, d + "-2", 1 << 20)
    fill(log, 10, epoch=1)
    fill(log, 25, epoch=3)  # 10..34 in epoch 3
    log.install_snapshot(OffsetAndEpoch(30, 3), records.build_batch(0, 3, [(None, b"s")], 0))
    assert (log.start_offset, log.end_offset) == (30, 35)


def test_delete_records_moves_the_start_durably_and_drops_whole_segments(fs_and_dir):
    """Kafka's DeleteRecords on a data log: reads below the new start are out of range, the
    segments wholly below it go, and the start survives a restart (a log recovered shorter
    than it restarts empty there); a mangled start file is an error naming it."""
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 300)
    fill(log, 20, size=30)
    segments = sorted(n for n in fs.listdir(d) if n.endswith(".log"))
    log.delete_records_before(13)
    assert log.start_offset == 13 and log.end_offset == 20
    left = sorted(n for n in fs.listdir(d) if n.endswith(".log"))
    assert len(left) < len(segments) and int(left[0][:20]) <= 13, (segments, left)
    assert log.read_range(13, 1 << 20, 20), "the batch at the start is still served"
    log.delete_records_before(7)  # never backwards
    assert log.start_offset == 13
    with pytest.raises(AssertionError, match="past the log end"):
        log.delete_records_before(21)
    reopened = UnifiedLog(fs, d, 300)
    assert (reopened.start_offset, reopened.end_offset) == (13, 20)

    reopened.truncate_fully_and_start_at(40)  # a follower far behind its leader's start
    assert (reopened.start_offset, reopened.end_offset) == (40, 40)
    fill(reopened, 2)
    again = UnifiedLog(fs, d, 300)
    assert (again.start_offset, again.end_offset) == (40, 42)

    fs.write(os.path.join(d, "log-start-offset"), b"fourty\n")
    with pytest.raises(ValueError, match="log-start-offset: not a log start offset"):
        UnifiedLog(fs, d, 300)


def test_a_log_that_recovers_shorter_than_its_start_restarts_empty_there():
    disk = SimDisk()
    log = UnifiedLog(disk, "/d/log", 1 << 20)
    fill(log, 10)
    log.append(records.build_batch(10, 1, [(None, b"x")], 10))  # not fsynced
    log.delete_records_before(11)
    disk.crash(random.Random(1))  # the power goes: the unsynced batch with it
    events = []
    log2 = UnifiedLog(disk, "/d/log", 1 << 20, events.append)
    assert (log2.start_offset, log2.end_offset) == (11, 11)
    assert any("restarts empty" in e for e in events), events


def test_corrupt_snapshot_is_deleted_on_open(fs_and_dir):
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 1 << 20)
    fill(log, 4)
    snap = OffsetAndEpoch(3, 1)
    log.write_snapshot(snap, records.build_batch(0, 1, [(None, b"state")], 0))
    path = log.snapshot_path(snap)
    data = bytearray(fs.read(path))
    data[-1] ^= 1
    fs.write(path, bytes(data))
    events = []
    log2 = UnifiedLog(fs, d, 1 << 20, events.append)
    assert log2.latest_snapshot_id() is None and log2.start_offset == 0
    assert any("corrupt snapshot" in e for e in events)


def test_append_refuses_a_gap():
    log = UnifiedLog(SimDisk(), "/d/log", 1 << 20)
    with pytest.raises(ValueError, match="log end offset is 0"):
        log.append(records.build_batch(5, 1, [(None, b"x")], 0))


def test_an_older_epoch_appended_after_a_newer_one_cuts_the_epoch_cache_as_kafka_does(fs_and_dir):
    """A follower copying a leader that kept what a later epoch should have cut away (the
    planted skip-epoch-truncation) appends it: Kafka's epoch cache drops the entries that would
    break monotonicity. The log refused the batch before, and the partition stopped there."""
    fs, d = fs_and_dir
    events = []
    log = UnifiedLog(fs, d, 1 << 20, events.append)
    fill(log, 3, epoch=0)
    fill(log, 2, epoch=1)
    assert log.epoch_entries == [(0, 0), (1, 3)]
    fill(log, 2, epoch=0)
    assert log.end_offset == 7 and log.epoch_entries == [(0, 5)]
    assert any("removed epoch entries [(0, 0), (1, 3)]" in e for e in events), events
    fill(log, 1, epoch=2)
    assert log.epoch_entries == [(0, 5), (2, 7)]
    again = UnifiedLog(fs, d, 1 << 20, events.append)  # recovery reads the same cache back
    assert again.end_offset == 8 and again.epoch_entries == [(0, 5), (2, 7)]


def test_reads_return_the_batches_one_by_one_would_with_one_call_per_segment(fs_and_dir):
    """A consumer starting over from offset 0 reads thousands of small batches: they are read
    as a file range per segment (as Kafka sends them), and the bytes are exactly those of
    the batches read one at a time, for every start, size limit and upper bound."""
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 700)  # several segments
    fill(log, 60)
    entries = log.batch_entries(0, log.end_offset)
    segments = sorted({e.segment for e in entries})
    assert len(segments) > 3

    def one_by_one(offset, max_bytes, upper):
        out = b""
        for e in entries:
            if e.next_offset > upper or (out and len(out) + e.size > max_bytes):
                break
            if e.next_offset > offset:
                out += log.read_entry(e)
        return out

    rng = random.Random(7)
    for _ in range(300):
        offset = rng.randrange(0, log.end_offset)
        max_bytes = rng.choice([1, 50, 300, 2000, 1 << 20])
        upper = rng.randrange(offset, log.end_offset + 1)
        assert log.read_range(offset, max_bytes, upper) == one_by_one(offset, max_bytes, upper)
    assert log.read(0, 1 << 20) == one_by_one(0, 1 << 20, log.end_offset)

    everything = one_by_one(0, 1 << 20, log.end_offset)
    calls = []
    real = fs.read_at
    fs.read_at = lambda path, pos, size: calls.append(path) or real(path, pos, size)
    assert log.read_range(0, 1 << 20, log.end_offset) == everything
    assert len(calls) == len(segments)


def test_timestamp_searches_follow_truncation_reopening_and_deleted_records(fs_and_dir):
    """ListOffsets' searches answer from what the log holds now: the greatest timestamp
    (KIP-734) and the first record stamped at or after a time, after the batch holding the
    answer is truncated away, the log reopened from disk, or records deleted before it."""
    fs, d = fs_and_dir
    log = UnifiedLog(fs, d, 256)  # small segments: the batches spread over several
    for ts, deltas in ((1000, [0, 4000, 2000]), (2000, [0, 0]), (9000, [0]), (3000, [0])):
        log.append(records.build_batch(log.end_offset, 1, [(None, b"x")] * len(deltas), ts,
                                       timestamp_deltas=deltas))
    log.flush()
    assert log.offset_of_max_timestamp() == (9000, 5, 1)
    assert log.offset_for_timestamp(2500, log.end_offset) == (5000, 1, 1)  # first by offset
    assert log.offset_for_timestamp(6000, log.end_offset) == (9000, 5, 1)
    assert log.offset_for_timestamp(9500, log.end_offset) is None
    reopened = UnifiedLog(fs, d, 256)
    assert reopened.offset_of_max_timestamp() == (9000, 5, 1)
    reopened.truncate_to(5)  # the batch stamped 9000 goes
    assert reopened.offset_of_max_timestamp() == (5000, 1, 1)
    assert reopened.offset_for_timestamp(6000, reopened.end_offset) is None
    reopened.delete_records_before(3)
    assert reopened.offset_of_max_timestamp() == (2000, 3, 1)
    assert reopened.offset_for_timestamp(1500, reopened.end_offset) == (2000, 3, 1)
    assert UnifiedLog(fs, d, 256).offset_of_max_timestamp() == (2000, 3, 1)
