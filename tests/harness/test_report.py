"""report.html from a run directory: verdict, anomalies linked to their operations, plots with
fault intervals shaded, clock offsets, node log lines around anomalies, tracebacks."""
import base64
import html
import io
import json
import re
from html.parser import HTMLParser

import pytest

from harness.report import FAULT_COLOURS, render

START_WALL = 1_790_000_000.0  # the run's time 0 on the wall clock


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def _log_line(t_s: float, msg: str) -> str:
    import datetime
    d = datetime.datetime.fromtimestamp(START_WALL + t_s, datetime.timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{int(d.microsecond / 1000):03d} INFO chaoskraft.node: {msg}"


def make_run(tmp_path):
    rows = []

    def row(t_s, process, type_, f, key=None, value=None):
        rows.append({"index": len(rows), "time": int(t_s * 1e9), "process": process,
                     "type": type_, "f": f, "key": key, "value": value, "node": None})
    faults = [(2, "start-partition", {"shape": "halves", "grudge": {}}), (4, "stop-partition", None),
              (5, "kill", {"target": "one", "nodes": [2]}), (7, "start", {"nodes": [2]}),
              (8, "pause", {"target": "one", "nodes": [3]}), (9, "resume", {"nodes": [3]}),
              (10, "clock-bump", {"target": "one", "nodes": [1], "offsets": {"1": 42.0},
                                  "measured": {"1": 41.99}}),
              (12, "clock-reset", {"nodes": [1], "measured": {"1": 0.0}}),
              (13, "start-packet-loss", {"target": "all", "nodes": [1, 2, 3], "probability": 0.3}),
              (15, "stop-packet-loss", {"nodes": [1, 2, 3]}),
              (16, "corrupt", {"target": "one", "nodes": [3], "mode": "bitflip"}),
              (18, "start", {"nodes": [3]})]
    t = 0.0
    lost_index = None
    for step in range(200):
        t = step * 0.1
        while faults and faults[0][0] <= t:
            _, f, v = faults.pop(0)
            row(t, "nemesis", "invoke", f, value=v)
            row(t, "nemesis", "info", f, value=v)
        p = step % 4
        row(t, p, "invoke", "send", "k0", {"value": step})
        if step == 50:
            lost_index = len(rows)
        row(t + 0.01 * (1 + step % 7), p, ["ok", "ok", "fail", "info"][step % 4], "send", "k0",
            {"value": step, "offset": step})
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "history-start.json").write_text(json.dumps({"wall_clock_s": START_WALL}))
    results = {"valid": False, "verdict": "invalid", "checkers": {"queue": {
        "valid": False, "bad_anomalies": ["lost-write"],
        "anomalies": {"lost-write": {"count": 1, "examples": [
            {"key": "k0", "value": 50, "offset": 50, "send_index": lost_index,
             "max_read_offset": 60}]}}}}}
    (tmp_path / "results.json").write_text(json.dumps(results))
    node = tmp_path / "nodes" / "n2"
    node.mkdir(parents=True)
    (node / "node.log").write_text("\n".join([
        _log_line(1.0, "long before"),
        _log_line(5.0, "queue-0: leader in epoch 3 at offset 49"),
        _log_line(5.2, "Task exception was never retrieved"),
        "Traceback (most recent call last):",
        '  File "/opt/chaoskraft/node_image/log.py", line 228, in append',
        "    raise ValueError(",
        "ValueError: append with epoch 0 below the log's latest epoch 1",
        _log_line(30.0, "long after"),
    ]) + "\n")
    return lost_index


@pytest.mark.parametrize("parquet", [False, True], ids=["jsonl", "parquet"])
def test_report_has_plots_anomalies_faults_logs_and_tracebacks(tmp_path, parquet):
    lost_index = make_run(tmp_path)
    if parquet:  # what an analysed run has: the report reads history.parquet first
        from checkers.history import read_history
        from checkers.parquet import write_parquet
        write_parquet(read_history(tmp_path / "history.jsonl"), tmp_path / "history.parquet")
    path = render(tmp_path)
    text = path.read_text()
    p = Elements()
    p.feed(text)
    imgs = {a.get("id"): a["src"] for t, a in p.found if t == "img"}
    assert set(imgs) == {f"plot-{n}" for n in ("latency", "quantiles", "throughput",
                                                "availability", "clock")}
    from PIL import Image
    latency = Image.open(io.BytesIO(base64.b64decode(imgs["plot-latency"].split(",", 1)[1])))
    assert latency.size[0] > 600
    # fault intervals are shaded: the partition colour (blended at alpha 0.18) is in the plot
    rgb = latency.convert("RGB")
    c = FAULT_COLOURS["partition"].lstrip("#")
    shade = tuple(round(255 * 0.82 + int(c[i:i + 2], 16) * 0.18) for i in (0, 2, 4))
    pixels = {px for _, px in rgb.getcolors(maxcolors=1 << 22)}
    assert any(all(abs(a - b) <= 3 for a, b in zip(px, shade)) for px in pixels), shade
    assert re.search(r"id='verdict'>Verdict: <b class='invalid'>invalid", text)
    assert "lost-write: 1" in text
    assert f"href='#op-{lost_index}'" in text and f"<tr id='op-{lost_index}'>" in text
    said = re.search(r"<p class='plain'>(.*?)</p>", text).group(1)
    assert re.fullmatch(rf"send of 50 acknowledged at offset 50 of k0 at \d+\.\d s \(op "
                        rf"{lost_index}\) was never read; polls read k0 up to offset 60", said), said
    assert "leader in epoch 3 at offset 49" in text, "node log lines around the anomaly"
    assert "long before" not in text and "long after" not in text
    assert "1 times on n2" in text and "ValueError: append with epoch 0" in text
    for kind in ("partition", "kill", "pause", "clock", "packet-loss", "corrupt"):
        assert f"<tr><td>{kind}</td>" in text, kind
    clock = json.loads(html.unescape(re.search(r"<pre id='clock'>(.*?)</pre>", text).group(1)))
    assert clock["1"][:3] == [[0.0, 0.0], [10.0, 41.99], [12.0, 0.0]], clock


