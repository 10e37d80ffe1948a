"""Scenario scripts as data (etcd-io/raft's and cockroachdb's datadriven tests), shared by
the Raft, controller and broker scenarios.

A script is a sequence of blocks: a command line, ``----``, the output the command must
produce, a blank line. Lines starting with ``#`` between blocks are comments. A runner is
an object with ``run(line) -> str``; a fresh one runs each script from its start.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Protocol


class Runner(Protocol):
    def run(self, line: str) -> str: ...


class Commands:
    """A runner whose commands are methods named in ``COMMANDS`` (name -> function taking
    the positional and key=value arguments), each appending its output lines to ``out``."""
    COMMANDS: dict = {}

    def run(self, line: str) -> str:
        cmd, args, kw = words(line)
        if cmd not in self.COMMANDS:
            raise ValueError(f"unknown command {cmd!r} (known: {', '.join(self.COMMANDS)})")
        self.out: list[str] = []
        self.COMMANDS[cmd](self, args, kw)
        return "\n".join(self.out)


def check(path: Path, make: Callable[[], Runner]) -> None:
    """A script's test: every block prints what it says (with CHAOSKRAFT_REWRITE set, the
    outputs are first written into the script, to be read in the diff)."""
    if os.environ.get("CHAOSKRAFT_REWRITE"):
        rewrite(path, make)
    for line, cmd, want, got in run_script(path, make):
        assert got == want, (f"{path.name}:{line}: {cmd}\n--- expected\n{want}\n"
                             f"--- got\n{got}")


def parse(text: str, path: str) -> list[tuple[int, str, str]]:
    """(line number, command, expected output) for every block of a script."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        start, cmd = i + 1, line
        i += 1
        if i >= len(lines) or lines[i].strip() != "----":
            raise ValueError(f"{path}:{start}: {cmd!r} is not followed by ----")
        i += 1
        out = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i].rstrip())
            i += 1
        blocks.append((start, cmd, "\n".join(out)))
    return blocks


def words(line: str) -> tuple[str, list[str], dict[str, str]]:
    """A command line as (command, positional arguments, key=value arguments)."""
    parts = line.split()
    rest = parts[1:]
    return parts[0], [w for w in rest if "=" not in w], dict(w.split("=", 1) for w in rest
                                                              if "=" in w)


def shown(obj, parts: list[str]) -> str:
    """A message or record as the scripts show it: ``Type(a=1, flag, ...)``."""
    return f"{type(obj).__name__}({', '.join(parts)})"


def add_field(parts: list[str], name: str, v) -> None:
    """A field as the scripts show it: a true flag by its name, a false one not at all,
    anything else as name=value."""
    if isinstance(v, bool):
        if v:
            parts.append(name)
    else:
        parts.append(f"{name}={v}")


def run_script(path: Path, make: Callable[[], Runner]) -> list[tuple[int, str, str, str]]:
    """(line, command, expected, got) for every block, on a fresh runner."""
    runner = make()
    out = []
    for ln, cmd, want in parse(path.read_text(), str(path)):
        try:
            got = runner.run(cmd)
        except ValueError as exc:  # a bad command names its script and line
            raise ValueError(f"{path}:{ln}: {exc}") from None
        out.append((ln, cmd, want, got))
    return out


def rewrite(path: Path, make: Callable[[], Runner]) -> None:
    """Write the outputs the code gives now into the script (after reading every one)."""
    text = path.read_text().splitlines()
    results = run_script(path, make)
    out, i = [], 0
    for ln, cmd, _, got in results:
        while i < ln - 1:
            out.append(text[i])
            i += 1
        out += [text[i], "----"] + (got.splitlines() if got else [])
        i += 2
        while i < len(text) and text[i].strip():
            i += 1
    out += text[i:]
    path.write_text("\n".join(out).rstrip() + "\n")
