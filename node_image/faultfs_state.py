"""faultfs without FUSE: the page cache of what each file holds beyond its backing file
(:class:`UnsyncedFile`), the fault rules (:class:`Faults`) and the state they make up
(:class:`FaultState`), tested on their own (tests/node/test_faultfs.py)."""
from __future__ import annotations

import errno
import fnmatch
import os
import random
import logging
from dataclasses import dataclass, field

PAGE = 4096
OPS = ("read", "write", "fsync")
logger = logging.getLogger("chaoskraft.faultfs")


class UnsyncedFile:
    """What one file holds beyond its backing file: the pages written since its last fsync.

    ``size`` is the file's size as the node sees it; ``valid`` is how much of the backing
    file is still part of it (a truncation below it cuts it); ``pages`` maps a page index to
    the page's whole content. Reads lay the pages over the backing file; bytes past
    ``valid`` that no page holds read as zeros."""

    __slots__ = ("size", "valid", "pages")

    def __init__(self, backing_size: int) -> None:
        self.size = self.valid = backing_size
        self.pages: dict[int, bytearray] = {}

    def _backing(self, fd: int, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos`` as the backing file gives them, zeros past ``valid``."""
        have = max(0, min(n, self.valid - pos))
        data = os.pread(fd, have, pos) if have else b""
        return data + bytes(n - len(data))

    def _page(self, fd: int, idx: int) -> bytearray:
        page = self.pages.get(idx)
        if page is None:
            page = self.pages[idx] = bytearray(self._backing(fd, idx * PAGE, PAGE))
        return page

    def read(self, fd: int, pos: int, n: int) -> bytes:
        end = min(pos + n, self.size)
        if end <= pos:
            return b""
        out = bytearray(self._backing(fd, pos, end - pos))
        for idx in range(pos // PAGE, (end - 1) // PAGE + 1):
            page = self.pages.get(idx)
            if page is None:
                continue
            lo, hi = max(pos, idx * PAGE), min(end, (idx + 1) * PAGE)
            out[lo - pos:hi - pos] = page[lo - idx * PAGE:hi - idx * PAGE]
        return bytes(out)

    def write(self, fd: int, pos: int, data: bytes) -> int:
        end = pos + len(data)
        for idx in range(pos // PAGE, (end - 1) // PAGE + 1 if data else pos // PAGE):
            page = self._page(fd, idx)
            lo, hi = max(pos, idx * PAGE), min(end, (idx + 1) * PAGE)
            page[lo - idx * PAGE:hi - idx * PAGE] = data[lo - pos:hi - pos]
        self.size = max(self.size, end)
        return len(data)

    def truncate(self, size: int) -> None:
        if size < self.size:
            for idx in [i for i in self.pages if i * PAGE >= size]:
                del self.pages[idx]
            page = self.pages.get(size // PAGE)
            if page is not None:
                page[size % PAGE:] = bytes(PAGE - size % PAGE)
            self.valid = min(self.valid, size)
        self.size = size

    def unsynced_bytes(self) -> int:
        return len(self.pages) * PAGE + (1 if self.valid < self.size else 0)

    def flush(self, fd: int, pages: list[int] | None = None) -> None:
        """Write the file (or, for a torn write, only ``pages``) to the backing file."""
        if pages is None:
            os.ftruncate(fd, self.valid)  # what was cut off reads as zeros when regrown
            os.ftruncate(fd, self.size)
            pages = sorted(self.pages)
        for idx in pages:
            start = idx * PAGE
            chunk = self.pages[idx][:max(0, self.size - start)]
            if chunk:
                os.pwrite(fd, chunk, start)


@dataclass
class Faults:
    """The faults in force: errors on matching files, a full disk, slow fsyncs."""
    errors: list[dict] = field(default_factory=list)  # {"ops": [...], "path": glob, "errno": name}
    full: bool = False
    fsync_delay_ms: int = 0

    @classmethod
    def parse(cls, spec: dict) -> "Faults":
        """From a control request; a bad field raises ValueError naming it."""
        unknown = set(spec) - {"cmd", "name", "errors", "full", "fsync_delay_ms"}
        if unknown:
            raise ValueError(f"unknown field(s) {sorted(unknown)} (known: errors, full, "
                             "fsync_delay_ms)")
        errors = spec.get("errors", [])
        if not isinstance(errors, list):
            raise ValueError(f"errors: {errors!r} is not a list")
        for i, e in enumerate(errors):
            if not isinstance(e, dict) or set(e) - {"ops", "path", "errno"}:
                raise ValueError(f"errors[{i}]: {e!r} is not {{ops, path, errno}}")
            ops = e.get("ops", list(OPS))
            if not isinstance(ops, list) or not ops or any(o not in OPS for o in ops):
                raise ValueError(f"errors[{i}].ops: {ops!r} (known: {', '.join(OPS)})")
            if not isinstance(e.get("path", "*"), str):
                raise ValueError(f"errors[{i}].path: {e['path']!r} is not a glob")
            name = e.get("errno", "EIO")
            if not isinstance(name, str) or not isinstance(getattr(errno, name, None), int):
                raise ValueError(f"errors[{i}].errno: {name!r} is not an errno name")
        delay = spec.get("fsync_delay_ms", 0)
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ValueError(f"fsync_delay_ms: {delay!r} is not a whole number >= 0")
        full = spec.get("full", False)
        if not isinstance(full, bool):
            raise ValueError(f"full: {full!r} is not true or false")
        return cls([{"ops": e.get("ops", list(OPS)), "path": e.get("path", "*"),
                     "errno": e.get("errno", "EIO")} for e in errors], full, delay)

    def error_for(self, op: str, path: str) -> int | None:
        """The errno a call ``op`` on ``path`` (relative to the mount) fails with, or None."""
        for e in self.errors:
            if op in e["ops"] and fnmatch.fnmatchcase(path, e["path"]):
                return getattr(errno, e["errno"])
        if self.full and op in ("write", "create", "fsync"):
            return errno.ENOSPC
        return None

    def as_dict(self) -> dict:
        return {"errors": self.errors, "full": self.full, "fsync_delay_ms": self.fsync_delay_ms}


class FaultState:
    """What the file system and its control socket share: the unsynced files by inode, the
    faults in force by name (each fault package sets and clears its own, so faults of
    several packages hold together), counters. The FUSE operations call ``check`` before
    each data call."""

    def __init__(self, backing: str) -> None:
        self.backing = backing
        self.files: dict[int, UnsyncedFile] = {}
        self.named: dict[str, Faults] = {}
        self.faults = Faults()  # all of ``named`` together
        self.counts = {"injected_errors": 0, "fsyncs": 0, "delayed_fsyncs": 0, "drops": 0}

    def rel(self, path: str) -> str:
        return os.path.relpath(path, self.backing)

    def check(self, op: str, path: str) -> None:
        err = self.faults.error_for(op, self.rel(path))
        if err is not None:
            self.counts["injected_errors"] += 1
            logger.info("%s %s: %s (injected)", op, self.rel(path), errno.errorcode[err])
            raise OSError(err, os.strerror(err), path)

    def drop_unsynced(self, paths: dict[int, str], torn: bool, rng: random.Random) -> dict:
        """Forget every unsynced write; with ``torn`` a random prefix of each file's unsynced
        pages reaches the backing file first. ``paths``: a backing path per inode."""
        dropped, files, kept = 0, 0, 0
        for ino, f in list(self.files.items()):
            files += 1
            dropped += f.unsynced_bytes()
            path = paths.get(ino)
            if torn and f.pages and path is not None:
                order = sorted(f.pages)
                prefix = order[:rng.randint(0, len(order))]
                if prefix:
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        f.flush(fd, prefix)
                    finally:
                        os.close(fd)
                    kept += len(prefix) * PAGE
        self.files.clear()
        self.counts["drops"] += 1
        return {"files": files, "unsynced_bytes": dropped, "torn_bytes_kept": kept}

    def set(self, name: str, faults: Faults | None) -> None:
        if faults is None:
            self.named.pop(name, None)
        else:
            self.named[name] = faults
        self.faults = Faults([e for f in self.named.values() for e in f.errors],
                             any(f.full for f in self.named.values()),
                             max((f.fsync_delay_ms for f in self.named.values()), default=0))

    def sync_all(self, paths: dict[int, str]) -> dict:
        """Write every unsynced file to its backing file and fsync it (a clean shutdown)."""
        files, lost = 0, 0
        for ino, f in list(self.files.items()):
            path = paths.get(ino)
            if path is None:
                lost += 1  # neither open nor named since the kernel forgot it: no path
                continue
            fd = os.open(path, os.O_RDWR)
            try:
                f.flush(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            del self.files[ino]
            files += 1
        return {"files": files, "without_a_path": lost}

    def status(self) -> dict:
        return {**self.faults.as_dict(), "by_name": {k: f.as_dict() for k, f in self.named.items()},
                "unsynced_files": len(self.files),
                "unsynced_bytes": sum(f.unsynced_bytes() for f in self.files.values()),
                **self.counts}
