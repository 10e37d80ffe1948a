"""zombie_producers in the Docker queue workload: a transactional client whose life ends
goes on beside its successor, which takes the slot's transactional id; once fenced it
closes, with no new producer (that would fence the successor) and no crash recorded. The
workload's part with clients that fence as a transaction coordinator does."""
import asyncio
import json
import threading
import time
from types import SimpleNamespace

import pytest

from harness.config import CampaignError, resolve
from workloads import queue_workload
from workloads.queue_client import Result
from queue_runs import queue_run


class Coordinator:
    """The newest client of a transactional id to begin a transaction (its InitProducerId)
    fences the others at their next transaction."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: list = []

    def make(self, *args, transactional_id=None, **kw):
        client = TxnClient(self, args[6], transactional_id)
        with self.lock:
            self.clients.append(client)
        return client


class TxnClient:
    def __init__(self, coordinator, process, transactional_id) -> None:
        self.coordinator, self.process = coordinator, process
        self.transactional_id, self.renew_on_fatal = transactional_id, True
        self.fenced = self.closed = self.began = False
        self.committed = 0

    def assign(self) -> Result:
        return Result("ok")

    def txn(self, mops, abort=False):
        with self.coordinator.lock:
            self.began = True
            newest = [c for c in self.coordinator.clients if c.began and
                      c.transactional_id == self.transactional_id][-1]
        if newest is not self:
            assert not self.renew_on_fatal, "a zombie never asks for a new producer"
            self.fenced = True
            return [Result("info", None, "fatal:PRODUCER_FENCED")] * len(mops)
        self.committed += 1
        return [Result("ok", 0) if m[0] == "send" else Result("ok", {}) for m in mops]

    def close(self) -> None:
        self.closed = True


def test_a_client_whose_life_ends_goes_on_as_a_zombie_until_its_successor_fences_it(
        tmp_path, monkeypatch):
    cfg = resolve({"workload": "queue", "crash_clients": True, "crash_client_interval_s": 0.5,
                   "transactions": True, "zombie_producers": True, "rate": 50, "seed": 1,
                   "concurrency": 2}, {})
    coordinator = Coordinator()
    monkeypatch.setattr(queue_workload, "make_client", coordinator.make)
    run, history = queue_run(tmp_path, cfg)
    end = time.monotonic() + 4.0
    deadline = SimpleNamespace(passed=lambda: time.monotonic() > end)
    asyncio.run(run.workers(deadline))
    history.close()
    rows = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert not any(r["f"] == "crash" for r in rows), "no crash recorded: the clients go on"
    clients = coordinator.clients
    assert run.zombies >= 2 and len(clients) == run.zombies + 2
    assert {c.transactional_id for c in clients} == {"chaoskraft-queue-slot-0",
                                                    "chaoskraft-queue-slot-1"}
    assert all(c.closed for c in clients), "every client closed, the zombies once fenced"
    fenced = [c for c in clients if c.fenced]
    assert fenced, "some zombie's transaction after its successor's start was refused"
    for z in fenced:  # it went on after its successor began, and stopped at its refusal
        successor = z.process + cfg.concurrency
        first_of_successor = next(i for i, r in enumerate(rows) if r["process"] == successor)
        last_of_zombie = max(i for i, r in enumerate(rows) if r["process"] == z.process)
        assert last_of_zombie > first_of_successor, z.process
        assert rows[last_of_zombie]["error"] == "fatal:PRODUCER_FENCED", rows[last_of_zombie]


@pytest.mark.parametrize("fields", [{"zombie_producers": True, "transactions": True},
                                    {"zombie_producers": True, "crash_clients": True}])
def test_zombies_need_crashing_transactional_clients(fields):
    with pytest.raises(CampaignError, match="set crash_clients: true and transactions: true"):
        resolve({"workload": "queue", **fields}, {})
