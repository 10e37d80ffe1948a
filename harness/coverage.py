"""A run's coverage: which of the node events that matter for safety
(``node_image.coverage.EVENTS``) it reached, how often and on which nodes, beside the events
its fault packages intend to cause (``Package.intends``).

The counts come from the node logs a run collected (``nodes/nN/node.log``, in Docker and over
SSH alike: each ``reached <event>: ...`` line is one). An intended event that never came is
reported, not judged: random draws may miss it (DESIGN section 9). What makes a run
``unknown`` is a planned scenario whose state never came (``analyze.missed_scenarios``).
"""
from __future__ import annotations

from pathlib import Path

from nemesis.packages import PACKAGES
from node_image.coverage import DATA_PLANE, EVENTS, count_lines


def node_counts(run_dir: Path) -> dict[int, dict[str, int]]:
    """Node id -> event -> how many times its log says it was reached."""
    out: dict[int, dict[str, int]] = {}
    for path in sorted(Path(run_dir, "nodes").glob("n*/node.log")):
        try:
            node = int(path.parent.name[1:])
        except ValueError:
            continue
        with open(path, errors="replace") as f:
            out[node] = count_lines(f)
    return out


def intended(packages: list[str], partitions: bool) -> dict[str, list[str]]:
    """Package -> the events it intends that the workload can show (one whose data has no
    partitions never shows the data plane's)."""
    out = {}
    for name in packages:
        cls = PACKAGES.get(name) if isinstance(name, str) else None
        if cls is None:
            continue
        out[name] = [e for e in cls.intends if partitions or e not in DATA_PLANE]
    return out


def coverage(run_dir: Path, packages: list[str], partitions: bool,
             workload: tuple[str, list[str]] | None = None) -> dict | None:
    """The coverage section of results.json, or None where no node log was collected.
    ``workload``: (its name, the events its own plan aims at), listed as ``workload NAME``
    beside the packages."""
    per_node = node_counts(run_dir)
    if not per_node:
        return None
    intends = intended(packages, partitions)
    if workload and workload[1]:
        intends[f"workload {workload[0]}"] = list(workload[1])
    return summarise(per_node, intends)


def summarise(per_node: dict[int, dict[str, int]], intends: dict[str, list[str]]) -> dict:
    reached: dict[str, int] = {}
    for counts in per_node.values():
        for event, n in counts.items():
            reached[event] = reached.get(event, 0) + n
    wanted = sorted({e for evs in intends.values() for e in evs}, key=list(EVENTS).index)
    return {
        "reached": {e: reached[e] for e in EVENTS if e in reached},
        "by_node": {str(n): c for n, c in sorted(per_node.items()) if c},
        "intended": intends,
        "intended_not_reached": [e for e in wanted if e not in reached],
    }


def describe(cov: dict) -> str:
    """One line for the harness log."""
    got = ", ".join(f"{e} {n}" for e, n in cov["reached"].items()) or "nothing"
    missing = cov["intended_not_reached"]
    return f"reached {got}" + (f"; intended, never reached: {', '.join(missing)}"
                               if missing else "")
