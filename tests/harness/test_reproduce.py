"""chaoskraft reproduce: a stored invalid run from a planted bug comes back, with the same
generated operations and fault plan."""
import io
import json
from pathlib import Path

import pytest

from harness.config import resolve
from harness.reproduce import anomaly_classes, invoked_prefix_ok, reproduce
from harness.runner import run, write_plan
from harness.store import new_run_dir


def test_anomaly_classes_of_both_workloads():
    q = {"checkers": {"queue": {"valid": False, "bad_anomalies": ["lost-write", "durability"]}}}
    assert anomaly_classes(q) == ["durability", "lost-write"]
    r = {"checkers": {"linearizability": {"valid": False}}}
    assert anomaly_classes(r) == ["linearizability"]
    assert anomaly_classes({"checkers": {"linearizability": {"valid": True}}}) == []


def test_invoked_operations_must_follow_the_generator(tmp_path):
    cfg = resolve({"workload": "queue", "seed": 9, "concurrency": 2, "time_limit_s": 5}, {})
    write_plan(cfg, tmp_path)
    gen = [json.loads(line) for line in (tmp_path / "generated.jsonl").read_text().splitlines()]
    rows = []
    for p in (0, 1):
        for op in [g for g in gen if g["process"] == p][:4]:
            value = {"value": op["value"]} if op["f"] == "send" else None
            rows.append({"index": len(rows), "process": p, "type": "invoke", "f": op["f"],
                         "key": op["key"], "value": value})
    history = tmp_path / "history.jsonl"
    history.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert invoked_prefix_ok(tmp_path) == (True, "8 invoked operations follow the generator")
    send = next(r for r in rows if r["f"] == "send")
    send["value"] = {"value": send["value"]["value"] + 1}
    history.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok, why = invoked_prefix_ok(tmp_path)
    assert not ok and f"process {send['process']}" in why


@pytest.mark.docker
def test_reproduce_brings_the_anomaly_back(docker_client, node_image, tmp_path):
    runs = []
    for seed in (1, 2, 3):
        cfg = resolve({"workload": "queue", "nemesis": ["strand-replica"], "time_limit_s": 35,
                       "bugs": ["unclean-election"]}, {"seed": seed, "results_dir": str(tmp_path)})
        run_dir = new_run_dir(tmp_path, cfg.test, seed)
        with open(run_dir / "progress.log", "w") as progress:
            code = run(cfg, stream=progress, run_dir=run_dir)
        runs.append((seed, code, str(run_dir)))
        if code == 1:
            break
    else:
        pytest.fail(f"no invalid original run to reproduce: {runs}")
    original = anomaly_classes(json.loads((run_dir / "results.json").read_text()))
    out = io.StringIO()
    code = reproduce(run_dir, attempts=3, results_dir=str(tmp_path / "again"), out=out)
    text = out.getvalue()
    print(text)
    assert code == 0 and "reproduced in" in text, text
    again = sorted(Path(tmp_path / "again").glob("*/*/results.json"))[-1].parent
    assert set(anomaly_classes(json.loads((again / "results.json").read_text()))) & set(original)
    for name in ("generated.jsonl", "plan.json"):
        assert (run_dir / name).read_bytes() == (again / name).read_bytes(), name
    for d in (run_dir, again):
        ok, why = invoked_prefix_ok(d)
        assert ok, why
    assert (again / "reproduces").read_text().strip() == str(run_dir.resolve())
