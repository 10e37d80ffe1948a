"""Node logs: their tracebacks, and the lines around a moment of the history."""
from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def node_logs(run_dir: Path) -> dict[str, list[str]]:
    logs = {}
    for path in sorted((run_dir / "nodes").glob("*/node.log")):
        logs[path.parent.name] = path.read_text(errors="replace").splitlines()
    return logs


def tracebacks(logs: dict[str, list[str]]) -> list[tuple[list[str], int, str]]:
    """Every distinct traceback in the node logs: (nodes, how many times, text)."""
    seen: dict[str, tuple[set, int]] = {}
    for node, lines in logs.items():
        i = 0
        while i < len(lines):
            if lines[i].startswith("Traceback (most recent call last)"):
                j = i + 1
                while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j]):
                    j += 1
                text = "\n".join(lines[i:j + 1])
                nodes, n = seen.get(text, (set(), 0))
                nodes.add(node)
                seen[text] = (nodes, n + 1)
                i = j
            i += 1
    return [(sorted(nodes), n, text) for text, (nodes, n) in seen.items()]


def timed_lines(logs: dict[str, list[str]]) -> list[tuple[float, str, str]]:
    """(wall clock s, node, line) of every timestamped node log line, parsed once."""
    out = []
    for node, lines in logs.items():
        for line in lines:
            m = LOG_TIME.match(line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(
                    tzinfo=timezone.utc).timestamp() + int(m.group(2)) / 1000
                out.append((t, node, line))
    return out


def lines_around(timed: list[tuple[float, str, str]], wall_s: float, span_s: float = 2.0,
                 limit: int = 12) -> list[tuple[str, str]]:
    return [(node, line) for t, node, line in timed if abs(t - wall_s) <= span_s][:limit]
