"""Questions the harness asks the nodes themselves (DescribeQuorum and a register read on
the node's admin port): who leads, which nodes answer, how far each node's clock is off."""
from __future__ import annotations

import asyncio
import time

from workloads.register_client import Indeterminate, RegisterClient

PORT = 9093


async def _ask_all(nodes, ask, within_s: float) -> dict:
    """``ask(node)`` of every node, asking those that did not answer (``None``) again until
    ``within_s`` has passed: on a loaded 2-core machine a node has left a 1 s and a 3 s query
    unanswered while it served."""
    seen: dict = {}
    deadline = time.monotonic() + within_s
    while True:
        asked = [n for n in nodes if n.node_id not in seen]
        seen.update((n.node_id, a) for n, a in zip(asked, await asyncio.gather(*map(ask, asked)))
                    if a is not None)
        if len(seen) == len(nodes) or time.monotonic() >= deadline:
            return seen
        await asyncio.sleep(0.2)


async def describe_all(nodes, timeout_s: float = 1.0, within_s: float = 0.0) -> dict:
    """Each answering node's DescribeQuorum, by node id."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            return await c.describe()
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def clock_offsets(nodes, timeout_s: float = 3.0, within_s: float = 0.0) -> dict[int, float]:
    """Each answering node's wall clock minus ours, in seconds (from its DescribeQuorum); the
    error is at most half the round trip, however long the node took to answer (on a loaded
    machine 1 s was too short for a node to answer at all). With ``within_s``, the nodes that
    did not answer are asked again until that much time has passed."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            before = time.time()
            d = await c.describe()
            after = time.time()
            return round(d.wall_clock_ms / 1000 - (before + after) / 2, 3)
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def active_controller(nodes) -> int | None:
    described = await describe_all(nodes)
    leaders = [(d.epoch, i) for i, d in described.items() if d.role == "Leader"]
    if leaders:
        return max(leaders)[1]
    hints = [(d.epoch, d.leader_id) for d in described.values() if d.leader_id >= 0]
    return max(hints)[1] if hints else None


async def serves(addr: str, port: int = PORT) -> bool:
    """Does the node at ``addr`` answer a register read?"""
    c = RegisterClient(addr, port, 2.0)
    try:
        return (await c.read("__probe__")).outcome == "ok"
    except (Indeterminate, ConnectionRefusedError, OSError):
        return False
    finally:
        await c.close()


async def wait_for_service(nodes, timeout_s: float, log) -> int:
    """Wait until some node accepts a register read; returns the active controller."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = await active_controller(nodes)
        if leader is not None and await serves(next(n.address for n in nodes
                                                    if n.node_id == leader)):
            return leader
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the cluster did not serve register reads within {timeout_s:.0f} s")


async def wait_for_every_node(nodes, timeout_s: float, port: int = PORT) -> None:
    """Wait until every node answers a register read (a broker by forwarding it), so that the
    workload starts on a cluster whose nodes all serve: refusals at the start would be set-up,
    not the faults under test."""
    deadline = time.monotonic() + timeout_s

    async def one(node) -> bool:
        while time.monotonic() < deadline:
            if await serves(node.address, port):
                return True
            await asyncio.sleep(0.2)
        return False
    served = await asyncio.gather(*(one(n) for n in nodes))
    missing = [n.node_id for n, ok in zip(nodes, served) if not ok]
    if missing:
        raise TimeoutError(f"nodes {missing} did not serve register reads within {timeout_s:.0f} s")
