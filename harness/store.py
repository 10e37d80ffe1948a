"""The run store: ``results/<test>/<UTC time>-<seed>/`` and ``results/latest``.

A run directory holds ``history.jsonl`` (streamed during the run),
``history.parquet`` (written by the analysis), ``nodes/n<id>/`` (node and
supervisor logs), ``harness.log``, and the files ``core.run_dir.RunDir``
alone reads and writes (``config.yaml``, ``plan.json``, ``generated.jsonl``,
``faults.json``, ``liveness.json``, ``history-start.json``, ``results.json``).
``results/latest`` links to the newest.
"""
from __future__ import annotations

import os
import time
from pathlib import Path


def new_run_dir(root: Path, test: str, seed: int) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = root / test / f"{stamp}-{seed}"
    base.parent.mkdir(parents=True, exist_ok=True)
    path = base
    n = 1
    while True:  # mkdir, not a test of existence: two runs started together each get one
        try:
            path.mkdir()
            break
        except FileExistsError:
            n += 1
            path = Path(f"{base}-{n}")
    latest = root / "latest"
    tmp = root / f".latest-{os.getpid()}-{path.name}"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(path.relative_to(root))
    os.replace(tmp, latest)
    return path
