"""The queue checker against the reference (checkers/queue/reference.py) on generated histories.

Sixty small random histories, each with its own keys and processes, hold
between them every anomaly class. The reference (Spark SQL over the JSON-text
history.parquet) checks them all at once, with every instance kept as an
example; the checker checks each alone, in process and through Spark. Counts
and the full sets of instances must be equal for every history and class.
"""
import json
import random
from collections import defaultdict

import pytest

from checkers.queue import history as queue_history
from conftest import NIGHTLY
from checkers.parquet import write_parquet
from checkers.queue import ANOMALIES, CYCLES, check_queue, default_allowed
from checkers.queue.reference import check_queue as reference
from checkers.queue.spark import check_spark, shared_scratch

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]  # one JVM
HISTORIES = 60 if NIGHTLY else 20  # CI's share of the nightly sweep
ALL = 1_000_000  # examples: every instance
# The classes the reference knows: those of single sends and polls (no transactions, no
# cycles; tests/checkers/test_queue_cycles.py has those).
REF = set(ANOMALIES) - set(CYCLES) - {"int-send-skip", "int-nonmonotonic-send",
                                      "precommitted-read"}


def generate(rng: random.Random, h: int, start: int) -> list[dict]:
    """One history: its keys are "h{h}k{n}", its processes h*10 + 0..4, final polls at the end."""
    rows: list[dict] = []
    keys = [f"h{h}k{n}" for n in range(rng.randint(1, 3))]
    procs = [h * 10 + p for p in range(rng.randint(2, 4))]
    logs: dict = {k: [] for k in keys}  # key -> [(offset, value)] as the broker holds it
    value = h * 100_000
    position: dict = {}

    def op(p, f, typ, key, inv, done):
        i = start + len(rows)
        rows.append({"index": i, "time": i, "process": p, "type": "invoke", "f": f, "key": key,
                     "value": inv})
        rows.append({"index": i + 1, "time": i + 1, "process": p, "type": typ, "f": f,
                     "key": key, "value": done})

    for p in procs:
        op(p, "assign", "ok", None, None, list(keys))
    for _ in range(rng.randint(5, 40)):
        p = rng.choice(procs)
        r = rng.random()
        if r < 0.45:  # a send
            key = rng.choice(keys)
            value += 1
            log = logs[key]
            off = (log[-1][0] + 1) if log else 0
            typ = rng.choices(["ok", "fail", "info"], [0.85, 0.08, 0.07])[0]
            fault = rng.random()
            if typ == "fail":
                if fault < 0.3:
                    log.append((off, value))  # G1a: a failed send that landed
                op(p, "send", "fail", key, {"value": value}, {"value": value})
                continue
            if fault < 0.06:
                off_acked = off  # lost: acknowledged, never in the log
            elif fault < 0.10 and log:
                log.append((off, value))
                log.append((off + 1, value))  # duplicate
                off_acked = off
            elif fault < 0.14 and log:
                off_acked = log[-1][0]  # the ack names an offset another value holds
                log.append((off, value))
            elif fault < 0.18:
                log.append((off + 2, value))  # a gap in the offsets
                off_acked = off + 2
            else:
                log.append((off, value))
                off_acked = off
            if typ == "info":
                op(p, "send", "info", key, {"value": value}, None)
            elif rng.random() < 0.05:
                op(p, "send", "ok", key, {"value": value}, {"value": value})  # no offset
            else:
                op(p, "send", "ok", key, {"value": value}, {"value": value, "offset": off_acked})
        elif r < 0.9:  # a poll of every key, from where this process is
            read = {}
            for key in keys:
                log = logs[key]
                pos = position.get((p, key), 0)
                jump = rng.random()
                if jump < 0.08:
                    pos += 1  # skip one
                elif jump < 0.14:
                    pos = max(0, pos - 2)  # go back
                msgs = [list(m) for m in log[pos:pos + rng.randint(0, 4)]]
                if len(msgs) > 2 and rng.random() < 0.1:
                    msgs[0], msgs[1] = msgs[1], msgs[0]  # out of order inside the poll
                if len(msgs) > 2 and rng.random() < 0.1:
                    del msgs[1]  # a hole inside the poll
                if msgs and rng.random() < 0.05:
                    msgs[-1] = [msgs[-1][0], value + 50_000]  # a value nobody sent
                position[(p, key)] = pos + len(msgs)
                if msgs:
                    read[key] = msgs
            op(p, "poll", rng.choices(["ok", "info"], [0.95, 0.05])[0], None, None, read)
        else:
            op(p, "assign", "ok", None, None, list(keys))
            position = {k: v for k, v in position.items() if k[0] != p}
    final = {}
    for key in keys:
        msgs = [list(m) for m in logs[key]]
        if msgs and rng.random() < 0.2:
            del msgs[rng.randrange(len(msgs))]  # lost after a restart
        final[key] = msgs
    op(h * 10 + 9, "final-poll", "ok", None, None, final)
    return rows


