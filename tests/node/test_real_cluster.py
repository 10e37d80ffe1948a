"""Three real node processes on 127.0.0.1-3: election, commits, SIGKILL of the leader, catch-up."""
import asyncio
import time

import pytest

from local_cluster import LocalCluster
from workloads.register_client import Indeterminate


@pytest.fixture
def cluster(tmp_path):
    c = LocalCluster(tmp_path, nodes=3)
    c.start_all()
    try:
        yield c
    finally:
        c.close()


async def write_keys(cluster, leader, prefix, n):
    """Write n keys on the leader; returns {key: value} of the acknowledged ones."""
    acked = {}
    client = cluster.client(leader)
    try:
        for i in range(n):
            key = f"{prefix}{i}"
            try:
                r = await client.write(key, i)
            except Indeterminate:
                continue
            if r.outcome == "ok":
                acked[key] = i
    finally:
        await client.close()
    return acked


async def wait_caught_up(cluster, node, target, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        d = (await cluster.describe_all()).get(node)
        if d is not None and d.committed_offset >= target:
            return d
        await asyncio.sleep(0.1)
    raise AssertionError(f"node {node} did not catch up to offset {target}")


def test_leader_kill_loses_no_acknowledged_write_and_restarted_node_catches_up(cluster):
    async def scenario():
        leader = await cluster.wait_for_leader()
        acked = await write_keys(cluster, leader, "before-", 50)
        assert len(acked) == 50, "a healthy cluster acknowledges every write"

        cluster.kill(leader)  # SIGKILL: no flush, no resignation
        killed_at = time.monotonic()
        new_leader = await cluster.wait_for_leader(exclude={leader})
        print(f"new leader {new_leader} after {time.monotonic() - killed_at:.2f} s")
        acked.update(await write_keys(cluster, new_leader, "after-", 50))

        client = cluster.client(new_leader)
        try:
            for key, value in acked.items():
                r = await client.read(key)
                assert (r.outcome, r.value) == ("ok", value), f"acknowledged write {key}={value} lost"
        finally:
            await client.close()

        cluster.start(leader)
        leader_state = (await cluster.describe_all())[new_leader]
        d = await wait_caught_up(cluster, leader, leader_state.high_watermark)
        assert d.log_end_offset >= leader_state.high_watermark
        assert d.leader_id == new_leader and d.epoch == leader_state.epoch
        # the restarted node serves the same committed data: its committed state has every key
        assert d.committed_offset >= leader_state.high_watermark
    asyncio.run(scenario())


def test_garbage_on_the_listener_closes_that_connection_only(cluster):
    async def scenario():
        leader = await cluster.wait_for_leader()
        for junk in (b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01\xc1", b"\x00\x00"):
            reader, writer = await asyncio.open_connection(cluster.host(leader), cluster.port)
            writer.write(junk)
            await writer.drain()
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, no reply
            writer.close()
        client = cluster.client(leader)
        try:
            assert (await client.write("still", 1)).outcome == "ok"
        finally:
            await client.close()
        assert "closing connection" in cluster.log_path(leader).read_text()
    asyncio.run(scenario())


def test_the_workload_waits_for_every_node_to_serve(tmp_path):
    from types import SimpleNamespace

    from workloads.nodes import wait_for_every_node
    c = LocalCluster(tmp_path, nodes=3)
    nodes = [SimpleNamespace(node_id=i, address=c.host(i)) for i in c.ids]
    try:
        c.start(1)
        c.start(2)
        asyncio.run(c.wait_for_leader())
        with pytest.raises(TimeoutError, match=r"nodes \[3\] did not serve register reads"):
            asyncio.run(wait_for_every_node(nodes, 3, c.port))
        c.start(3)
        asyncio.run(wait_for_every_node(nodes, 60, c.port))  # returns once node 3 serves
    finally:
        c.close()


def test_an_uncaught_bug_stops_the_node_loudly_and_a_lost_peer_does_not(monkeypatch, caplog):
    """An exception a connection task or timer did not catch is a bug of the node: it logs it
    with its traceback and exits (70) at once; a peer that went away (OSError) is only logged."""
    import asyncio
    import logging

    from node_image import runtime
    exits = []
    monkeypatch.setattr(runtime.os, "_exit", lambda code: exits.append(code))
    monkeypatch.setattr(runtime.logging, "shutdown", lambda: None)
    rt = runtime.NodeRuntime.__new__(runtime.NodeRuntime)
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.ERROR):
            rt._on_loop_error(loop, {"message": "Task exception was never retrieved",
                                     "exception": ConnectionResetError("peer reset")})
            assert exits == []
            try:
                raise AssertionError("ISR without the leader")
            except AssertionError as exc:
                rt._on_loop_error(loop, {"message": "Task exception was never retrieved",
                                         "exception": exc})
    finally:
        loop.close()
    assert exits == [runtime.EXIT_BUG]
    bug = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert bug and "a bug in the node" in bug[0].getMessage() and bug[0].exc_info
    assert "ISR without the leader" in bug[0].getMessage()
