"""The queue checkers on small histories that each hold one known anomaly: in process in CI
(test_queue_differential holds the two engines equal on every class, through Spark), and
through Spark as well in `make nightly`, where the two must agree."""
import pytest

from checkers.parquet import write_parquet
from conftest import NIGHTLY
from checkers.queue import ANOMALIES, CYCLES, check_queue

pytestmark = pytest.mark.spark


class H:
    """A tiny history builder: each call appends an invoke and its completion."""

    def __init__(self):
        self.rows = []

    def _op(self, process, type_, f, key, invoke_value, value):
        i = len(self.rows)
        self.rows.append({"index": i, "time": i, "process": process, "type": "invoke", "f": f,
                          "key": key, "value": invoke_value})
        self.rows.append({"index": i + 1, "time": i + 1, "process": process, "type": type_,
                          "f": f, "key": key, "value": value})
        return self

    def send(self, p, key, value, offset=None, type_="ok"):
        done = {"value": value, "offset": offset} if type_ == "ok" else {"value": value}
        return self._op(p, type_, "send", key, {"value": value}, done)

    def poll(self, p, msgs, f="poll"):
        return self._op(p, "ok", f, None, None, msgs)

    def txn(self, p, mops, type_="ok"):
        """A transaction: ``mops`` as they completed (``["send", k, [offset, v]]``,
        ``["poll", {k: [[offset, v], ...]}]``); its invocation as Jepsen writes it."""
        invoke = [["send", m[1], m[2][1]] if m[0] == "send" else ["poll"] for m in mops]
        return self._op(p, type_, "txn", None, invoke, mops)

    def assign(self, p):
        return self._op(p, "ok", "assign", None, None, ["k0", "k1"])

    def final(self, msgs):
        return self.poll(1000, msgs, f="final-poll")


def healthy():
    h = H().assign(0).assign(1)
    h.send(0, "k0", 1, 0).send(0, "k0", 2, 1).send(1, "k1", 3, 0)
    h.poll(1, {"k0": [[0, 1]], "k1": [[0, 3]]}).poll(1, {"k0": [[1, 2]]})
    return h


def run(spark, tmp_path, h, **kw):
    path = tmp_path / "h.parquet"
    write_parquet(h.rows, path)
    local = check_queue(None, str(path), engine="local", **kw)
    if NIGHTLY:
        remote = check_queue(spark, str(path), engine="spark", **kw)
        assert (remote["valid"], remote["anomalies"]) == (local["valid"], local["anomalies"])
    return local


def test_a_healthy_history_is_valid(spark_if_nightly, tmp_path):
    h = healthy().final({"k0": [[0, 1], [1, 2]], "k1": [[0, 3]]})
    r = run(spark_if_nightly, tmp_path, h)
    assert r["valid"] is True and r["anomalies"] == {}, r
    assert r["stats"]["sends"] == {"ok": 3, "fail": 0, "info": 0}


def test_without_final_polls_the_verdict_is_unknown(spark_if_nightly, tmp_path):
    r = run(spark_if_nightly, tmp_path, healthy())
    assert r["valid"] == "unknown" and r["anomalies"] == {}


FINAL = {"k0": [[0, 1], [1, 2]], "k1": [[0, 3]]}

# One scenario per anomaly, each on its own key (k), so one history holds them all.
SCENARIOS = {
    "inconsistent-offsets": lambda h, k: h.send(5, k, 1, 0).poll(6, {k: [[0, 9]]}),
    "duplicate": lambda h, k: h.send(5, k, 1, 0).poll(6, {k: [[0, 1], [1, 1]]}),
    "G1a": lambda h, k: h.send(5, k, 7, type_="fail").poll(6, {k: [[0, 7]]}),
    "lost-write": lambda h, k: h.send(5, k, 5, 0).send(5, k, 6, 1).poll(6, {k: [[1, 6]]}),
    "unseen": lambda h, k: h.send(5, k, 8, 0),
    "nonmonotonic-send": lambda h, k: h.send(5, k, 1, 1).send(5, k, 2, 0),
    "int-poll-skip": lambda h, k: h.send(5, k, 1, 0).send(5, k, 2, 1).send(5, k, 3, 2)
        .poll(6, {k: [[0, 1], [2, 3]]}),
    "int-nonmonotonic-poll": lambda h, k: h.send(5, k, 1, 0).send(5, k, 2, 1)
        .poll(6, {k: [[1, 2], [0, 1]]}),
    "poll-skip": lambda h, k: h.send(5, k, 1, 0).send(5, k, 2, 1).send(5, k, 3, 2)
        .poll(6, {k: [[0, 1]]}).poll(6, {k: [[2, 3]]}),
    "nonmonotonic-poll": lambda h, k: h.send(5, k, 1, 0).send(5, k, 2, 1)
        .poll(6, {k: [[0, 1], [1, 2]]}).poll(6, {k: [[1, 2]]}),
    "durability": lambda h, k: h.send(5, k, 1, 0).poll(6, {k: [[0, 1]]}),
    "int-send-skip": lambda h, k: h.txn(5, [["send", k, [0, 1]], ["send", k, [2, 3]]])
        .send(6, k, 2, 1).poll(7, {k: [[0, 1], [1, 2], [2, 3]]}),
    "int-nonmonotonic-send": lambda h, k: h.txn(5, [["send", k, [1, 1]], ["send", k, [0, 2]]])
        .poll(7, {k: [[0, 2], [1, 1]]}),
    "precommitted-read": lambda h, k: h.txn(5, [["send", k, [0, 1]], ["poll", {k: [[0, 1]]}]]),
}
PER_KEY = set(ANOMALIES) - set(CYCLES)  # cycles: tests/checkers/test_queue_cycles.py
NOT_IN_FINAL = {"lost-write", "unseen", "durability", "G1a"}


