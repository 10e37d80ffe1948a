"""chaoskraft analyze --across: many runs into Spark tables; the summary's numbers match the
runs' own results.json files."""
import io
import json

import pytest
import yaml

from harness.across import across
from synthetic_runs import KINDS, make_runs

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]  # one JVM

def test_across_summary_matches_every_runs_results(tmp_path, spark):
    dirs = make_runs(tmp_path, 24)
    out = io.StringIO()
    rows = across(tmp_path, out=out)
    text = out.getvalue()
    print(text)
    assert "24 runs" in text
    expected: dict = {}
    for d in dirs:
        results = json.loads((d / "results.json").read_text())
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        kinds = sorted({k for k, f in KINDS.items()
                        if f in {x["f"] for x in results["stats"]["faults"]}}) or ["none"]
        import pandas as pd
        h = pd.read_parquet(d / "history.parquet")
        c = h[(h.process != "nemesis") & (h.type != "invoke") & (h.f != "final-poll")]
        for kind in kinds:
            e = expected.setdefault((cfg["workload"], kind),
                                    {"runs": 0, "invalid": 0, "anomalies": {}, "ok": 0, "n": 0})
            e["runs"] += 1
            e["invalid"] += results["valid"] is False
            e["ok"] += int((c.type == "ok").sum() + (c.error == "cas-mismatch").sum())
            e["mismatches"] = e.get("mismatches", 0) + int((c.error == "cas-mismatch").sum())
            e["n"] += len(c)
            for name, r in results["checkers"].items():
                if name == "queue":
                    for cls in r["bad_anomalies"]:
                        e["anomalies"][cls] = e["anomalies"].get(cls, 0) + r["anomalies"][cls]["count"]
                elif r["valid"] is False:
                    e["anomalies"][name] = e["anomalies"].get(name, 0) + len(r["invalid_keys"])
    got = {(r["workload"], r["fault"]): r for r in rows}
    assert set(got) == set(expected)
    for key, e in expected.items():
        g = got[key]
        assert (g["runs"], g["invalid"], g["anomalies"]) == (e["runs"], e["invalid"],
                                                             e["anomalies"]), key
        assert g["availability"] == round(e["ok"] / e["n"], 4), key
    assert sum(e.get("mismatches", 0) for e in expected.values()) > 0, "the runs hold cas mismatches"
    saved = (tmp_path / "_across" / "summary.txt").read_text()
    assert saved.strip() == text.split("\n", 1)[1].split("node events reached")[0].strip()
    # the coverage table: per workload and fault kind, in how many runs each event came
    cov = json.loads((tmp_path / "_across" / "coverage.json").read_text())
    want: dict = {}
    for d in dirs:
        results = json.loads((d / "results.json").read_text())
        cfg = yaml.safe_load((d / "config.yaml").read_text())
        kinds = sorted({k for k, f in KINDS.items()
                        if f in {x["f"] for x in results["stats"]["faults"]}}) or ["none"]
        for kind in kinds:
            for event, n in results["coverage"]["reached"].items():
                w = want.setdefault((cfg["workload"], kind, event), [0, 0])
                w[0] += 1
                w[1] += n
    got_cov = {(r["workload"], r["fault"], r["event"]): [r["reached_in"], r["times"]]
               for r in cov if r["reached_in"]}
    assert got_cov == want
    never = [r for r in cov if not r["reached_in"]]
    assert never and all(r["runs"] == expected[(r["workload"], r["fault"])]["runs"]
                         for r in never)
    assert not any(r["workload"] == "register" and r["event"] == "isr-shrink" for r in cov), \
        "a workload without partitions lists no data-plane event"
    assert "never" in (tmp_path / "_across" / "coverage.txt").read_text()
    assert (tmp_path / "_across" / "runs.parquet").exists()


def test_a_malformed_run_is_left_out_and_named_and_the_rest_summarised(tmp_path, spark):
    """One run's results.json cut short: the other runs are summarised, the bad one is named
    with its file and position (output, _across/unreadable.txt), and the command exits 3."""
    from harness import cli
    dirs = make_runs(tmp_path, 4)
    bad = dirs[1] / "results.json"
    bad.write_text(bad.read_text()[:40])
    out = io.StringIO()
    unreadable: list = []
    rows = across(tmp_path, out=out, unreadable=unreadable)
    assert rows and all(r["runs"] >= 1 for r in rows)
    assert "3 runs" in out.getvalue()
    [why] = unreadable
    assert why.startswith(f"{bad}:1:") and "not JSON" in why, why
    assert why in out.getvalue()
    assert (tmp_path / "_across" / "unreadable.txt").read_text() == why + "\n"
    assert cli.main(["analyze", "--across", str(tmp_path)]) == 3
