"""crash_mid_op: a queue client whose life ends while a send waits for its answer crashes
under it. The workload's part with a client that answers slowly, and the confluent-kafka
client's own give-up against a broker that never answers."""
import json
import time
from types import SimpleNamespace

import pytest

from harness.config import resolve
from workloads import queue_workload
from workloads.queue_client import CRASHED_MID_OP, ConfluentQueueClient, Result
from queue_runs import queue_run


class SlowClient:
    """Answers every send after ``answer_s``, or gives up when its life ends first."""

    def __init__(self, answer_s: float) -> None:
        self.answer_s = answer_s
        self.closed = False
        self.sent = 0

    def assign(self) -> Result:
        return Result("ok")

    def poll(self) -> Result:
        return Result("ok", {})

    def send(self, key, value, give_up_s=None) -> Result:
        if give_up_s is not None and give_up_s < self.answer_s:
            time.sleep(give_up_s)
            return Result("info", None, CRASHED_MID_OP)
        time.sleep(self.answer_s)
        self.sent += 1
        return Result("ok", self.sent)

    def close(self) -> None:
        self.closed = True


def _run(tmp_path, monkeypatch, client, life_s=3.0, **fields):
    cfg = resolve({"workload": "queue", "crash_clients": True, "rate": 50, "seed": 1, **fields},
                  {})
    monkeypatch.setattr(queue_workload, "make_client", lambda *a, **k: client)
    run, history = queue_run(tmp_path, cfg)
    deadline = SimpleNamespace(passed=lambda: False)
    crashed = run._client_life(0, 0, deadline, time.monotonic() + life_s)
    history.close()
    rows = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    return crashed, rows


def test_a_send_waiting_when_the_life_ends_is_info_and_the_client_crashes(tmp_path,
                                                                         monkeypatch):
    client = SlowClient(answer_s=60.0)
    crashed, rows = _run(tmp_path, monkeypatch, client, crash_mid_op=True)
    assert crashed and client.closed
    tail = [(r["type"], r["f"], r.get("error")) for r in rows[-4:]]
    assert tail == [("invoke", "send", None), ("info", "send", CRASHED_MID_OP),
                    ("invoke", "crash", None), ("info", "crash", None)], tail
    assert client.sent == 0, "its first send (60 s to answer) outlived its life (3 s)"


def test_without_crash_mid_op_the_client_crashes_between_operations(tmp_path, monkeypatch):
    client = SlowClient(answer_s=3.5)
    crashed, rows = _run(tmp_path, monkeypatch, client)
    assert crashed and client.closed
    assert not any(r.get("error") == CRASHED_MID_OP for r in rows)
    assert [(r["type"], r["f"]) for r in rows[-3:]] == [("ok", "send"), ("invoke", "crash"),
                                                         ("info", "crash")], rows[-3:]


@pytest.mark.parametrize("fields, words", [
    ({"crash_mid_op": True}, "set crash_clients: true"),
    ({"crash_clients": True, "crash_mid_op": True, "transactions": True},
     "between transactions only")])
def test_crash_mid_op_needs_crashing_clients_and_no_transactions(fields, words):
    from harness.config import CampaignError
    with pytest.raises(CampaignError, match=words):
        resolve({"workload": "queue", **fields}, {})


def test_a_real_producer_gives_up_when_its_life_ends_and_drops_the_send():
    """librdkafka with a broker that never answers (nothing listens there): the send gives
    up at its life's end, before the operation's own timeout (30 s), as info."""
    from local_cluster import free_port
    client = ConfluentQueueClient(f"127.0.0.1:{free_port()}", "t", 1, 30.0, True, 0)
    try:
        r = client.send("k0", 1, give_up_s=0.3)
    finally:
        client.close()
    assert r == Result("info", None, CRASHED_MID_OP), r
