"""What each Docker test costs, so that the two Docker streams of a CI run (conftest's
``_docker_streams``) end together: a table of seconds per test (``docker_costs.json``, from
one CI run's JUnit report), and the split of the Docker tests' units between the streams,
longest first, each to the stream with the least so far.

Refresh the table after Docker tests are added or change much:

    CI=true PYTEST_ADDOPTS=--junitxml=/tmp/junit.xml make test
    .venv/bin/python tests/docker_costs.py /tmp/junit.xml

A test the table does not name counts as its median.
"""
from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TABLE = Path(__file__).with_name("docker_costs.json")


def load(path: Path = TABLE) -> dict[str, float]:
    """The table: test node id -> seconds (setup, call and teardown)."""
    if not path.exists():
        return {}
    try:
        table = json.loads(path.read_text())["seconds"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a table of Docker test costs ({exc})") from None
    bad = [k for k, v in table.items() if not isinstance(v, (int, float)) or v < 0]
    if bad:
        raise ValueError(f"{path}: 'seconds' of {bad[0]!r} is not a number of seconds")
    return table


def split(units: dict[str, list[str]], costs: dict[str, float], streams: int) -> dict[str, int]:
    """``units``: a name -> the node ids that must run together. Each unit's stream: the
    costliest unit first, each to the stream with the least cost so far (ties: the lower
    stream, then the unit's name, so the split is the same on every worker)."""
    default = statistics.median(costs.values()) if costs else 1.0

    def cost(ids):
        return sum(costs.get(i, default) for i in ids)
    load_ = [0.0] * streams
    out = {}
    for name in sorted(units, key=lambda n: (-cost(units[n]), n)):
        stream = load_.index(min(load_))
        load_[stream] += cost(units[name])
        out[name] = stream
    return out


def node_id(classname: str, name: str, root: Path) -> str:
    """A JUnit test case's pytest node id: the longest prefix of ``classname`` that is a
    file under ``root``, then any class, then the name."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (root / path).exists():
            return "::".join([path, *parts[n:], name])
    raise ValueError(f"test case {classname}::{name}: no file {classname!r} names under {root}")


def from_junit(report: Path, root: Path, docker_ids: set[str] | None = None) -> dict:
    """Seconds per test node id from a JUnit report (``docker_ids``: only those)."""
    out = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = case.get("name", "")
        if name.rfind("@") > name.rfind("]"):  # pytest-xdist's "@group" suffix
            name = name[:name.rfind("@")]
        nid = node_id(case.get("classname", ""), name, root)
        if docker_ids is None or nid in docker_ids:
            out[nid] = round(float(case.get("time", "0")), 1)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    import subprocess
    root = TABLE.parent.parent
    listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m",
                             "docker"], cwd=root, capture_output=True, text=True, check=True)
    ids = {line for line in listed.stdout.splitlines() if "::" in line}
    seconds = from_junit(Path(argv[0]), root, ids)
    TABLE.write_text(json.dumps({"about": "seconds per Docker test in one CI run "
                                          "(tests/docker_costs.py)",
                                 "seconds": dict(sorted(seconds.items()))}, indent=1) + "\n")
    print(f"{TABLE}: {len(seconds)} Docker tests, {sum(seconds.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
