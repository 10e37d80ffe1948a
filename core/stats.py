"""What every checker's run shares: the history's totals (the verdict words are
core.verdict's)."""
from __future__ import annotations

import json
from pathlib import Path

FATAL = "fatal: "  # how a client error after which the client cannot go on is recorded


class Stats:
    """The history's totals, a row at a time: client rows by type, and the faults begun."""

    def __init__(self) -> None:
        self.rows = 0
        self.counts = dict.fromkeys(("invoke", "ok", "fail", "info"), 0)
        self.faults: list[dict] = []
        # client errors after which the client could not go on (a producer's fatal error,
        # recorded as "fatal: NAME"), by name
        self.fatal: dict[str, int] = {}

    def add(self, r: dict) -> None:
        self.rows += 1
        if r.get("process") == "nemesis":
            if r.get("type") == "invoke":
                self.faults.append({"f": r["f"], "value": r.get("value")})
        elif r.get("type") in self.counts:
            self.counts[r["type"]] += 1
            error = r.get("error")
            if isinstance(error, str) and FATAL in error:
                name = error.split(FATAL, 1)[1].split(";")[0].strip()
                self.fatal[name] = self.fatal.get(name, 0) + 1

    def result(self) -> dict:
        return {"rows": self.rows, **self.counts, "faults": self.faults,
                "fatal_errors": self.fatal}


def history_stats(rows) -> dict:
    s = Stats()
    for r in rows:
        s.add(r)
    return s.result()


def run_history(run_dir: Path) -> tuple[list[dict], int]:
    """A stored run's history rows and the time of its first client operation."""
    rows = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return rows, next((r["time"] for r in rows if r["process"] != "nemesis"), 0)
