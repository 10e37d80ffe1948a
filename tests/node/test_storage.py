"""format, meta.properties and quorum-state."""
import random

import pytest

from node_image.config import NodeConfig
from node_image.node import Node
from simulator.disk import SimDisk
from node_image.storage import (ElectionState, QuorumStateStore, ReplicaKey, StorageError,
                                format_storage)


def config(node_id=1):
    return NodeConfig(node_id=node_id, voters={1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}, log_dir="/data")


def test_node_refuses_an_unformatted_directory():
    with pytest.raises(StorageError, match="not formatted"):
        Node(config(), SimDisk(), random.Random(0), 0)


def test_node_refuses_a_directory_of_another_node():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 2, (ReplicaKey(1), ReplicaKey(2), ReplicaKey(3)), "dir")
    with pytest.raises(StorageError, match="formatted for node.id 2"):
        Node(config(1), disk, random.Random(0), 0)


def test_format_twice_is_refused():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 1, (ReplicaKey(1),), "dir")
    with pytest.raises(StorageError, match="already formatted"):
        format_storage(disk, "/data", "c", 1, (ReplicaKey(1),), "dir")


def test_voters_must_match_the_formatted_set():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 1, (ReplicaKey(1), ReplicaKey(2)), "dir")
    with pytest.raises(StorageError, match="formatted with voters"):
        Node(config(1), disk, random.Random(0), 0)


def test_quorum_state_is_durable_before_use():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 1, (ReplicaKey(1),), "dir")
    store = QuorumStateStore(disk, "/data/__cluster_metadata-0")
    store.write(ElectionState(7, None, ReplicaKey(2, "x"), (ReplicaKey(1),)))
    disk.crash(random.Random(0))
    assert store.read().epoch == 7
    assert store.read().voted_key == ReplicaKey(2, "x")


def test_unsynced_quorum_state_can_go_back_after_power_loss():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 1, (ReplicaKey(1),), "dir")
    store = QuorumStateStore(disk, "/data/__cluster_metadata-0", fsync=False)
    store.write(ElectionState(7, None, None, (ReplicaKey(1),)))
    disk.crash(random.Random(0))
    assert store.read().epoch == 0  # what the planted bug unsynced-quorum-state exploits


def test_garbage_quorum_state_is_a_clear_error():
    disk = SimDisk()
    format_storage(disk, "/data", "c", 1, (ReplicaKey(1),), "dir")
    disk.write("/data/__cluster_metadata-0/quorum-state", b"{not json")
    with pytest.raises(StorageError, match="not a valid quorum-state"):
        QuorumStateStore(disk, "/data/__cluster_metadata-0").read()


def test_power_loss_file_system_keeps_only_fsynced_data(tmp_path):
    from node_image.fs import PowerLossFileSystem
    from node_image.log import UnifiedLog
    path = str(tmp_path / "f")
    fs = PowerLossFileSystem()
    fs.append(path, b"abc")
    fs.fsync(path)
    fs.append(path, b"def")
    assert fs.read(path) == b"abcdef" and fs.size(path) == 6 and fs.read_at(path, 2, 3) == b"cde"
    fs.truncate(path, 1)
    fs.append(path, b"XY")
    assert fs.read(path) == b"aXY"
    # A killed process takes its memory with it: a new instance sees the disk.
    assert PowerLossFileSystem().read(path) == b"abc"
    fs.fsync(path)
    assert PowerLossFileSystem().read(path) == b"aXY"

    # A log written without a flush comes back empty after the "power loss".
    log_dir = str(tmp_path / "log")
    log = UnifiedLog(fs, log_dir, 1 << 20)
    from node_image import records
    log.append(records.build_batch(0, 0, [(None, b"v")], 1))
    log.append(records.build_batch(1, 0, [(None, b"w")], 1))
    log.flush()
    log.append(records.build_batch(2, 0, [(None, b"lost")], 1))
    assert log.end_offset == 3
    assert UnifiedLog(PowerLossFileSystem(), log_dir, 1 << 20).end_offset == 2


def test_a_disk_error_fails_the_log_dir_and_names_the_call_and_file(tmp_path, monkeypatch):
    """EIO, ENOSPC, EDQUOT, EROFS from the operating system are the log directory failing
    (Kafka's KafkaStorageException), raised as LogDirFailure, which no handler of lost
    connections (OSError) can swallow; a missing file stays FileNotFoundError."""
    import errno
    import os

    from node_image.fs import LogDirFailure, PowerLossFileSystem, RealFileSystem
    for fs in (RealFileSystem(), PowerLossFileSystem()):
        path = str(tmp_path / f"{type(fs).__name__}.log")
        fs.append(path, b"abc")

        def full(fd, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def eio(fd):
            raise OSError(errno.EIO, "Input/output error")
        with monkeypatch.context() as m:
            m.setattr(os, "write", full)
            with pytest.raises(LogDirFailure) as exc:
                fs.append(path, b"more")
                fs.fsync(path)  # the power-loss file system writes at fsync
        assert not isinstance(exc.value, OSError)
        assert (exc.value.path, exc.value.errno) == (path, errno.ENOSPC)
        assert str(exc.value).endswith(f"{path}: ENOSPC (No space left on device)")
        with monkeypatch.context() as m:
            m.setattr(os, "fsync", eio)
            with pytest.raises(LogDirFailure) as exc:
                fs.fsync(path)
        assert str(exc.value) == f"fsync {path}: EIO (Input/output error)"
        with pytest.raises(FileNotFoundError):
            fs.read(str(tmp_path / "missing"))
        fs.close()


def test_the_node_halts_on_a_failed_log_dir_and_says_so(monkeypatch, caplog):
    """A LogDirFailure reaching the event loop stops the node at once (exit 74), logged as
    the log directory failing, not as a bug and not as a lost peer."""
    import asyncio
    import errno
    import logging

    from node_image import runtime
    from node_image.fs import LogDirFailure
    exits = []
    monkeypatch.setattr(runtime.os, "_exit", lambda code: exits.append(code))
    monkeypatch.setattr(runtime.logging, "shutdown", lambda: None)
    rt = runtime.NodeRuntime.__new__(runtime.NodeRuntime)
    rt.config = type("C", (), {"log_dir": "/data"})()
    loop = asyncio.new_event_loop()
    failure = LogDirFailure("fsync", "/data/t-0/00000000000000000000.log",
                            OSError(errno.EIO, "Input/output error"))
    try:
        with caplog.at_level(logging.CRITICAL):
            rt._on_loop_error(loop, {"message": "Exception in callback", "exception": failure})
    finally:
        loop.close()
    assert exits == [runtime.EXIT_LOG_DIR_FAILED]
    msg = caplog.records[-1].getMessage()
    assert "the log directory /data failed" in msg and "fsync /data/t-0/" in msg and "EIO" in msg
