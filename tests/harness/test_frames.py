"""The report and the timeline stream the history (harness/frames.py): whatever the batch size,
and whichever file holds the history (history.jsonl, history.parquet, or a typed queue.parquet
alone), they must see the same operations and draw the same pages."""
import json
import random
import re

import numpy as np
import pandas as pd
import pytest

from checkers.queue import history as queue_history
from checkers.history import read_history
from checkers.parquet import write_parquet
from harness import frames
from harness.report import Series, operations, render
from harness.timeline import write_timeline
from test_report import make_run


def messy_history(seed: int, n: int = 1500) -> list[dict]:
    """Interleaved processes, completions far from their invokes, an invoke never completed,
    a process that invokes twice (its first invoke never completes), nemesis rows."""
    rng = random.Random(seed)
    rows, pending, t = [], {}, 0
    for _ in range(n):
        t += rng.randint(1, 3_000_000)
        p = rng.randrange(7)
        if rng.random() < 0.01:
            rows.append({"process": "nemesis", "type": "info", "f": "kill",
                         "value": {"nodes": [1]}})
        elif p in pending and rng.random() < 0.97:
            f, v = pending.pop(p)
            rows.append({"process": p, "type": rng.choice(["ok", "ok", "fail", "info"]), "f": f,
                         "key": "k1", "value": {"value": v, "offset": v}})
        else:
            v = len(rows)
            pending[p] = ("send", v)
            rows.append({"process": p, "type": "invoke", "f": "send", "key": "k1",
                         "value": {"value": v}})
        rows[-1].update(index=len(rows) - 1, time=t)
    return rows


def _all(run, batch_rows):
    ops = pd.concat(frames.pairs(frames.batches(run, batch_rows)), ignore_index=True)
    # a column may come as a Categorical from one batch and as objects from two
    for c in ("process", "f", "key", "type", "error"):
        ops[c] = ops[c].astype(object).where(ops[c].notna(), None)
    return ops.sort_values("index").reset_index(drop=True)


@pytest.mark.parametrize("store", ["jsonl", "parquet", "typed"])
def test_operations_are_the_same_whatever_the_batch_size_and_file(tmp_path, store):
    rows = messy_history(1)
    if store == "jsonl":
        (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif store == "parquet":
        write_parquet(rows, tmp_path / "history.parquet")
    else:
        queue_history.write(rows, tmp_path / "queue.parquet")
    whole = _all(tmp_path, 10**9)
    # the same pairs as the in-memory pairing of the report's operations()
    df = pd.DataFrame(rows)
    df["process"] = df["process"].astype(str)
    done = operations(df)
    assert sorted(whole.loc[whole["type"] != "open", "index"]) == sorted(done["index"])
    assert (whole["type"] == "open").sum() >= 2  # the double invoke and the tail
    for b in (2, 7, 100, 1001):
        part = _all(tmp_path, b)
        pd.testing.assert_frame_equal(part, whole, check_dtype=False)


def test_series_matches_exact_counts_and_quantiles_within_a_bin():
    rng = np.random.default_rng(3)
    n = 50_000
    ops = pd.DataFrame({"start_s": rng.uniform(0, 100, n),
                        "latency_ms": rng.lognormal(1, 1.5, n),
                        "type": rng.choice(["ok", "fail", "info"], n),
                        "answered": rng.random(n) < 0.7})
    s = Series(100.0, 1.0)
    for lo in range(0, n, 3000):  # fed in batches
        s.add(ops.iloc[lo:lo + 3000])
    win = ops["start_s"] // 1.0
    got = s.quantiles()
    assert list(got.index) == sorted(win.unique())
    for col, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0)):
        # the order statistic the quantile names (smallest x with F(x) >= q); the histogram
        # gives the middle of its bin, at most half a bin (1.2 %) away
        exact = ops.groupby(win)["latency_ms"].apply(
            lambda x: np.quantile(x, q, method="inverted_cdf")).to_numpy()
        ratio = got[col].to_numpy() / exact
        limit = 1e-9 if col == "max" else np.log(1.012)
        assert np.all(np.abs(np.log(ratio)) < limit), (col, ratio.min(), ratio.max())
    counts = ops.groupby([win, "type"]).size().unstack(fill_value=0)
    w = s.windows()
    for j, typ in enumerate(("ok", "fail", "info")):
        assert list(s.count[w, j]) == list(counts[typ])
    assert list(s.answered[w]) == list(ops.groupby(win)["answered"].sum())
    assert len(s.scatter()) == min(n, 100_000) and s.ops == n


