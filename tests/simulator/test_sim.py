"""The deterministic simulator: 200 seeds with faults hold, and a seed is a trace."""
import subprocess
import sys

import pytest

from conftest import NIGHTLY
from harness.simulate import run_seed
from simulator.cluster import Simulation

DURATION_S = 120
# 200 seeds nightly (10 x 20), 10 in CI (`make test`)
CHUNKS, PER_CHUNK = (10, 20) if NIGHTLY else (1, 10)


def test_same_seed_same_trace():
    a = Simulation(3, 5, 30).run()
    b = Simulation(3, 5, 30).run()
    c = Simulation(4, 5, 30).run()
    assert a.trace_hash == b.trace_hash
    assert a.history == b.history
    assert a.trace_hash != c.trace_hash


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_correct_node_holds_on_every_seed(chunk):
    for seed in range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK):
        o = run_seed(seed, 5, DURATION_S, frozenset())
        r = o.result
        assert r.stats["crashes"] + r.stats["partitions"] > 0, f"seed {seed} injected no fault"
        assert o.ok, (f"seed {seed}: {o.invariant} at event {o.event_index}: {o.detail}\n"
                      f"options: {r.options.describe()}")
        assert sum(1 for h in r.history if h["type"] == "ok") > 0, f"seed {seed}: no operation succeeded"


def chaoskraft(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_cli_reports_the_invariant_and_how_to_reproduce():
    p = chaoskraft("sim", "--seed", "0", "--duration-s", "30", "--bug", "hwm-without-majority")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL MajorityReachedHighWatermark" in p.stdout
    assert "at event " in p.stdout
    line = next(l for l in p.stdout.splitlines() if "reproduce with:" in l)
    cmd = line.split("reproduce with: chaoskraft ", 1)[1].split()
    again = chaoskraft(*cmd)
    trace = [l for l in p.stdout.splitlines() if "trace" in l]
    assert [l for l in again.stdout.splitlines() if "trace" in l] == trace


def test_cli_seed_range_summarises():
    p = chaoskraft("sim", "--seeds", "1-3", "--duration-s", "20")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "summary: 3 of 3 seeds held" in p.stdout


def test_cli_rejects_unknown_bug():
    p = chaoskraft("sim", "--seed", "1", "--bug", "nope")
    assert p.returncode == 64
    assert "unknown bug 'nope'" in p.stderr
