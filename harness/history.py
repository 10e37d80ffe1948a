"""The history recorder: one JSON line per invoke and completion, written as it happens.

Each row goes to the operating system in one ``write(2)`` when recorded, so a
crash of the harness, SIGKILL included, leaves every row recorded so far on
disk, whole (an analysable prefix; a reader also drops a last line cut short
by a machine that lost power mid-write).
``time`` is nanoseconds since the recorder started (monotonic clock). The
schema is in docs/history.md.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from core.run_dir import RunDir


class HistoryWriter:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._f = open(self.path, "ab", buffering=0)
        self._t0 = time.monotonic_ns()
        # the wall clock at time 0, so node log lines can be placed on the history's time axis
        RunDir(self.path.parent).write_history_start({"wall_clock_s": time.time(),
                                                      "history_time_ns": 0})
        self._lock = threading.Lock()
        self.index = 0
        self.counts = {"invoke": 0, "ok": 0, "fail": 0, "info": 0}
        self.ok_by_f: dict[str, int] = {}  # client operations completed ok, by f

    def record(self, process, type: str, f: str, key=None, value=None, node=None,
               error: str | None = None) -> dict:
        with self._lock:
            row = {"index": self.index, "time": time.monotonic_ns() - self._t0, "process": process,
                   "type": type, "f": f, "key": key, "value": value, "node": node}
            if error is not None:
                row["error"] = error
            line = (json.dumps(row) + "\n").encode()
            done = self._f.write(line)
            while done < len(line):  # a regular file takes it whole unless the disk is full
                done += self._f.write(line[done:])
            self.index += 1
            if process != "nemesis":
                self.counts[type] += 1
                if type == "ok":
                    self.ok_by_f[f] = self.ok_by_f.get(f, 0) + 1
            return row

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()
