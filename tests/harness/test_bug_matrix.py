"""chaoskraft matrix without Docker: which bugs go to which campaign, its command line, and the
Docker cells' own processes (here a stand-in for `chaoskraft run` that writes a run directory)
running side by side, read back, tabled in the order asked, and stopped on an interrupt."""
import io
import os
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from conftest import ROOT
from harness import bug_matrix as matrix
from node_image.bugs import BUGS


def test_each_bug_goes_to_the_campaign_meant_to_catch_it():
    assert matrix.docker_workload(None) == "queue"
    # the queue bugs a Docker campaign catches (fenced-epoch-appends needs the simulator's
    # zombie producers)
    assert matrix.bug_groups()["queue"] == [n for n, b in BUGS.items()
                                            if b.workload == "queue" and b.docker]
    assert "fenced-epoch-appends" not in matrix.bug_groups()["queue"]
    docker_register = ["concurrent-voter-changes", "voter-counted-before-catch-up",
                       "lease-read", "lease-read-step-proof", "reply-before-commit"]
    assert matrix.bug_groups()["register"] == docker_register
    for name, bug in BUGS.items():
        expected = ("queue" if bug.docker else None) if bug.workload == "queue" else (
            "register" if name in docker_register else None)
        assert matrix.docker_workload(name) == expected, name
    cmd = matrix._cell_command("unclean-election", 7, 60, "/r")
    assert cmd[cmd.index("--workload") + 1] == "queue" and "--nemesis" not in cmd, \
        "the workload's default campaign: no faults chosen"
    assert cmd[-2:] == ["--bug", "unclean-election"] and cmd[cmd.index("--seed") + 1] == "7"


def test_a_bug_that_needs_a_fault_runs_its_own_campaign_and_without_it_must_go_unseen(tmp_path):
    """lease-read needs the clock package: its cells run its campaign file; --without clock
    writes that file without the package, and a detection there would be a failure."""
    bug = BUGS["lease-read"]
    assert bug.needs_faults == ("clock",)
    own = matrix.cell_campaign("lease-read", None, (), str(tmp_path))
    assert own == str(ROOT / bug.campaign)
    cmd = matrix._cell_command("lease-read", 3, 60, "/r", own)
    assert cmd[cmd.index("--campaign") + 1] == own and "--workload" not in cmd
    assert cmd[-2:] == ["--bug", "lease-read"]
    without = matrix.cell_campaign("lease-read", None, ("clock",), str(tmp_path))
    data = yaml.safe_load(open(without))
    assert [e["package"] for e in data["nemesis"]] == ["partition"]
    assert data["nemesis"][0] == yaml.safe_load(open(own))["nemesis"][0]
    assert matrix.expected_detection("lease-read", ()) is True
    assert matrix.expected_detection("lease-read", ("clock",)) is False
    assert matrix.expected_detection("lease-read", ("kill",)) is True
    assert matrix.expected_detection(None, ()) is False
    with pytest.raises(ValueError, match="has no package 'kill'"):
        matrix.cell_campaign("lease-read", None, ("kill",), str(tmp_path))
    with pytest.raises(ValueError, match="give --campaign FILE"):
        matrix.cell_campaign("ack-before-replication", None, ("clock",), str(tmp_path))
    assert matrix.cell_campaign("ack-before-replication", None, (), str(tmp_path)) is None
    with pytest.raises(ValueError, match="--campaign nope.yaml: no such file"):
        matrix.cell_campaign(None, "nope.yaml", (), str(tmp_path))
    # a relative --campaign is the user's, from where they ran the matrix (cells run elsewhere)
    (tmp_path / "mine.yaml").write_text("workload: register\n")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert matrix.cell_campaign(None, "mine.yaml", (), str(tmp_path)) == \
            str(tmp_path / "mine.yaml")
    finally:
        os.chdir(here)


@pytest.mark.parametrize("args, words", [
    (["--bugs", "docker,nope"], "unknown bug 'nope'"),
    (["--bugs", "none", "--jobs", "0"], "--jobs must be at least 1"),
    (["--bugs", "lease-read", "--without", "kill"], "has no package 'kill'"),
])
def test_bad_arguments_are_named(args, words):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "matrix", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 64 and words in p.stderr, p.stderr


