"""SIGINT and SIGTERM stop the long commands however they were started, also with SIGINT ignored
at exec (a background job of a non-interactive shell, a child of a pytest-xdist worker). Here
on `chaoskraft matrix` over simulator seeds, which needs no Docker; `run` is interrupted the
same way in test_docker.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT


def _catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler installed for ``signum`` (SigCgt in /proc)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    return False


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_matrix_stops_on_a_signal_though_sigint_was_ignored_at_exec(tmp_path, signum):
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "matrix", "--bugs", "forget-vote",
         "--seeds", "1-50", "--sim-duration-s", "100000", "--results-dir", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        # the signal is sent once the handler is in: before, SIGINT is still ignored
        while not _catches(proc.pid, signum):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no handler installed within 60 s"
            time.sleep(0.05)
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "chaoskraft: interrupted" in err
    assert "seed 50" not in out  # stopped, not run to the end


TEARDOWN_INTERRUPTED = r"""
import os, signal, sys
from pathlib import Path
import harness.images, harness.runner as runner
from harness.config import RunConfig

class Backend:  # a cluster whose teardown is signalled halfway, as a CI timeout's SIGTERM
    nodes = []
    def up(self): pass
    def down(self):
        os.kill(os.getpid(), int(sys.argv[2]))
        if len(sys.argv) > 3:
            os.kill(os.getpid(), int(sys.argv[2]))
        print("teardown finished", flush=True)

class Campaign:
    def __init__(self, *a, **k): pass
    async def run(self): pass

harness.images.build_images = lambda log: "image"
runner.make_backend = lambda cfg, run_id, image, log: (Backend(), None)
runner.Campaign = Campaign
runner.install_interrupt_handlers()
print("exit", runner.run(RunConfig(seed=1, time_limit_s=1), root=Path(sys.argv[1])), flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_teardown_waits_for_it_and_a_second_abandons_it(tmp_path, signum):
    """One SIGTERM (or SIGINT) in the middle of removing the containers must not leave the
    rest behind: teardown goes on and the run ends as interrupted (130), history kept; a
    second one abandons the teardown (the user insists)."""
    def run(*extra):
        return subprocess.run([sys.executable, "-c", TEARDOWN_INTERRUPTED, str(tmp_path),
                               str(int(signum)), *extra], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    once = run()
    lines = once.stdout.splitlines()
    assert "teardown finished" in lines and lines[-1] == "exit 130", once
    assert any("during teardown: teardown goes on" in line for line in lines), once
    assert list(tmp_path.rglob("history.jsonl")), "the history is kept"
    twice = run("again")
    assert "teardown finished" not in twice.stdout, twice
    assert "KeyboardInterrupt" in twice.stderr, twice
