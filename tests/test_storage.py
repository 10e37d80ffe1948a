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