def test_each_anomaly_is_found_with_an_example(spark_if_nightly, tmp_path):
    """Every anomaly class planted on its own key; each found on exactly its key."""
    assert set(SCENARIOS) == PER_KEY
    h = healthy()
    final = {k: list(v) for k, v in FINAL.items()}
    for n, (anomaly, build) in enumerate(sorted(SCENARIOS.items())):
        key = f"a{n}"
        start = len(h.rows)
        build(h, key)
        final[key] = []
        if anomaly not in NOT_IN_FINAL:
            for r in h.rows[start:]:
                if r["f"] == "send" and r["type"] == "ok":
                    final[key].append([r["value"]["offset"], r["value"]["value"]])
                if r["f"] == "txn" and r["type"] == "ok":
                    final[key] += [m[2] for m in r["value"] if m[0] == "send"]
    h.final(final)
    r = run(spark_if_nightly, tmp_path, h)
    keys = {anomaly: f"a{n}" for n, anomaly in enumerate(sorted(SCENARIOS))}
    assert r["valid"] is False
    for anomaly in PER_KEY:
        found = r["anomalies"].get(anomaly)
        assert found is not None, f"{anomaly} not found: {r['anomalies'].keys()}"
        example_keys = {e["key"] for e in found["examples"]}
        assert keys[anomaly] in example_keys, (anomaly, found)
        assert anomaly in r["bad_anomalies"]
    # No anomaly leaks onto the healthy keys.
    for found in r["anomalies"].values():
        assert not {e["key"] for e in found["examples"]} & {"k0", "k1"}, found


def test_a_re_assign_restarts_the_poll_order(spark_if_nightly, tmp_path):
    h = healthy().poll(0, {"k0": [[0, 1], [1, 2]]}).assign(0).poll(0, {"k0": [[0, 1]]})
    h.final(FINAL)
    r = run(spark_if_nightly, tmp_path, h)
    assert "nonmonotonic-poll" not in r["anomalies"], r


def test_a_re_subscribe_restarts_the_poll_order_and_subscribers_allow_skips(spark_if_nightly, tmp_path):
    from checkers.queue import default_allowed
    back = healthy().poll(0, {"k0": [[0, 1], [1, 2]]})
    h = H()
    h.rows = [dict(r) for r in back.rows]
    h._op(0, "ok", "subscribe", None, None, ["k0", "k1"]).poll(0, {"k0": [[0, 1]]}).final(FINAL)
    assert "nonmonotonic-poll" not in run(spark_if_nightly, tmp_path, h)["anomalies"]
    back.poll(0, {"k0": [[0, 1]]}).final(FINAL)  # the same without the subscribe
    assert "nonmonotonic-poll" in run(spark_if_nightly, tmp_path, back)["anomalies"]
    always = ("int-send-skip", "G0", "G0-process", "G0-realtime")  # as Jepsen's
    assert default_allowed(True, "subscribe") == always + ("poll-skip", "nonmonotonic-poll")
    assert default_allowed(None) == always + ("duplicate",) and default_allowed(True) == always
    assert set(default_allowed(True, ww_deps=True)) - set(always) == {
        "G1c", "G1c-process", "G1c-realtime"}


def test_missing_from_the_final_read_is_a_durability_loss(spark_if_nightly, tmp_path):
    h = healthy().final({"k0": [[0, 1]], "k1": [[0, 3]]})
    r = run(spark_if_nightly, tmp_path, h)
    assert r["anomalies"]["durability"]["examples"][0]["value"] == 2


def test_allowed_anomalies_do_not_fail_the_run(spark_if_nightly, tmp_path):
    h = healthy().poll(0, {"k0": [[0, 1], [1, 2], [2, 1]]}).final(FINAL)
    r = run(spark_if_nightly, tmp_path, h, allowed=("duplicate",))
    assert "duplicate" in r["anomalies"] and r["valid"] is True
    assert set(ANOMALIES) >= set(r["anomalies"])