# A stand-in for `chaoskraft run`: a run directory with a history and results, the queue
# checker's verdict decided by the bug's name. It waits until TOGETHER cells are running at
# once (ending 3 after 60 s without), then SLEEP s more; on SIGTERM it ends 130.
FAKE_RUN = textwrap.dedent("""
    import json, pathlib, signal, sys, time
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(130))
    args = sys.argv[1:]
    bug = args[args.index("--bug") + 1] if "--bug" in args else None
    seed = args[args.index("--seed") + 1]
    if bug == "fetch-above-hw":  # a campaign that fails before it has a verdict
        print("[ 236.2s] run failed: TimeoutError: partitions of queue without a leader")
        sys.exit(1)
    run = pathlib.Path(args[args.index("--results-dir") + 1]) / f"run-{bug}-{seed}"
    run.mkdir(parents=True)
    print(f"run directory: {run}", flush=True)
    deadline = time.monotonic() + 60
    while len(list(run.parent.glob("run-*"))) < TOGETHER:
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.02)
    time.sleep(SLEEP)
    rows = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "send", "key": "k0",
             "value": {"value": 7}},
            {"index": 1, "time": 2_500_000_000, "process": 0, "type": "ok", "f": "send",
             "key": "k0", "value": {"value": 7, "offset": 0}}]
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    (run / "config.yaml").write_text("workload: queue\\n")
    caught = bug == "ack-before-replication"
    anomalies = {"lost-write": {"count": 1, "examples": [{"index": 1}]}} if caught else {}
    (run / "results.json").write_text(json.dumps({
        "valid": not caught, "verdict": "invalid" if caught else "valid",
        "checkers": {"queue": {"bad_anomalies": list(anomalies), "anomalies": anomalies}}}))
    sys.exit(1 if caught else 0)
""")


def _fake(monkeypatch, tmp_path, sleep, together=1):
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN.replace("TOGETHER", str(together)).replace("SLEEP", str(sleep)))
    monkeypatch.setattr(matrix, "_cell_command", lambda bug, seed, t, results, campaign=None: [
        sys.executable, str(script), "--seed", str(seed), "--results-dir", results]
        + (["--bug", bug] if bug else []))


def test_docker_cells_run_side_by_side_and_are_read_back(monkeypatch, tmp_path):
    _fake(monkeypatch, tmp_path, 0, together=4)  # run one by one, the first never ends
    out = io.StringIO()
    cells = matrix.run_matrix(["ack-before-replication", None], [1, 2], 60, 0,
                              str(tmp_path / "r"), out=out, jobs=4)
    assert [(c.bug, c.seed, c.detected) for c in cells] == [
        ("ack-before-replication", 1, True), ("ack-before-replication", 2, True),
        ("none", 1, False), ("none", 2, False)]
    assert cells[0].classes == ["lost-write"] and cells[0].detect_s == 2.5
    for c in cells:  # each cell's output moved into its run directory
        assert "run directory:" in (tmp_path / "r" / f"run-{None if c.bug == 'none' else c.bug}-{c.seed}"
                                    / "progress.log").read_text()
    text = out.getvalue()
    assert "[4/4]" in text and "ack-before-replication   queue      2/2" in text, text
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.startswith("matrix-")], \
        "the cells' temporary logs are gone"


def test_an_interrupt_stops_every_running_cell(monkeypatch, tmp_path):
    _fake(monkeypatch, tmp_path, 60.0)
    children = []
    real_popen = subprocess.Popen

    def popen(*a, **kw):
        p = real_popen(*a, **kw)
        children.append(p)
        return p
    monkeypatch.setattr(matrix.subprocess, "Popen", popen)

    def interrupted(*a, **kw):  # the main thread is interrupted while the campaigns run
        deadline = time.monotonic() + 30
        while len(list((tmp_path / "r").glob("run-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        raise KeyboardInterrupt
    monkeypatch.setattr(matrix, "sim_cell", interrupted)
    with pytest.raises(KeyboardInterrupt):
        matrix.run_matrix(["ack-before-replication", "forget-vote"], [1, 2, 3], 60, 1,
                          str(tmp_path / "r"), out=io.StringIO(), jobs=2)
    assert len(children) == 2, "no campaign starts after the interrupt"
    assert [p.poll() for p in children] == [130, 130], "each running campaign was interrupted"


def test_a_campaign_that_fails_is_an_error_cell_and_the_matrix_goes_on(monkeypatch, tmp_path):
    _fake(monkeypatch, tmp_path, 0)
    out = io.StringIO()
    cells = matrix.run_matrix(["fetch-above-hw", "ack-before-replication"], [1], 60, 0,
                              str(tmp_path / "r"), out=out, jobs=1)
    assert [(c.bug, c.detected) for c in cells] == [("fetch-above-hw", False),
                                                   ("ack-before-replication", True)]
    assert cells[0].verdict.startswith("error (exit 1: [ 236.2s] run failed: TimeoutError")
    assert "without a leader" in open(cells[0].where).read(), "its output is kept"
    assert "1 campaign(s) ended in error" in out.getvalue()


def test_the_table_names_what_judged_the_runs():
    """A --campaign file's workload judged its runs (the correct node under a register
    campaign is checked by the register checker, not the control workload's)."""
    out = io.StringIO()
    matrix.print_table([matrix.Cell("none", 1, False, verdict="valid", checked_by="register"),
                        matrix.Cell("forget-vote", 1, True, ["SingleLeader"], 3.0,
                                    verdict="violated", checked_by="simulator")], out)
    text = out.getvalue()
    assert "none                     register   0/1" in text, text
    assert "forget-vote              simulator  1/1" in text, text