def _canon(examples: list[dict]) -> list[str]:
    out = []
    for e in examples:
        e = dict(e)
        if "process" in e:
            e["process"] = str(e["process"])
        out.append(json.dumps(e, sort_keys=True))
    return sorted(out)


def _by_history(result: dict) -> dict:
    """(history, anomaly) -> (count, canonical instances), from a result with every instance."""
    out: dict = defaultdict(lambda: [0, []])
    for name, a in result["anomalies"].items():
        assert a["count"] == len(a["examples"]), name
        for e in a["examples"]:
            h = int(str(e["key"]).split("k")[0][1:])
            out[(h, name)][0] += 1
            out[(h, name)][1].append(e)
    return {k: (n, _canon(ex)) for k, (n, ex) in out.items()}


def test_the_checker_equals_the_reference(spark, tmp_path):
    rng = random.Random(20261123)
    histories, rows = [], []
    for h in range(HISTORIES):
        one = generate(rng, h, len(rows))
        histories.append(one)
        rows.extend(one)
    write_parquet(rows, tmp_path / "all.parquet")
    ref = reference(spark, str(tmp_path / "all.parquet"), examples=ALL)
    want = _by_history(ref)
    assert {name for _, name in want} == REF, "the histories miss a class"
    for h, one in enumerate(histories):
        path = tmp_path / f"h{h}.parquet"
        write_parquet(one, path)
        local = check_queue(None, str(path), examples=ALL, engine="local")
        expected = {name: want[(h, name)] for (hh, name) in want if hh == h}
        got = {name: (a["count"], _canon(a["examples"])) for name, a in local["anomalies"].items()
               if name in REF}
        assert got == expected, f"history {h}"
    # The whole set at once, in process and through Spark, with the default examples.
    whole_local = check_queue(None, str(tmp_path / "all.parquet"), engine="local")
    assert shared_scratch(spark) == (True, None)  # local[2]: through the buckets
    whole_spark = check_queue(spark, str(tmp_path / "all.parquet"))
    whole_shuffle = check_spark(spark, str(tmp_path / "all.parquet"), shuffle=True)
    # (the reference's verdict, classes, counts and stats do not depend on its examples)
    for r in (whole_local, whole_spark, whole_shuffle):
        assert r["valid"] == ref["valid"]
        assert [a for a in r["bad_anomalies"] if a in REF] == ref["bad_anomalies"]
        assert {n: a["count"] for n, a in r["anomalies"].items() if n in REF} == \
            {n: a["count"] for n, a in ref["anomalies"].items()}
        assert r["stats"] == ref["stats"]
    assert whole_local["anomalies"] == whole_spark["anomalies"] == whole_shuffle["anomalies"]


def test_an_older_history_converts_to_the_typed_one(tmp_path):
    rows = generate(random.Random(3), 0, 0)
    rows.insert(3, {"index": 10_000, "time": 5, "process": "nemesis", "type": "info",
                    "f": "kill", "value": {"node": "n1"}})
    write_parquet(rows, tmp_path / "history.parquet")
    typed = queue_history.typed_path(tmp_path / "history.parquet")
    assert typed != tmp_path / "history.parquet" and queue_history.is_typed(typed)
    direct = tmp_path / "direct.parquet"
    queue_history.write(rows, direct)
    import pyarrow.parquet as pq
    assert pq.read_table(typed).equals(pq.read_table(direct))
    assert queue_history.key_names(typed).names == sorted({r["key"] for r in rows if r.get("key")},
                                                          key=[r.get("key") for r in rows].index)
    assert check_queue(None, str(tmp_path / "history.parquet"), engine="local") == \
        check_queue(None, str(direct), engine="local")


