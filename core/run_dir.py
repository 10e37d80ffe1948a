"""A run directory, read and written in one place.

What a run keeps beside its history (``history.jsonl``, streamed by ``harness.history``,
and the node logs under ``nodes/``):

- ``config.yaml``: the resolved configuration, seed included (a YAML mapping);
- ``plan.json``: the fault schedule, a list of steps;
- ``generated.jsonl``: what the generator handed each process, one JSON object a line;
- ``faults.json``: what became of each planned step (a list), written as the run goes;
- ``liveness.json``: what the liveness phase found still stuck (a JSON object);
- ``history-start.json``: the wall clock at the history's time 0;
- ``results.json``: the analysis (a JSON object).

Every reader names the file, and the line and column where it can, of anything missing or
malformed (:class:`RunDirError`); every writer replaces its file whole (a temporary file
renamed over it), so a reader never sees half of one.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

import yaml

CONFIG, RESULTS, PLAN = "config.yaml", "results.json", "plan.json"
GENERATED, FAULTS, HISTORY = "generated.jsonl", "faults.json", "history.jsonl"
LIVENESS, HISTORY_START = "liveness.json", "history-start.json"


class RunDirError(ValueError):
    """A file of a run directory is missing or malformed; the message names it."""


class RunDir:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def file(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        return (self.path / name).exists()

    def is_analysed_run(self) -> bool:
        """A run directory whose run was analysed: its config and its results are there."""
        return self.has(CONFIG) and self.has(RESULTS)

    # ------------------------------------------------------------------ reading

    def _text(self, name: str) -> str:
        path = self.path / name
        try:
            return path.read_text()
        except FileNotFoundError:
            raise RunDirError(f"{path}: missing") from None
        except OSError as exc:
            raise RunDirError(f"{path}: cannot read: {exc.strerror}") from None

    def config(self) -> dict:
        """``config.yaml`` as a mapping."""
        path = self.path / CONFIG
        try:
            values = yaml.safe_load(self._text(CONFIG))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            raise RunDirError(f"{path}{where}: not YAML: "
                              f"{getattr(exc, 'problem', None) or exc}") from None
        if not isinstance(values, dict):
            raise RunDirError(f"{path}: not a run's configuration (a YAML mapping)")
        return values

    def _json(self, name: str, kind: type):
        path = self.path / name
        try:
            value = json.loads(self._text(name))
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
        if not isinstance(value, kind):
            raise RunDirError(f"{path}: expected a JSON {'object' if kind is dict else 'list'}, "
                              f"found {type(value).__name__}")
        return value

    def results(self) -> dict:
        return self._json(RESULTS, dict)

    def plan(self) -> list:
        return self._json(PLAN, list)

    def faults(self) -> list:
        return self._json(FAULTS, list)

    def liveness(self) -> dict:
        return self._json(LIVENESS, dict)

    def history_start(self) -> dict:
        return self._json(HISTORY_START, dict)

    def generated(self) -> Iterator[tuple[int, dict]]:
        """(line number, row) of ``generated.jsonl``."""
        yield from self._lines(GENERATED)

    def history_rows(self) -> Iterator[tuple[int, dict]]:
        """(line number, row) of ``history.jsonl``."""
        yield from self._lines(HISTORY)

    def _lines(self, name: str) -> Iterator[tuple[int, dict]]:
        path = self.path / name
        try:
            f = open(path)
        except FileNotFoundError:
            raise RunDirError(f"{path}: missing") from None
        except OSError as exc:
            raise RunDirError(f"{path}: cannot read: {exc.strerror}") from None
        with f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RunDirError(f"{path}:{n}:{exc.colno}: not JSON: {exc.msg}") from None
                if not isinstance(row, dict):
                    raise RunDirError(f"{path}:{n}: expected a JSON object, found "
                                      f"{type(row).__name__}")
                yield n, row

    # ------------------------------------------------------------------ writing

    def _replace(self, name: str, text: str) -> Path:
        path = self.path / name
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
        return path

    def write_config(self, values: dict) -> Path:
        return self._replace(CONFIG, yaml.safe_dump(values, sort_keys=False))

    def write_results(self, results: dict) -> Path:
        return self._replace(RESULTS, json.dumps(results, indent=2, default=str))

    def write_plan(self, steps: list) -> Path:
        return self._replace(PLAN, json.dumps(steps, indent=1) + "\n")

    def write_faults(self, outcomes: list) -> Path:
        return self._replace(FAULTS, json.dumps(outcomes, indent=1) + "\n")

    def write_liveness(self, found: dict) -> Path:
        return self._replace(LIVENESS, json.dumps(found, indent=1) + "\n")

    def write_history_start(self, start: dict) -> Path:
        return self._replace(HISTORY_START, json.dumps(start) + "\n")

    def write_generated(self, rows: Iterable[dict]) -> Path:
        return self._replace(GENERATED, "".join(json.dumps(r) + "\n" for r in rows))
