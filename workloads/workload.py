"""The workload protocol, after Jepsen's Client and workload maps: everything a campaign
needs to know about one workload, in one object per workload (``workloads.registry``).

A campaign (``harness.campaign.Campaign``) knows no workload by name. It asks the
workload for

- its generator (``generator(cfg)``: pure and seeded; ``ops(process)`` yields the
  operations, each with ``f``, ``key`` and ``value``);
- its defaults (``defaults(values)``: the default fault packages and settings of a
  campaign that chose none), and how long its faults last;
- a ``WorkloadRun`` for one campaign (``open(campaign)``): set-up once the cluster
  serves, the clients for the time limit, the final phase after the heal, and what
  the faults aimed at the workload's data ask (a partition's leader);
- its checker (``check(run_dir, cfg, ...)``): the history of a stored run in, the
  checker's result and the history's stats out; ``detection`` says, for the
  planted-bug matrix, which anomaly classes made a stored run invalid and how
  many seconds into the workload the earliest anomalous operation came;
- the states its own plan aims at (``aims_at(cfg)``: coverage event -> why): a run that
  never reached one is ``unknown``, the way a scenario that missed its state is.
"""
from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Callable, Protocol

FINAL_PROCESS_BASE = 1000  # the final phase's processes are numbered from here


class Deadline:
    """When the clients stop: the campaign's time limit, stretched by how late its nemesis
    runs. A scenario that waits for the state it aims at (a new leader, a shrunk ISR) on a
    slow machine makes every later step late; the workload goes on for that much longer,
    so the planned steps play out with clients running, never past ``cap``.
    ``lateness()`` is the nemesis's (seconds behind its plan); read from any thread."""

    def __init__(self, at: float, cap: float | None = None,
                 lateness: Callable[[], float] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base = at
        self.cap = at if cap is None else max(at, cap)
        self.lateness = lateness or (lambda: 0.0)
        self._clock = clock

    def at(self) -> float:
        return min(self.cap, self.base + max(0.0, self.lateness()))

    def passed(self) -> bool:
        return self._clock() >= self.at()


class Campaign(Protocol):
    """What a workload may use of the campaign running it."""
    cfg: object  # harness.config.RunConfig
    backend: object  # nodes (id, address, roles), stop_node, start_node
    history: object  # record(process, type, f, key=None, value=None, node=None, error=None)
    ids: list[int]
    addr: dict[int, str]
    generator: object  # the workload's generator, the one generated.jsonl was written from

    def log(self, msg: str) -> None: ...


class WorkloadRun(Protocol):
    client_port: int  # the port the clients talk to (faults that refuse clients aim at it)

    async def setup(self) -> None: ...
    async def workers(self, deadline: Deadline) -> None: ...
    async def final_phase(self) -> None: ...
    async def liveness(self, bound_s: float) -> list[dict]: ...
    async def close(self) -> None: ...
    async def partition_leader(self, rng: random.Random,
                               partition: int | None = None) -> int | None: ...
    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]: ...
    def reassign(self, partition: int, replicas: list[int],
                 topic: str | None = None) -> str | None: ...
    def elect(self, partition: int) -> str | None: ...


class Workload(Protocol):
    name: str
    fault_duration_s: tuple[float, float]  # a fault lasts uniformly this long
    partitions: bool  # its data lives in topic partitions (the data-plane events can come)
    writes: tuple[str, ...]  # the fs of its operations whose acknowledgement a fault can undo

    def defaults(self, values: dict) -> None: ...
    def generator(self, cfg): ...
    def open(self, campaign: Campaign) -> WorkloadRun: ...
    def check(self, run_dir: Path, cfg: dict, *, engine: str, spark_master: str | None,
              budget_s: float, log) -> tuple[dict, dict]: ...
    def detection(self, run_dir: Path, results: dict) -> tuple[list[str], float | None]: ...
    def aims_at(self, cfg: dict) -> dict[str, str]: ...


class NoPartitions:
    """For a workload whose data has no partitions: faults aimed at a partition's leader
    pick their node at random."""

    async def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None:
        return None

    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]:
        return []

    def reassign(self, partition: int, replicas: list[int],
                 topic: str | None = None) -> str | None:
        raise ValueError("this workload's data has no partitions to reassign")

    def elect(self, partition: int) -> str | None:
        raise ValueError("this workload's data has no partitions to elect leaders of")


async def until_live(stuck_now, bound_s: float, poll_s: float = 1.0) -> list[dict]:
    """Ask ``stuck_now()`` (async: what is still stuck, ``[]`` when nothing is) every
    ``poll_s`` until nothing is stuck or ``bound_s`` has passed; what is stuck then, each
    with ``since_s``: how long it had been stuck when the bound ran out."""
    import asyncio
    start = time.monotonic()
    first: dict[str, float] = {}
    while True:
        stuck = await stuck_now()
        now = time.monotonic()
        for s in stuck:
            first.setdefault(s["what"], now)
        if not stuck or now - start >= bound_s:
            return [{**s, "since_s": round(now - first[s["what"]], 1)} for s in stuck]
        await asyncio.sleep(poll_s)

