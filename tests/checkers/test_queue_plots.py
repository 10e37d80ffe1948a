"""Jepsen's Kafka plots as data (checkers/queue/plots.py) and as the report draws them:
unseen messages and realtime lag over time, and a key's log as every operation saw it."""
import json
import re

from checkers.queue import history as queue_history, plots as queue_plots


def history(tmp_path):
    """k0: sends of 1 (ack at 1 s) and 2 (ack at 2 s); process 5 assigns, then polls at 3-4 s
    reading only 1, then at 6-7 s reading 2; a send of 3 acknowledged at 5 s is never read;
    and a read of 9 at offset 0 by process 6 (an inconsistent offset)."""
    rows = []

    def op(p, t0, t1, f, invoke, done, key=None):
        for t, typ, v in ((t0, "invoke", invoke), (t1, "ok", done)):
            rows.append({"index": len(rows), "time": int(t * 1e9), "process": p, "type": typ,
                         "f": f, "key": key, "value": v})
    op(5, 0.1, 0.2, "assign", None, ["k0"])
    op(1, 0.5, 1.0, "send", {"value": 1}, {"value": 1, "offset": 0}, "k0")
    op(1, 1.5, 2.0, "send", {"value": 2}, {"value": 2, "offset": 1}, "k0")
    op(5, 3.0, 4.0, "poll", None, {"k0": [[0, 1]]})
    op(1, 4.5, 5.0, "send", {"value": 3}, {"value": 3, "offset": 2}, "k0")
    op(5, 6.0, 7.0, "poll", None, {"k0": [[1, 2]]})
    op(6, 6.5, 7.5, "poll", None, {"k0": [[0, 9]]})
    path = tmp_path / "q.parquet"
    queue_history.write(rows, path)
    return queue_history.read_table(path), queue_history.key_names(path).names


def test_unseen_counts_acknowledged_sends_not_yet_read(tmp_path):
    t, names = history(tmp_path)
    plots = {p["name"]: p for p in queue_plots.series(t, names)}
    unseen = plots["unseen"]["series"]["k0"]
    # +1 at 1 s, +1 at 2 s, -1 at 4 s (1 read), +1 at 5 s (3), -1 at 7 s (2 read); 3 stays.
    assert unseen == [[1.0, 1.0], [2.0, 2.0], [4.0, 1.0], [5.0, 2.0], [7.0, 1.0]]


def test_realtime_lag_is_time_since_the_position_stopped_being_the_end(tmp_path):
    t, names = history(tmp_path)
    lag = {p["name"]: p for p in queue_plots.series(t, names)}["realtime-lag"]["series"]["k0"]
    # Process 5's first poll (invoked at 3 s) starts from offset 0, known since 1 s: lag 2 s.
    # Its second (6 s) starts from offset 1, known since 2 s: lag 4 s. Process 6 never
    # assigned: its poll starts from offset 0 too (lag 6.5 - 1).
    assert lag == [[3.0, 2.0], [6.0, 4.0], [6.5, 5.5]]


def test_a_keys_log_marks_what_jepsen_colours(tmp_path):
    t, names = history(tmp_path)
    pic = queue_plots.key_log(t, names.index("k0"))
    assert pic["offsets"] == [0, 1, 2]
    cells = {(r["index"], c[0], c[1], c[2]): c[3] for r in pic["rows"] for c in r["cells"]}
    assert cells[(3, 0, 1, "w")] == cells[(7, 0, 1, "r")] == cells[(13, 0, 9, "r")] == "inconsistent"
    assert cells[(9, 2, 3, "w")] == "unread" and cells[(5, 1, 2, "w")] == ""


def test_the_report_draws_a_checkers_plots_and_key_logs(tmp_path):
    from harness.report import render
    t, names = history(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    rows = [queue_history.untyped_row(r, queue_history.KeyNames(names))
            for r in t.to_pylist()]
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    q = {"valid": False, "bad_anomalies": ["inconsistent-offsets"],
         "anomalies": {"inconsistent-offsets": {"count": 1, "examples": [
             {"key": "k0", "offset": 0, "values": [1, 9]}]}},
         "plots": queue_plots.series(t, names),
         "pictures": {"k0": queue_plots.key_log(t, names.index("k0"))}}
    (run / "results.json").write_text(json.dumps({"valid": False, "verdict": "invalid",
                                                  "checkers": {"queue": q}}))
    text = render(run).read_text()
    assert "id='plot-unseen'" in text and "id='plot-realtime-lag'" in text
    svg = re.search(r"<svg class='key-log' data-key='k0'.*?</svg>", text, re.S).group(0)
    assert svg.count("<g class='op'") == 6 and "r9</text>" in svg and "w3</text>" in svg
    assert svg.count("class='inconsistent'") == 3 and svg.count("class='unread'") == 1
    assert '"plots"' not in text, "the series are drawn, not dumped in the checkers table"


def test_a_transaction_reading_its_own_send_and_reads_of_failed_sends(tmp_path):
    rows = [
        {"index": 0, "time": 1, "process": 1, "type": "invoke", "f": "txn",
         "value": [["send", "k0", 5], ["poll"]]},
        {"index": 1, "time": 2, "process": 1, "type": "ok", "f": "txn",
         "value": [["send", "k0", [0, 5]], ["poll", {"k0": [[0, 5]]}]]},
        {"index": 2, "time": 3, "process": 2, "type": "invoke", "f": "send", "key": "k0",
         "value": {"value": 6}},
        {"index": 3, "time": 4, "process": 2, "type": "fail", "f": "send", "key": "k0",
         "value": {"value": 6}},
        {"index": 4, "time": 5, "process": 3, "type": "invoke", "f": "poll", "value": None},
        {"index": 5, "time": 6, "process": 3, "type": "ok", "f": "poll",
         "value": {"k0": [[0, 5], [1, 6]]}}]
    queue_history.write(rows, tmp_path / "q.parquet")
    t = queue_history.read_table(tmp_path / "q.parquet")
    pic = queue_plots.key_log(t, 0)
    assert [r["cells"] for r in pic["rows"]] == [[[0, 5, "wr", ""]],
                                                 [[0, 5, "r", ""], [1, 6, "r", "aborted-read"]]]
