"""chaoskraft analyze --across: many runs into Spark tables; the summary's numbers match the
runs' own results.json files."""
import io
import json
import random
from pathlib import Path

import pytest
import yaml

from checkers.parquet import write_parquet
from harness.across import across

pytestmark = pytest.mark.spark

KINDS = {"partition": "start-partition", "kill": "kill", "clock": "clock-bump",
         "pause": "pause"}


def make_runs(root: Path, n: int) -> list[Path]:
    rng = random.Random(4)
    dirs = []
    for i in range(n):
        workload = ("register", "queue")[i % 2]
        kinds = rng.sample(sorted(KINDS), rng.choice((0, 1, 2)))
        d = root / workload / f"20261121T10{i:04d}Z-{i}"
        d.mkdir(parents=True)
        rows = []
        for k in kinds:
            rows.append({"process": "nemesis", "type": "invoke", "f": KINDS[k], "value": {}})
            rows.append({"process": "nemesis", "type": "info", "f": KINDS[k], "value": {}})
        f = "send" if workload == "queue" else "write"
        for j in range(rng.randrange(5, 40)):
            p = j % 3
            rows.append({"process": p, "type": "invoke", "f": f, "key": "k0", "value": j})
            rows.append({"process": p, "type": rng.choice(("ok", "ok", "fail", "info")), "f": f,
                         "key": "k0", "value": j})
        if workload == "queue":
            rows.append({"process": 1000, "type": "invoke", "f": "final-poll"})
            rows.append({"process": 1000, "type": "ok", "f": "final-poll", "value": {}})
        for idx, r in enumerate(rows):
            r.update(index=idx, time=idx * 1000)
        write_parquet(rows, d / "history.parquet")
        invalid = rng.random() < 0.3
        if workload == "queue":
            anomalies = {"lost-write": {"count": rng.randrange(1, 9), "examples": []},
                         "duplicate": {"count": 2, "examples": []}} if invalid else {}
            checker = {"queue": {"valid": not invalid, "anomalies": anomalies,
                                 "bad_anomalies": ["lost-write"] if invalid else []}}
        else:
            checker = {"linearizability": {"valid": not invalid,
                                           "invalid_keys": ["r1", "r2"] if invalid else []}}
        results = {"valid": not invalid, "verdict": "invalid" if invalid else "valid",
                   "checkers": checker,
                   "stats": {"faults": [{"f": KINDS[k], "value": {}} for k in kinds]}}
        (d / "results.json").write_text(json.dumps(results))
        (d / "config.yaml").write_text(yaml.safe_dump({"workload": workload, "seed": i,
                                                       "test": workload, "nemesis": kinds}))
        dirs.append(d)
    (root / "register" / "latest").symlink_to(dirs[0])  # a latest link does not count twice
    return dirs


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
            e["ok"] += int((c.type == "ok").sum())
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
    saved = (tmp_path / "_across" / "summary.txt").read_text()
    assert saved.strip() == text.split("\n", 1)[1].split("saved:")[0].strip()
    assert (tmp_path / "_across" / "runs.parquet").exists()
