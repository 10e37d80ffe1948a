"""The file-system seam between the storage layer and the operating system.

Storage code (log segments, snapshots, quorum-state, meta.properties) does
all of its I/O through a :class:`FileSystem`. Two implementations exist:

- :class:`RealFileSystem` (here): plain POSIX calls, ``fsync`` for real.
- :class:`PowerLossFileSystem` (here): real files, but data not yet
  fsynced stays in the process's memory, so killing the process loses it
  as a power loss would (the power-loss nemesis with ``via: process``; by default
  it drops un-fsynced data from outside the process, through ``node_image.faultfs``).
- ``simulator.disk.SimDisk``: in memory, keeps for every file what has
  been fsynced apart from what has only been written, and on a simulated
  power loss throws the un-fsynced part away (optionally keeping a torn
  prefix of it).

A disk error (EIO, ENOSPC, EDQUOT, EROFS) from the real file systems is
raised as :class:`LogDirFailure` naming the call and the path (Kafka's
``KafkaStorageException``); other ``OSError`` errors (a missing file) stay what
they are.

Rules: a write is not durable until ``fsync(path)``; a created, renamed or
removed name is not durable until ``fsync_dir(dir)``. Callers that need
durability (quorum-state, flushed log data) must call both as appropriate.
"""
from __future__ import annotations

import errno
import functools
import os
from typing import Protocol

# What a failing or full disk answers: the log directory has failed.
DISK_ERRORS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS})
_CALLS = ("listdir", "makedirs", "read", "read_at", "size", "append", "write", "truncate",
          "fsync", "fsync_dir", "rename", "remove")


class LogDirFailure(Exception):
    """A call on the log directory failed with a disk error. Not an ``OSError``: nothing that
    handles a lost connection may swallow it."""

    def __init__(self, call: str, path: str, error: OSError) -> None:
        self.call, self.path, self.errno = call, path, error.errno
        name = errno.errorcode.get(error.errno, str(error.errno))
        super().__init__(f"{call} {path}: {name} ({error.strerror})")


def disk_errors_fail_the_log_dir(cls):
    """Class decorator: each file-system call of ``cls`` raises :class:`LogDirFailure` where
    the operating system answered a disk error."""
    for call in _CALLS:
        if call not in cls.__dict__:
            continue
        f = cls.__dict__[call]

        @functools.wraps(f)
        def wrapped(self, path, *args, _f=f, _call=call):
            try:
                return _f(self, path, *args)
            except OSError as exc:
                if exc.errno in DISK_ERRORS:
                    raise LogDirFailure(_call, path, exc) from exc
                raise
        setattr(cls, call, wrapped)
    return cls


class FileSystem(Protocol):
    def exists(self, path: str) -> bool: ...
    def listdir(self, path: str) -> list[str]: ...
    def makedirs(self, path: str) -> None: ...
    def read(self, path: str) -> bytes: ...
    def read_at(self, path: str, pos: int, size: int) -> bytes: ...
    def size(self, path: str) -> int: ...
    def append(self, path: str, data: bytes) -> None: ...
    def write(self, path: str, data: bytes) -> None: ...
    def truncate(self, path: str, size: int) -> None: ...
    def fsync(self, path: str) -> None: ...
    def fsync_dir(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def remove(self, path: str) -> None: ...


def write_durably(fs: FileSystem, path: str, data: bytes) -> None:
    """Replace ``path`` atomically: temp file, fsync, rename, fsync the directory."""
    tmp = path + ".tmp"
    fs.write(tmp, data)
    fs.fsync(tmp)
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(path) or ".")


@disk_errors_fail_the_log_dir
class RealFileSystem:
    """POSIX files. Append handles are cached so a segment is not reopened per batch."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def _fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._fds[path] = fd
        return fd

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self._drop(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def read_at(self, path: str, pos: int, size: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(pos)
            return f.read(size)

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def append(self, path: str, data: bytes) -> None:
        fd = self._fd(path)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def write(self, path: str, data: bytes) -> None:
        self._drop(path)
        with open(path, "wb") as f:
            f.write(data)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def fsync(self, path: str) -> None:
        fd = self._fds.get(path)
        if fd is not None:
            os.fsync(fd)
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        self._drop(src)
        self._drop(dst)
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        self._drop(path)
        os.remove(path)


class _Pending:
    """A file's logical content: the first ``keep`` bytes on disk, then ``extra`` in memory."""
    __slots__ = ("keep", "extra")

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.extra = bytearray()


@disk_errors_fail_the_log_dir
class PowerLossFileSystem(RealFileSystem):
    """Real files whose un-fsynced data lives only in this process's memory.

    With it, killing the node process loses exactly what a power loss would
    lose: every write, append or truncation since the file's last ``fsync``
    (the kernel's page cache would otherwise keep it). Names (create, rename,
    remove) reach the disk at once; data reaches it at ``fsync``. Reads see
    the logical content, pending data included. Enabled by the node property
    ``chaoskraft.power.loss.enable=true`` (the power-loss nemesis needs it).
    """

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, _Pending] = {}

    def _entry(self, path: str) -> _Pending:
        p = self._pending.get(path)
        if p is None:
            if not os.path.exists(path):
                super().write(path, b"")  # the name exists at once, the data does not
            p = self._pending[path] = _Pending(os.path.getsize(path))
        return p

    def size(self, path: str) -> int:
        p = self._pending.get(path)
        return super().size(path) if p is None else p.keep + len(p.extra)

    def read_at(self, path: str, pos: int, size: int) -> bytes:
        p = self._pending.get(path)
        if p is None:
            return super().read_at(path, pos, size)
        end = pos + size
        out = bytearray()
        if pos < p.keep:
            out += super().read_at(path, pos, min(end, p.keep) - pos)
        if end > p.keep:
            start = max(pos, p.keep) - p.keep
            out += p.extra[start:end - p.keep]
        return bytes(out)

    def read(self, path: str) -> bytes:
        if path not in self._pending:
            return super().read(path)
        return self.read_at(path, 0, self.size(path))

    def append(self, path: str, data: bytes) -> None:
        self._entry(path).extra += data

    def write(self, path: str, data: bytes) -> None:
        p = self._entry(path)
        p.keep = 0
        p.extra = bytearray(data)

    def truncate(self, path: str, size: int) -> None:
        p = self._entry(path)
        if size <= p.keep:
            p.keep = size
            p.extra = bytearray()
        else:
            del p.extra[size - p.keep:]

    def fsync(self, path: str) -> None:
        p = self._pending.pop(path, None)
        if p is not None:
            if os.path.getsize(path) != p.keep:
                self._drop(path)
                os.truncate(path, p.keep)
            if p.extra:
                super().append(path, bytes(p.extra))
        super().fsync(path)

    def rename(self, src: str, dst: str) -> None:
        super().rename(src, dst)
        p = self._pending.pop(src, None)
        self._pending.pop(dst, None)
        if p is not None:
            self._pending[dst] = p

    def remove(self, path: str) -> None:
        self._pending.pop(path, None)
        super().remove(path)