@pytest.mark.parametrize("row, message", [
    ({"f": "send", "type": "ok", "key": "k0", "value": "x"}, "a send's value must be"),
    ({"f": "send", "type": "ok", "key": "k0", "value": {"value": "v", "offset": "o"}},
     "value.offset must be an integer"),
    ({"f": "send", "type": "ok", "key": "k0", "value": {"value": -2**62, "offset": 1}},
     "value.value -4611686018427387904 is in the range"),
    ({"f": "poll", "type": "ok", "value": {"k0": [[0]]}}, "messages must be"),
    ({"f": "poll", "type": "ok", "value": [1]}, "must map keys"),
    ({"f": "send", "type": "ok", "key": [1], "value": {"value": 1}}, "must be a string or an"),
])
def test_a_bad_row_is_named(tmp_path, row, message):
    row = {"index": 7, "time": 7, "process": 1, **row, "_src": "h.jsonl:8"}
    with pytest.raises(queue_history.HistoryError, match=f"h.jsonl:8: .*{message}"):
        queue_history.write([row], tmp_path / "q.parquet")
    assert not list(tmp_path.iterdir())  # nothing half-written is left


def test_analyze_streams_a_queue_run_in_chunks(tmp_path, monkeypatch):
    import yaml

    from harness import analyze as an
    from workloads import queue_verdict
    monkeypatch.setattr(queue_verdict, "CHUNK", 50)  # many chunks, so their seams are crossed
    rows = []
    rng = random.Random(5)
    for h in range(6):
        rows.extend(generate(rng, h, len(rows)))
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "config.yaml").write_text(yaml.safe_dump({"workload": "queue"}))
    results = an._analyze(run, engine="auto", spark_master=None, budget_s=10, log=lambda m: None)
    write_parquet(rows, tmp_path / "whole.parquet")
    streamed = dict(results["checkers"]["queue"])
    assert streamed.pop("plots") and streamed.pop("pictures")  # drawn from the same file
    assert streamed == check_queue(None, str(tmp_path / "whole.parquet"),
                                   allowed=default_allowed(True), engine="local")
    assert results["stats"]["rows"] == len(rows)
    assert results["stats"]["ok"] == sum(r["type"] == "ok" for r in rows)
    # A bad row is named, and no half-written typed file is left behind.
    bad = dict(rows[-1], type="ok", f="send", value="oops", index=len(rows))
    with open(run / "history.jsonl", "a") as f:
        f.write(json.dumps(bad) + "\n")
    (run / "queue.parquet").unlink()
    with pytest.raises(queue_history.HistoryError, match=f"history row {len(rows)}: a send"):
        an._analyze(run, engine="auto", spark_master=None, budget_s=10, log=lambda m: None)
    assert not (run / "queue.parquet").exists() and not (run / "queue.parquet.tmp").exists()


def test_the_spark_interval_tag_equals_the_numpy_one(spark):
    """Spark's interval tags (a binary search in the JVM, so rows outside every interval
    never reach Python) agree with ``cycles.interval_of``: bounds, gaps, adjacent
    intervals, nulls and positions beyond 2**31."""
    import numpy as np

    from checkers.queue import cycles as qc
    from checkers.queue.spark import with_interval
    rng = random.Random(7)
    for base in (0, 3 << 40):
        spans = [(base + a, base + a + rng.randrange(4)) for a in range(0, 400, 5)]
        spans += [(base + 500, base + 503), (base + 504, base + 504)]  # adjacent
        lo, hi = qc.merge_spans(np.array([s[0] for s in spans]), np.array([s[1] for s in spans]))
        xs = [base + x for x in range(-3, 520)]
        df = spark.createDataFrame([(x,) for x in xs] + [(None,)], "x long")
        got = {r["x"]: r["iv"] for r in with_interval(df, "x", "iv", lo, hi).collect()}
        want = qc.interval_of(np.array(xs, np.int64), lo, hi).tolist()
        assert [got[x] for x in xs] == want and got[None] == -1
        assert set(want) >= {-1, 0, len(lo) - 1}
