"""A queue run of the workload's own code on a stand-in campaign (one node, a history file
under ``tmp_path``), for tests that swap its clients for fakes."""
from types import SimpleNamespace

from harness.backends import NodeInfo
from harness.history import HistoryWriter
from workloads import queue_workload
from workloads.queue import QueueGenerator


def queue_run(tmp_path, cfg) -> tuple[queue_workload.QueueRun, HistoryWriter]:
    history = HistoryWriter(tmp_path / "history.jsonl")
    camp = SimpleNamespace(cfg=cfg, history=history, log=lambda m: None, ids=[1],
                           generator=QueueGenerator(cfg.seed, 4),
                           backend=SimpleNamespace(nodes=[NodeInfo(1, "n1", "10.0.0.1",
                                                                   ("broker",))]))
    return queue_workload.QueueRun(camp), history