def test_series_sample_stays_bounded_and_uniform(monkeypatch):
    import harness.report.series as report
    monkeypatch.setattr(report, "MAX_POINTS", 1000)
    s = Series(1000.0, 1.0)
    rng = np.random.default_rng(4)
    for _ in range(50):
        k = 2000
        s.add(pd.DataFrame({"start_s": rng.uniform(0, 1000, k), "latency_ms": 1.0,
                            "type": "ok", "answered": True}))
        assert s.sampled <= 2 * 1000
    sample = s.scatter()
    assert len(sample) == 1000
    assert 350 < sample["start_s"].mean() < 650  # drawn from the whole run, not its start


def _chunks(run):
    out = {}
    for path in (run / "timeline").glob("c-*.js"):
        k = int(re.search(r"c-(\d+)\.js", path.name).group(1))
        rows = []
        text = path.read_text()
        assert text.endswith(f"TL.chunk({k});\n"), "a chunk file is closed once all is in"
        for m in re.finditer(r"TL\.part\(\d+,(.*)\);\n", text):
            rows += [tuple(r) for r in json.loads(m.group(1))]
        out[k] = sorted(rows)
    return out


def test_timeline_chunks_do_not_depend_on_the_batch_size(tmp_path, monkeypatch):
    import harness.timeline as timeline
    monkeypatch.setattr(timeline, "TARGET_OPS_PER_CHUNK", 40)
    rows = messy_history(2)
    write_parquet(rows, tmp_path / "history.parquet")
    write_timeline(tmp_path)
    whole = _chunks(tmp_path)
    meta = (tmp_path / "timeline" / "index.js").read_text()
    assert len(whole) > 3
    monkeypatch.setattr(frames, "BATCH", 13)
    write_timeline(tmp_path)
    assert _chunks(tmp_path) == whole
    assert (tmp_path / "timeline" / "index.js").read_text() == meta


def test_report_of_a_run_stored_as_typed_queue_parquet_alone(tmp_path):
    lost = make_run(tmp_path)
    queue_history.write(read_history(tmp_path / "history.jsonl"), tmp_path / "queue.parquet")
    want = render(tmp_path).read_text()
    (tmp_path / "history.jsonl").unlink()
    text = render(tmp_path).read_text()
    row = re.search(rf"<tr id='op-{lost}'>.*?</tr>", text).group(0)
    assert row == re.search(rf"<tr id='op-{lost}'>.*?</tr>", want).group(0)
    assert "<td>send</td><td>k0</td>" in row and "&quot;value&quot;: 50" in row
    for kind in ("partition", "kill", "pause", "clock", "packet-loss", "corrupt"):
        assert f"<tr><td>{kind}</td>" in text, kind
    clock = re.search(r"<pre id='clock'>(.*?)</pre>", text).group(1)
    assert clock == re.search(r"<pre id='clock'>(.*?)</pre>", want).group(1)
    write_timeline(tmp_path)
    assert (tmp_path / "timeline" / "index.js").exists()


