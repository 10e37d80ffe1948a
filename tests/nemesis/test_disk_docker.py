"""Disk faults from outside the node process, on a real Docker cluster whose data directories
are faultfs mounts: power loss that drops what was not fsynced, EIO, a full disk, slow fsyncs.
Each applied through the campaign's nemesis, its effect seen from outside the node, undone.

One 3-node cluster (all controllers) serves the module."""
import asyncio
import json
import time
import uuid

import pytest

from harness.backends import DATA_DIR
from fault_steps import campaign, module_cluster, rows
from workloads.nodes import describe_all
from nemesis.schedule import FaultStep

pytestmark = pytest.mark.docker

EXIT_LOG_DIR_FAILED = 74

# Writes ``synced`` bytes and fsyncs them, then ``unsynced`` more; prints the seconds the
# fsync took.
WRITE = r"""
import os, sys, time
path, synced, unsynced = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC)
os.write(fd, b"s" * synced)
t = time.monotonic()
os.fsync(fd)
took = time.monotonic() - t
os.write(fd, b"u" * unsynced)
os.close(fd)
print(took)
"""


@pytest.fixture(scope="module")
def cluster(docker_client, node_image):
    yield from module_cluster(node_image, "d", faultfs=True, seed=5)


def disk_status(cluster, node: int) -> dict:
    return json.loads(cluster.exec(node, ["ck-ctl", "disk", '{"cmd": "status"}'])[1])


def text(cluster, node: int, path: str) -> str:
    return cluster.exec(node, ["cat", path], check=False)[1]


def wait_for(what, predicate, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}"
        time.sleep(0.2)
    return value


async def answers(cluster, node: int) -> bool:
    return node in await describe_all([cluster.node(node)], 2.0, within_s=45)


def halted_on(cluster, node: int, since: int) -> str:
    """Wait until the node stopped with exit 74 (its supervisor's log past ``since`` says
    so); then its log."""
    status = f"node exited with status {EXIT_LOG_DIR_FAILED}"
    # it halts at its next write to the disk; a machine busy with other clusters can make
    # that (and reading the log through docker exec) slow
    wait_for(f"n{node} exits {EXIT_LOG_DIR_FAILED}",
             lambda: status in text(cluster, node, "/var/log/chaoskraft/supervisor.log")[since:],
             timeout_s=90)
    return text(cluster, node, "/var/log/chaoskraft/node.log")


def test_the_data_directory_is_a_faultfs_mount_the_node_runs_on(cluster):
    for n in (1, 2, 3):
        mounts = text(cluster, n, "/proc/mounts")
        assert f"faultfs {DATA_DIR} fuse" in mounts, mounts
        backing = cluster.exec(n, ["ls", "/var/lib/chaoskraft/backing"])[1].split()
        assert {"meta.properties", "__cluster_metadata-0"} <= set(backing), backing
        s = disk_status(cluster, n)
        assert s["fsyncs"] > 0 and s["injected_errors"] == 0, s  # the node's own fsyncs


def test_outside_power_loss_drops_what_was_not_fsynced(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, **{"power-loss": {"via": "fuse"}})

    async def scenario():
        # The target is drawn; every node gets a file half fsynced beside the node's data.
        probe = f"{DATA_DIR}/probe-{uuid.uuid4().hex[:6]}"
        for n in (1, 2, 3):
            cluster.exec(n, ["python3", "-c", WRITE, probe, "5000", "3000"])
            assert len(text(cluster, n, probe)) == 8000
        before = {n: d.committed_offset for n, d in (await describe_all(cluster.nodes, 2.0)).items()}
        stop = await c.start_fault(FaultStep(0, 0, "power-loss", "one", 5))
        [node] = rows(history, "power-loss")[0]["value"]["nodes"]
        dropped = rows(history, "drop-unsynced")[0]["value"]["dropped"][str(node)]
        assert dropped["unsynced_bytes"] >= 3000 and dropped["files"] >= 1, dropped
        assert json.loads(cluster.exec(node, ["ck-ctl", "status"])[1])["running"] is False
        assert text(cluster, node, probe) == "s" * 5000, "exactly the fsynced part is left"
        for other in {1, 2, 3} - {node}:
            assert len(text(cluster, other, probe)) == 8000, "other nodes keep their page cache"
        await stop()
        # it comes back on what it had fsynced, which is all it had acknowledged
        assert await answers(cluster, node)
        d = await _caught_up(cluster, node, before[node])
        assert d.log_end_offset >= before[node]
        cluster.exec(node, ["rm", "-f", probe])
    asyncio.run(scenario())


async def _caught_up(cluster, node, committed, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        d = (await describe_all([cluster.node(node)], 2.0)).get(node)
        if d is not None and d.committed_offset >= committed:
            return d
        assert time.monotonic() < deadline, f"n{node} not back to offset {committed}: {d}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("package, options, errno_name", [
    ("disk-error", {"ops": ["write", "fsync"]}, "EIO"),
    ("disk-full", {}, "ENOSPC"),
])
def test_a_failing_disk_halts_the_node_and_it_comes_back_after(cluster, tmp_path, package,
                                                              options, errno_name):
    """Its one log directory holds the metadata log: on a disk error the node stops at once
    (exit 74), as Kafka halts when its metadata log directory fails, and says why."""
    c, history = campaign(cluster, tmp_path, **{package: options})

    async def scenario():
        marks = {n: len(text(cluster, n, "/var/log/chaoskraft/supervisor.log")) for n in (1, 2, 3)}
        stop = await c.start_fault(FaultStep(0, 0, package, "one", 5))
        [node] = rows(history, f"start-{package}")[0]["value"]["nodes"]
        if package == "disk-full":
            _, out = cluster.exec(node, ["python3", "-c",
                                         f"import os; print(os.statvfs('{DATA_DIR}').f_bavail)"])
            assert int(out) == 0, "statfs shows the disk full"
        log = await asyncio.to_thread(halted_on, cluster, node, marks[node])
        assert f"the log directory {DATA_DIR} failed" in log and errno_name in log, log[-2000:]
        assert disk_status(cluster, node)["injected_errors"] > 0
        await stop()
        assert rows(history, f"stop-{package}")[0]["value"]["nodes"] == [node]
        assert disk_status(cluster, node)["by_name"] == {}
        assert await answers(cluster, node), "the node is back once its disk is"
    asyncio.run(scenario())


def test_slow_fsync_holds_each_fsync_and_the_node_stays_up(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, **{"slow-fsync": {"delay_ms": 400}})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "slow-fsync", "one", 5))
        [node] = rows(history, "start-slow-fsync")[0]["value"]["nodes"]
        probe = f"{DATA_DIR}/slow-{uuid.uuid4().hex[:6]}"
        _, took = cluster.exec(node, ["python3", "-c", WRITE, probe, "100", "0"])
        assert float(took) >= 0.4, took
        delayed = disk_status(cluster, node)["delayed_fsyncs"]
        assert delayed >= 1
        assert await answers(cluster, node), "a slow disk is not a dead one"
        await stop()
        after = disk_status(cluster, node)
        assert after["fsync_delay_ms"] == 0, after
        cluster.exec(node, ["python3", "-c", WRITE, probe, "100", "0"])
        assert disk_status(cluster, node)["delayed_fsyncs"] == after["delayed_fsyncs"], \
            "no fsync is held once the fault is lifted"
        cluster.exec(node, ["rm", "-f", probe])
    asyncio.run(scenario())
