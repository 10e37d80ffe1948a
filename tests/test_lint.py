"""pyflakes over the whole tree: undefined names, unused imports and the like fail here,
not in the middle of a campaign."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_pyflakes_finds_nothing():
    dirs = ["harness", "nemesis", "workloads", "checkers", "node_image", "bench", "tests"]
    out = subprocess.run([sys.executable, "-m", "pyflakes", *dirs], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