def test_analyze_a_run_stored_as_typed_queue_parquet_alone(tmp_path):
    """A run written straight to Parquet (no history.jsonl) is checked, reported and drawn as
    the same run stored as JSON lines."""
    from harness.analyze import analyze
    from test_queue_differential import generate
    rng = random.Random(5)
    rows = []
    for h in range(6):
        rows += generate(rng, h, len(rows))
    runs = {}
    for store in ("jsonl", "typed"):
        run = tmp_path / store
        run.mkdir()
        (run / "config.yaml").write_text("workload: queue\n")
        if store == "jsonl":
            (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            queue_history.write(rows, run / "queue.parquet")
        lines = []
        runs[store] = (analyze(run, engine="local", log=lines.append), lines, run)
    (a, _, ja), (b, lines, tb) = runs["jsonl"], runs["typed"]
    assert a["verdict"] == "invalid" and b["verdict"] == a["verdict"]
    assert b["stats"] == a["stats"]
    assert {k: v["count"] for k, v in b["checkers"]["queue"]["anomalies"].items()} == \
        {k: v["count"] for k, v in a["checkers"]["queue"]["anomalies"].items()}
    assert any("stored as queue.parquet" in x for x in lines)
    assert any(x.startswith("analysis: peak memory of this process (RSS): ") for x in lines)
    assert not (tb / "history.parquet").exists()
    ops = re.findall(r"<tr id='op-(\d+)'>", (tb / "report.html").read_text())
    assert ops and ops == re.findall(r"<tr id='op-(\d+)'>", (ja / "report.html").read_text())
    assert _chunks(tb) == _chunks(ja)


def test_the_peak_memory_analyze_prints_is_its_own_not_its_parents():
    """ru_maxrss survives exec, so a child of a process that once held 300 MB would report 300
    MB; analyze reports VmHWM, which starts afresh at exec."""
    import subprocess
    import sys
    code = ("import json, resource, sys; sys.path.insert(0, '.'); "
            "from harness.analyze import peak_rss_mb; "
            "print(json.dumps([peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss "
            "/ 1024]))")
    held = bytearray(300 * 1024 * 1024)
    for i in range(0, len(held), 4096):
        held[i] = 1
    del held
    from conftest import ROOT
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    own, inherited = json.loads(out)
    assert inherited >= 300 and own < 250, (own, inherited)


def test_a_long_history_is_streamed_with_progress_and_a_short_one_quietly(tmp_path,
                                                                         monkeypatch):
    """The report and the timeline say how far they read, a tenth at a time, on a history of
    PROGRESS_ROWS or more (long work); below that, nothing."""
    rows = messy_history(3)
    write_parquet(rows, tmp_path / "history.parquet")
    (tmp_path / "results.json").write_text(json.dumps({"valid": True, "checkers": {}}))
    heard: list[str] = []
    monkeypatch.setattr(frames, "BATCH", 100)
    render(tmp_path, progress=heard.append)
    write_timeline(tmp_path, progress=heard.append)
    assert heard == []
    monkeypatch.setattr(frames, "PROGRESS_ROWS", 1000)
    render(tmp_path, progress=heard.append)
    write_timeline(tmp_path, progress=heard.append)
    for what in ("report", "timeline"):
        mine = [line for line in heard if line.startswith(what + ": ")]
        percents = [int(re.search(r"\((\d+)%\)", line).group(1)) for line in mine]
        assert len(mine) >= 5 and percents == sorted(percents) and percents[-1] == 100, mine
        assert f"of {len(rows):,} history rows read" in mine[-1]


def test_timeline_labels_keep_quotes_backslashes_and_control_characters(tmp_path):
    """The chunk rows are built column-wise as text: a label with a quote, a backslash, a
    non-ASCII character or a control character must still read back as itself."""
    keys = ['plain', 'a"b', 'back\\slash', 'ünï', 'bell\x07', '']
    rows = []
    for p, key in enumerate(keys):
        rows.append({"process": p, "type": "invoke", "f": "send", "key": key,
                     "value": {"value": f'v"{p}\\'}})
        rows.append({"process": p, "type": "ok", "f": "send", "key": key,
                     "value": {"value": f'v"{p}\\', "offset": p}})
    for i, r in enumerate(rows):
        r.update(index=i, time=1000 * i)
    write_parquet(rows, tmp_path / "history.parquet")
    write_timeline(tmp_path)
    labels = {r[4]: r[5] for rs in _chunks(tmp_path).values() for r in rs}
    for p, key in enumerate(keys):
        value = json.dumps({"value": f'v"{p}\\'})[:40]
        assert labels[2 * p] == f"send {key} {value}".strip(), (key, labels[2 * p])


def test_one_pass_writes_the_pages_the_two_passes_write(tmp_path, monkeypatch):
    """analyze writes the report and the timeline from one read of the history
    (frames.one_pass): the same pages as each written alone."""
    import harness.timeline as timeline_module
    from harness.report.page import ReportPass
    from harness.timeline import TimelinePass
    monkeypatch.setattr(timeline_module, "TARGET_OPS_PER_CHUNK", 5)
    lost = make_run(tmp_path)
    alone = render(tmp_path).read_text()
    write_timeline(tmp_path)
    chunks = _chunks(tmp_path)
    index = (tmp_path / "timeline" / "index.js").read_text()
    heard: list[str] = []
    report, timeline = frames.one_pass(tmp_path, [ReportPass(tmp_path), TimelinePass(tmp_path)],
                                       heard.append, "both")
    assert report.read_text() == alone and f"<tr id='op-{lost}'>" in alone
    assert timeline == tmp_path / "timeline.html"
    assert _chunks(tmp_path) == chunks and len(chunks) > 1
    assert (tmp_path / "timeline" / "index.js").read_text() == index


def test_send_indexes_are_the_same_from_a_typed_file_and_from_json_lines(tmp_path):
    """The sends an anomaly names by value are found by filtering a typed file where it lies;
    the same indexes as reading the same history from JSON lines."""
    rows = []
    for i, (key, v) in enumerate([("k1", 7), ("k2", 7), ("k1", "x"), ("k3", 9), ("k1", 8)]):
        rows.append({"process": i, "type": "invoke", "f": "send", "key": key,
                     "value": {"value": v}})
        rows.append({"process": i, "type": "ok", "f": "send", "key": key,
                     "value": {"value": v, "offset": i}})
    for i, r in enumerate(rows):
        r.update(index=i, time=1000 * i)
    wanted = {("k1", 7), ("k1", "x"), ("k3", 9), ("k2", 8), ("k9", 1)}
    found = {}
    for store in ("jsonl", "typed"):
        run = tmp_path / store
        run.mkdir()
        if store == "jsonl":
            (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            queue_history.write(rows, run / "queue.parquet")
        found[store] = frames.send_indexes(run, wanted)
    assert found["typed"] == found["jsonl"] == {("k1", 7): 0, ("k1", "x"): 4, ("k3", 9): 6}
