"""A recording backend and a campaign over it: what each fault package runs on which node
and the history rows it writes, without Docker (the tests in this folder share them)."""
import json

from harness.campaign import Campaign
from harness.config import RunConfig
from harness.history import HistoryWriter
from harness.backends import NodeControl, NodeInfo


CONTROLLER = 2


# partition 0 led by its preferred replica n3, ISR full; partition 1 by another, ISR short
INFOS = [(0, 3, [3, 4, 5], [3, 4, 5]), (1, 5, [4, 5, 1], [5, 1])]


class RecordingBackend(NodeControl):
    def __init__(self) -> None:
        self.nodes = [NodeInfo(i, f"n{i}", f"10.9.0.{i}", ("controller", "broker") if i <= 3
                               else ("broker",)) for i in range(1, 6)]
        self.calls: list[tuple[int, str]] = []

    def exec(self, node_id, cmd, check=True):
        text = " ".join(cmd)
        self.calls.append((node_id, text))
        if "netem" in text:
            return 1, "Error: Specified qdisc not found."
        if cmd[:2] == ["ck-ctl", "disk"]:
            return 0, json.dumps({"files": 2, "unsynced_bytes": 8192, "torn_bytes_kept": 0})
        if cmd[0] == "python3":  # corrupt_script
            return 0, json.dumps([{"file": "/d/queue-0/0.log", "size": 10, "flipped": [[1, 2]]}])
        return 0, ""


class RecordingCampaign(Campaign):
    def _acked_writes(self) -> int:  # clients that have every write acknowledged at once
        return self.history.index * 1000

    async def measure_clocks(self, nodes):
        return {n: 0.0 for n in nodes}

    async def active_controller(self):
        return CONTROLLER

    async def partition_leader(self, rng, partition=None):
        return 3

    def partition_infos(self, topic=None):
        return INFOS if topic is None else []


def campaign(tmp_path, packages, workload="queue"):
    backend = RecordingBackend()
    history = HistoryWriter(tmp_path / "history.jsonl")
    cfg = RunConfig(seed=7, workload=workload, nemesis=list(packages))
    return RecordingCampaign(cfg, backend, history, lambda m: None), backend, history


def rows(history, tmp_path):
    history.close()
    return [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
