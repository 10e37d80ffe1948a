"""A pytest plugin that runs a campaign matrix's cells as tests.

``chaoskraft campaign FILE`` calls pytest with this plugin and the file as
the only path; each cell (workload x nemesis x seed) is one test item, run
on its own cluster and network, so ``-n`` from pytest-xdist runs cells in
parallel. A cell passes when its verdict is valid; an invalid or unknown
verdict fails it with the anomalies and the run directory. Each report
carries the cell's verdict, anomalies and run directory as user properties
(they land in the JUnit XML), and the terminal summary prints one table row
per cell and saves the table next to the runs.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from core.run_dir import RunDir

from .campaign_matrix import load_matrix


def pytest_addoption(parser):
    group = parser.getgroup("chaoskraft")
    group.addoption("--chaoskraft-results", default=None,
                    help="results directory for the cells' runs (default: the file's)")
    group.addoption("--chaoskraft-name", default="campaign",
                    help="the campaign's name (its summary is <results>/<name>-summary.txt)")


def pytest_collect_file(parent, file_path: Path):
    if file_path.suffix in (".yaml", ".yml"):
        return CampaignFile.from_parent(parent, path=file_path)
    return None


class CellFailed(Exception):
    pass


class CampaignFile(pytest.File):
    def collect(self):
        for cell in load_matrix(self.path).cells:
            yield CellItem.from_parent(self, name=cell.id, cell=cell)


class CellItem(pytest.Item):
    def __init__(self, *, cell, **kw) -> None:
        super().__init__(**kw)
        self.cell = cell

    def runtest(self) -> None:
        from .reproduce import anomaly_classes
        from .runner import run
        from .store import new_run_dir
        cfg = self.cell.config
        root = self.config.getoption("--chaoskraft-results") or cfg.results_dir
        cfg.results_dir = root
        run_dir = new_run_dir(Path(root), cfg.test, cfg.seed)
        self.user_properties.append(("run_dir", str(run_dir)))
        with open(run_dir / "progress.log", "w") as progress:
            code = run(cfg, stream=progress, run_dir=run_dir)
        if code == 130:
            raise KeyboardInterrupt
        results = RunDir(run_dir).results()
        classes = anomaly_classes(results)
        self.user_properties += [("verdict", results["verdict"]),
                                 ("anomalies", ",".join(classes))]
        if results["valid"] is not True:
            raise CellFailed(f"{self.cell.id}: {results['verdict']}"
                             + (f" ({', '.join(classes)})" if classes else "")
                             + f"; run directory {run_dir}")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CellFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        c = self.cell
        return self.path, None, f"{c.id} (workload {c.workload}, nemesis {c.nemesis}, seed {c.seed})"


_REPORTS: list = []


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _REPORTS.append(report)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _REPORTS:
        return
    rows = []
    for r in sorted(_REPORTS, key=lambda r: r.nodeid):
        props = dict(r.user_properties)
        verdict = props.get("verdict") or ("error" if r.outcome == "failed" else r.outcome)
        rows.append((r.nodeid.split("::")[-1], "ok" if r.outcome == "passed" else "FAILED",
                     verdict, props.get("anomalies", ""), props.get("run_dir", "")))
    width = max(len(r[0]) for r in rows)
    lines = [f"{'cell':<{width}}  {'result':<6}  {'verdict':<8}  anomalies / run directory"]
    lines += [f"{c:<{width}}  {res:<6}  {v:<8}  {a + '  ' if a else ''}{d}"
              for c, res, v, a, d in rows]
    failed = sum(1 for r in rows if r[1] != "ok")
    lines.append(f"{len(rows)} cells, {failed} not valid")
    terminalreporter.write_sep("=", "chaoskraft campaign")
    for line in lines:
        terminalreporter.write_line(line)
    out = config.getoption("--chaoskraft-results")
    if out:
        path = Path(out) / f"{config.getoption('--chaoskraft-name')}-summary.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        terminalreporter.write_line(f"summary: {path}")
