"""The simulated cluster's machines (:class:`SimNode`), and machines that join and leave
it mid-run, as Docker's extra containers and SSH's spare hosts do for a real cluster.

``add_node`` brings a new machine: a broker under the next unused node id, with a disk of
its own formatted with a directory id drawn from a stream of its own (``{seed}-dir-{id}``)
and a clock from another (``{seed}-clocks-{id}``), so a seed's other draws are those it
made before; it starts at once and registers with the controllers as a new broker.
``retire`` takes a stopped node out of the cluster for good: nothing starts it again (no
fault's end, no restart at the end of the faults), and no fault picks it; its disk is kept,
as an operator keeps a decommissioned machine's.
"""
from __future__ import annotations

import random

from node_image.node import Node
from node_image.storage import format_storage, new_directory_id

from .clock import NodeClock
from .disk import SimDisk

CLUSTER_ID = "chaoskraft-sim"
LOG_DIR = "/data"


class SimNode:
    """One machine of the simulated cluster: its disk, clock, and the node process on it
    (None while down)."""

    def __init__(self, node_id: int, voter: bool) -> None:
        self.node_id = node_id
        self.voter = voter
        self.disk = SimDisk()
        self.node: Node | None = None
        self.incarnation = 0
        self.timer_at: int | None = None
        self.clock = NodeClock()
        self.durable_end_at_crash = 0
        self.wiped = False
        self.log_lines: list[str] = []
        self.paused = False  # stopped (SIGSTOP): what reaches it waits in ``held``
        self.held: list[tuple] = []
        self.timer_due = False  # its timer came while it was paused

    def local(self, t: int) -> int:
        return self.clock.local(t)

    def to_sim(self, local: int) -> int:
        return self.clock.to_sim(local)


def add_node(sim) -> int:
    """A new broker-only node, started; its node id."""
    i = max(sim.nodes) + 1
    sn = sim.nodes[i] = SimNode(i, False)
    sn.clock = NodeClock.draw(random.Random(f"{sim.seed}-clocks-{i}"),
                              sim.options.clock_drift_ppm)
    sim.dir_ids[i] = new_directory_id(random.Random(f"{sim.seed}-dir-{i}"))
    format_storage(sn.disk, LOG_DIR, CLUSTER_ID, i, sim.voters, sim.dir_ids[i],
                   kraft_version=sim.kraft_version)
    sim.trace(sim.now, "add-node", i)
    sim.stats["nodes_added"] = sim.stats.get("nodes_added", 0) + 1
    sim.start_node(sn)
    return i


def retire(sim, node: int) -> None:
    """The stopped ``node`` leaves the cluster for good."""
    assert sim.nodes[node].node is None, f"n{node} retired while running"
    sim.retired.add(node)
    sim.trace(sim.now, "retire", node)
    sim.stats["nodes_retired"] = sim.stats.get("nodes_retired", 0) + 1
