"""Cluster backends: one protocol, several ways to reach the nodes.

A backend knows the nodes (id, name, address, roles) and can, per node: run a
command, control the node process through the container's supervisor
(``ck-ctl kill|start|stop|pause|resume|status``), copy files in and out, and
collect logs. The nemesis and the runner use nothing else, so they work the
same over the Docker API and over SSH.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class NodeInfo:
    node_id: int
    name: str
    address: str  # IP address on the cluster network, reachable from the harness
    roles: tuple[str, ...]
    # the host controller.quorum.voters names it by, where not its address (Docker: the
    # container's name): an AddRaftVoter gives the node's own endpoint, as Kafka's tool
    voter_host: str = ""

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles


class BackendError(RuntimeError):
    """A command on a node failed; the message names the node and the command."""


class NoMachine(BackendError):
    """``add_node`` has no machine to add (an SSH hosts file naming no spare host left)."""


class ClusterBackend(Protocol):
    nodes: list[NodeInfo]

    def exec(self, node_id: int, cmd: list[str], check: bool = True) -> tuple[int, str]: ...
    def put_file(self, node_id: int, path: str, data: bytes) -> None: ...
    def get_file(self, node_id: int, path: str) -> bytes: ...


DATA_DIR = "/var/lib/chaoskraft/data"  # the node's log.dirs in the image
JOURNAL = "/var/log/chaoskraft/rpc.jsonl"  # the node's message journal (node_image.rpc_journal)
SUPERVISOR_LOG = "/var/log/chaoskraft/supervisor.log"
# the node's exit status when it refuses a setting or its data directory (node_image.__main__)
REFUSED_EXIT = 2
NODE_LOGS = ("/var/log/chaoskraft/node.log", SUPERVISOR_LOG,
             "/var/log/chaoskraft/faultfs.log",  # only where the disk packages run
             JOURNAL + ".1", JOURNAL)


class NodeControl:
    """What every backend offers on top of ``exec``: the supervisor's commands."""

    def ctl(self, node_id: int, command: str) -> str:
        return self.exec(node_id, ["ck-ctl", command])[1]

    def kill_node(self, node_id: int) -> None:
        self.ctl(node_id, "kill")

    def start_node(self, node_id: int) -> None:
        self.ctl(node_id, "start")

    def stop_node(self, node_id: int) -> None:
        self.ctl(node_id, "stop")

    def pause_node(self, node_id: int) -> None:
        self.ctl(node_id, "pause")

    def resume_node(self, node_id: int) -> None:
        self.ctl(node_id, "resume")

    def node_status(self, node_id: int) -> dict:
        return json.loads(self.ctl(node_id, "status"))

    def refusing_nodes(self) -> dict[int, str]:
        """The nodes whose process has ended refusing its settings or its data directory
        (the supervisor starts it again, and it ends the same way): node -> what."""
        out = {}
        for n in self.nodes:
            try:
                text = self.get_file(n.node_id, SUPERVISOR_LOG).decode(errors="replace")
            except (BackendError, FileNotFoundError, OSError):
                continue
            if f"node exited with status {REFUSED_EXIT}\n" in text:
                out[n.node_id] = (f"the node exited with status {REFUSED_EXIT}: it refuses "
                                  "its settings or its data directory")
        return out

    def node(self, node_id: int) -> NodeInfo:
        return next(n for n in self.nodes if n.node_id == node_id)

    def collect_logs(self, dest: Path) -> None:
        for n in self.nodes:
            d = dest / f"n{n.node_id}"
            d.mkdir(parents=True, exist_ok=True)
            for path in NODE_LOGS:
                try:
                    (d / Path(path).name).write_bytes(self.get_file(n.node_id, path))
                except (BackendError, FileNotFoundError, OSError):
                    pass


def log_ends(logs: Path, nodes: list[int]) -> list[str]:
    """What each of ``nodes`` last said, from the logs ``collect_logs`` wrote under ``logs``:
    per node a heading line and its node log's last three distinct lines (a node that exits
    on a bad setting says why there)."""
    out = []
    for i in nodes:
        log = logs / f"n{i}" / "node.log"
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if line.strip()] if log.exists() else []
        last = lines[-20:]
        tail = [line for k, line in enumerate(last) if line not in last[k + 1:]][-3:]
        out += [f"  n{i}: its log {log} ends:" if tail else f"  n{i}: no node log at {log}",
                *(f"    {line}" for line in tail)]
    return out
