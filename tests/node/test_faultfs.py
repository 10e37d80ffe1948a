"""faultfs without FUSE: its page cache against a model of what a file holds and what its disk
holds, and its fault rules and control requests. (Mounted in a node container, it is tested
in tests/nemesis/test_disk_docker.py.)"""
import errno
import os
import random

import pytest

from node_image.faultfs import _handle
from node_image.faultfs_state import PAGE, Faults, FaultState, UnsyncedFile


class Model:
    """A file as the node sees it (``logical``) and as its disk holds it (``disk``)."""

    def __init__(self, disk: bytes) -> None:
        self.disk = bytearray(disk)
        self.logical = bytearray(disk)

    def write(self, pos, data):
        if pos > len(self.logical):
            self.logical += bytes(pos - len(self.logical))
        self.logical[pos:pos + len(data)] = data

    def truncate(self, size):
        del self.logical[size:]
        self.logical += bytes(size - len(self.logical))

    def fsync(self):
        self.disk = bytearray(self.logical)

    def power_loss(self):
        self.logical = bytearray(self.disk)


@pytest.mark.parametrize("seed", range(40))
def test_page_cache_matches_the_model_through_writes_truncations_fsyncs_and_power_loss(
        tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "segment"
    start = bytes(rng.randrange(256) for _ in range(rng.randrange(3 * PAGE)))
    path.write_bytes(start)
    model = Model(start)
    fd = os.open(path, os.O_RDWR)
    f = UnsyncedFile(len(start))
    try:
        for _ in range(60):
            op = rng.choice(["append", "append", "write", "truncate", "fsync", "read",
                             "power-loss"])
            size = len(model.logical)
            if op == "append" or op == "write":
                pos = size if op == "append" else rng.randrange(size + PAGE)
                data = bytes(rng.randrange(256) for _ in range(rng.choice([1, 7, PAGE, 3 * PAGE + 5])))
                assert f.write(fd, pos, data) == len(data)
                model.write(pos, data)
            elif op == "truncate":
                n = rng.randrange(size + 2 * PAGE)
                f.truncate(n)
                model.truncate(n)
            elif op == "fsync":
                f.flush(fd)
                f = UnsyncedFile(os.fstat(fd).st_size)
                model.fsync()
                assert path.read_bytes() == model.disk
            elif op == "power-loss":
                f = UnsyncedFile(os.fstat(fd).st_size)
                model.power_loss()
            else:
                pos, n = rng.randrange(size + 10), rng.randrange(3 * PAGE)
                assert f.read(fd, pos, n) == bytes(model.logical[pos:pos + n]), (seed, pos, n)
            assert f.size == len(model.logical)
            assert f.read(fd, 0, f.size + 1) == bytes(model.logical), (seed, op)
            assert path.read_bytes() == model.disk, "the disk changes only at fsync"
    finally:
        os.close(fd)


def test_a_torn_power_loss_keeps_a_prefix_of_the_unsynced_pages(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    state = FaultState(str(tmp_path))
    state.files[1] = f = UnsyncedFile(0)
    f.write(fd, 0, b"a" * PAGE + b"b" * PAGE + b"c" * 10)
    os.close(fd)
    kept = []
    for seed in range(20):
        path.write_bytes(b"")
        state.files[1] = f
        out = state.drop_unsynced({1: str(path)}, torn=True, rng=random.Random(seed))
        disk = path.read_bytes()
        assert (b"a" * PAGE + b"b" * PAGE + b"c" * 10).startswith(disk.rstrip(b"\0")) or not disk
        assert out["files"] == 1 and not state.files
        kept.append(len(disk))
    assert set(kept) == {0, PAGE, 2 * PAGE, 2 * PAGE + 10}, "every prefix, none past the data"
    state.files[1] = f
    path.write_bytes(b"")
    assert state.drop_unsynced({1: str(path)}, torn=False, rng=random.Random(0))["torn_bytes_kept"] == 0
    assert path.read_bytes() == b""


def test_fault_rules_match_files_and_calls():
    faults = Faults.parse({"cmd": "set", "errors": [
        {"ops": ["read"], "path": "__cluster_metadata-0/*", "errno": "EIO"},
        {"ops": ["fsync"], "path": "*.log", "errno": "EROFS"}]})
    assert faults.error_for("read", "__cluster_metadata-0/00000000000000000000.log") == errno.EIO
    assert faults.error_for("write", "__cluster_metadata-0/00000000000000000000.log") is None
    assert faults.error_for("fsync", "queue-0/00000000000000000000.log") == errno.EROFS
    assert faults.error_for("fsync", "queue-0/leader-epoch-checkpoint") is None
    full = Faults.parse({"full": True})
    assert [full.error_for(op, "x") for op in ("read", "write", "create", "fsync")] == \
        [None, errno.ENOSPC, errno.ENOSPC, errno.ENOSPC]


@pytest.mark.parametrize("request_, message", [
    ({"cmd": "set", "bogus": 1}, "unknown field(s) ['bogus']"),
    ({"cmd": "set", "errors": [{"ops": ["rd"]}]}, "errors[0].ops: ['rd']"),
    ({"cmd": "set", "errors": [{"errno": "ENOPE"}]}, "errors[0].errno: 'ENOPE'"),
    ({"cmd": "set", "errors": {"ops": ["read"]}}, "errors: {'ops': ['read']} is not a list"),
    ({"cmd": "set", "fsync_delay_ms": -1}, "fsync_delay_ms: -1"),
    ({"cmd": "set", "full": "yes"}, "full: 'yes'"),
    ({"cmd": "format"}, "cmd: 'format' is not one of"),
    ({"cmd": "set", "name": 3}, "name: 3 is not a string"),
])
def test_a_bad_control_request_is_refused_naming_its_field(tmp_path, request_, message):
    state = FaultState(str(tmp_path))
    with pytest.raises(ValueError) as exc:
        _handle(request_, state, None, random.Random(0))
    assert message in str(exc.value)
    assert state.faults == Faults() and not state.named, "nothing changed"


def test_faults_of_several_packages_hold_together_and_each_clears_its_own(tmp_path):
    state = FaultState(str(tmp_path))
    rng = random.Random(0)
    _handle({"cmd": "set", "name": "disk-error", "errors": [{"ops": ["read"]}]}, state, None, rng)
    _handle({"cmd": "set", "name": "slow-fsync", "fsync_delay_ms": 200}, state, None, rng)
    _handle({"cmd": "set", "name": "disk-full", "full": True}, state, None, rng)
    assert state.faults.fsync_delay_ms == 200 and state.faults.full
    assert state.faults.error_for("read", "a") == errno.EIO
    _handle({"cmd": "clear", "name": "disk-full"}, state, None, rng)
    assert not state.faults.full and state.faults.error_for("read", "a") == errno.EIO
    out = _handle({"cmd": "status"}, state, None, rng)
    assert set(out["by_name"]) == {"disk-error", "slow-fsync"}
    _handle({"cmd": "clear"}, state, None, rng)
    assert state.faults == Faults() and not state.named


def test_a_clean_shutdown_writes_every_unsynced_file_to_the_disk(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"old")
    fd = os.open(path, os.O_RDWR)
    state = FaultState(str(tmp_path))
    state.files[1] = f = UnsyncedFile(3)
    f.truncate(1)
    f.write(fd, 1, b"new")
    os.close(fd)
    state.files[2] = UnsyncedFile(0)  # forgotten by the kernel, no path: said, not lost silently
    assert state.sync_all({1: str(path)}) == {"files": 1, "without_a_path": 1}
    assert path.read_bytes() == b"onew" and list(state.files) == [2]