def test_availability_counts_a_definite_no_as_answered():
    import pandas as pd

    from harness.report import operations
    rows = [  # (process, type, f, error): a cas refused on its expected value is an answer
        (0, "invoke", "cas", None), (0, "fail", "cas", "cas-mismatch"),
        (1, "invoke", "write", None), (1, "fail", "write", "NOT_CONTROLLER"),
        (2, "invoke", "read", None), (2, "ok", "read", None),
        (3, "invoke", "write", None), (3, "info", "write", "indeterminate: TimeoutError"),
    ]
    df = pd.DataFrame([{"index": i, "time": i * 1_000_000, "process": p, "type": t, "f": f,
                        "error": e} for i, (p, t, f, e) in enumerate(rows)])
    ops = operations(df).set_index("process")
    assert ops["answered"].to_dict() == {0: True, 1: False, 2: True, 3: False}


def test_every_queue_anomaly_example_is_said_in_one_sentence(tmp_path):
    """The queue checker's own examples of each class (one planted per key, as in
    test_queue_checker, and a poll that read a value sent after it completed: a cycle),
    each said in a sentence naming its key, values and operations."""
    from checkers.queue import history as queue_history
    from checkers.queue import ANOMALIES, check_local, cycle_proof
    from harness.report import plain
    from test_queue_checker import FINAL, NOT_IN_FINAL, SCENARIOS, healthy
    h = healthy()
    final = {k: list(v) for k, v in FINAL.items()}
    for n, (anomaly, build) in enumerate(sorted(SCENARIOS.items())):
        start = len(h.rows)
        build(h, f"a{n}")
        final[f"a{n}"] = [] if anomaly in NOT_IN_FINAL else [
            [r["value"]["offset"], r["value"]["value"]] for r in h.rows[start:]
            if r["f"] == "send" and r["type"] == "ok"] + [
            m[2] for r in h.rows[start:] if r["f"] == "txn" and r["type"] == "ok"
            for m in r["value"] if m[0] == "send"]
    h.poll(8, {"future": [[0, 77]]}).send(9, "future", 77, 0)
    final["future"] = [[0, 77]]
    h.final(final)
    queue_history.write(h.rows, tmp_path / "queue.parquet")
    result = check_local(tmp_path / "queue.parquet")
    rows = {r["index"]: r for r in h.rows}
    sends = {(r["key"], r["value"]["value"]): r["index"] for r in h.rows
             if r["f"] == "send" and r["type"] == "invoke"}
    assert set(result["anomalies"]) == set(SCENARIOS) | {"G1c-realtime"}
    for anomaly in ANOMALIES:
        if anomaly not in result["anomalies"]:
            continue
        ex = result["anomalies"][anomaly]["examples"][0]
        said = plain(anomaly, ex, {i: {**r, "time": r["time"] * 10 ** 9} for i, r in rows.items()},
                     sends)
        if "cycle" in ex:
            assert said and all(f"op {s['index']}" in said for s in ex["cycle"]), (ex, said)
            assert "77" in said and "future" in said, said
            proof = cycle_proof(ex)  # and proved as Elle proves a cycle
            assert proof.startswith("Let T1 = ") and proof.endswith(": a contradiction."), proof
            assert all(f"operation {s['index']}" in proof for s in ex["cycle"]), proof
            # G1a and G1c-realtime among the anomalies: not read committed, nor stronger
            assert result["consistency"]["not"] == ["read-committed"], result["consistency"]
            assert {"strong-read-committed", "strict-serializable"} <= set(
                result["consistency"]["also_not"]), result["consistency"]
            continue
        assert said and ex["key"] in said, (anomaly, ex, said)
        for field in ("value", "offset", "prev_offset", "first_offset", "send_index", "index",
                      "poll_index", "prev_index", "prev_value"):
            if isinstance(ex.get(field), int):
                shown = f"op {ex[field]}" if field.endswith("index") else str(ex[field])
                assert shown in said, (anomaly, field, ex, said)
    assert plain("linearizability (k0)", {"role": "stuck"}, {}) is None
