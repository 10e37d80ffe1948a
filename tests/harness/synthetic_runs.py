"""Synthetic stored runs for the tests of what reads many runs (across, serve)."""
import json
import random
from pathlib import Path

import yaml

from checkers.parquet import write_parquet

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
            typ = rng.choice(("ok", "ok", "fail", "info"))
            done = {"process": p, "type": typ, "f": f, "key": "k0", "value": j}
            if workload == "register" and typ == "fail" and j % 2:  # the service's answer: no
                done.update(f="cas", value=[j - 1, j], error="cas-mismatch")
            rows.append({"process": p, "type": "invoke", "f": done["f"], "key": "k0",
                         "value": done["value"]})
            rows.append(done)
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
        events = ["raft-leader-elected", "broker-fenced"] + (
            ["isr-shrink"] if workload == "queue" and kinds else [])
        cov = {"reached": {e: 1 + i % 3 for e in events[:1 + i % len(events)]}}
        results = {"valid": not invalid, "verdict": "invalid" if invalid else "valid",
                   "checkers": checker, "coverage": cov,
                   "stats": {"faults": [{"f": KINDS[k], "value": {}} for k in kinds]}}
        (d / "results.json").write_text(json.dumps(results))
        (d / "config.yaml").write_text(yaml.safe_dump({"workload": workload, "seed": i,
                                                       "test": workload, "nemesis": kinds}))
        dirs.append(d)
    (root / "register" / "latest").symlink_to(dirs[0])  # a latest link does not count twice
    return dirs
