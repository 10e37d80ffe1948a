"""SimDisk: an in-memory FileSystem that loses what was not fsynced.

Model (POSIX without the kernel's goodwill):
- every file is an inode with its current bytes and its durable bytes; the
  durable bytes become the current ones on ``fsync(path)``;
- every directory has its current names and its durable names; the durable
  names become the current ones on ``fsync_dir(dir)``;
- ``crash(rng)`` is a power loss: the namespace reverts to the durable
  names and every inode to its durable bytes. If ``torn_write_prob`` is set,
  an inode that was only appended to since its last fsync keeps, with that
  probability, a random prefix of the unsynced tail (a torn write), which
  recovery must detect and cut;
- ``wipe()`` loses the whole disk (a replaced drive).
- ``faults`` (a stored run's disk-error and disk-full steps, ``simulator.twin``): calls
  answer a disk error as faultfs makes the real disk answer it, raised as the node's
  :class:`~node_image.fs.LogDirFailure`, on which the node halts.
- like ext4 with ``auto_da_alloc`` (its default), a file renamed over an
  existing one has its data written when the rename becomes durable, so a
  replace-by-rename without fsync shows the old or the new file after a
  crash, never an empty one.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import random

from node_image.fs import LogDirFailure

# Which faultfs operation each call is (``disk-error``'s ``ops``).
_OPS = {"listdir": "read", "read": "read", "read_at": "read", "size": "read",
        "makedirs": "write", "append": "write", "write": "write", "truncate": "write",
        "rename": "write", "remove": "write", "fsync": "fsync", "fsync_dir": "fsync"}


class _Inode:
    __slots__ = ("data", "durable", "append_only", "flush_on_commit")

    def __init__(self, data: bytes = b"") -> None:
        self.data = bytearray(data)
        self.durable = b""
        self.append_only = True  # nothing but appends since the last fsync
        self.flush_on_commit = False  # renamed over an existing file (ext4 auto_da_alloc)


class SimDisk:
    def __init__(self) -> None:
        self._names: dict[str, _Inode] = {}
        self._durable_names: dict[str, _Inode] = {}
        self._dirs: set[str] = {"/"}
        self.fsyncs = 0
        self.root = "/data"  # what the fault globs are relative to
        self.faults: dict[str, dict] = {}  # package -> faultfs request ({errors}, {full})

    def _fault(self, call: str, path: str) -> None:
        """Raise the disk error a fault in force makes this call answer, if any."""
        rel = path[len(self.root) + 1:] if path.startswith(self.root + "/") else path
        op = _OPS[call]
        for request in self.faults.values():
            if request.get("full") and call in ("append", "write", "makedirs", "fsync",
                                                "fsync_dir"):  # faultfs: writes, creates, fsyncs
                raise LogDirFailure(call, path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
            for e in request.get("errors", ()):
                if op in e["ops"] and fnmatch.fnmatch(rel, e["path"]):
                    code = getattr(errno, e["errno"])
                    raise LogDirFailure(call, path, OSError(code, os.strerror(code)))

    # -------------------------------------------------------------- faults

    def crash(self, rng: random.Random, torn_write_prob: float = 0.0) -> None:
        inodes = {id(i): i for i in self._durable_names.values()}
        for inode in inodes.values():
            extra = len(inode.data) - len(inode.durable)
            keep = 0
            if (torn_write_prob and inode.append_only and extra > 0
                    and rng.random() < torn_write_prob):
                keep = rng.randrange(extra + 1)
            tail = bytes(inode.data[len(inode.durable):len(inode.durable) + keep])
            inode.data = bytearray(inode.durable + tail)
            inode.durable = bytes(inode.data)
            inode.append_only = True
        self._names = dict(self._durable_names)

    def wipe(self) -> None:
        self._names.clear()
        self._durable_names.clear()
        self._dirs = {"/"}

    def corrupt(self, path: str, position: int, xor: int = 0x01) -> None:
        """Flip bits of one byte, durably (for recovery tests)."""
        inode = self._inode(path)
        inode.data[position] ^= xor
        inode.durable = bytes(inode.data)

    # ---------------------------------------------------------- FileSystem

    def _inode(self, path: str) -> _Inode:
        try:
            return self._names[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def exists(self, path: str) -> bool:
        return path in self._names or path in self._dirs

    def listdir(self, path: str) -> list[str]:
        if self.faults:
            self._fault("listdir", path)
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self._names
                      if p.startswith(prefix) and "/" not in p[len(prefix):])

    def subdirs(self, path: str) -> list[str]:
        """The directories directly under ``path``."""
        prefix = path.rstrip("/") + "/"
        return sorted({d[len(prefix):].split("/")[0] for d in self._dirs
                       if d.startswith(prefix) and len(d) > len(prefix)})

    def makedirs(self, path: str) -> None:
        if self.faults:
            self._fault("makedirs", path)
        while path not in ("", "/"):
            self._dirs.add(path)
            path = os.path.dirname(path)

    def read(self, path: str) -> bytes:
        if self.faults:
            self._fault("read", path)
        return bytes(self._inode(path).data)

    def read_at(self, path: str, pos: int, size: int) -> bytes:
        if self.faults:
            self._fault("read_at", path)
        return bytes(self._inode(path).data[pos:pos + size])

    def size(self, path: str) -> int:
        if self.faults:
            self._fault("size", path)
        return len(self._inode(path).data)

    def append(self, path: str, data: bytes) -> None:
        if self.faults:
            self._fault("append", path)
        inode = self._names.get(path)
        if inode is None:
            inode = self._names[path] = _Inode()
        inode.data += data

    def write(self, path: str, data: bytes) -> None:
        if self.faults:
            self._fault("write", path)
        inode = _Inode(data)
        inode.append_only = not data
        self._names[path] = inode

    def truncate(self, path: str, size: int) -> None:
        if self.faults:
            self._fault("truncate", path)
        inode = self._inode(path)
        if size < len(inode.data):
            del inode.data[size:]
            inode.append_only = False

    def fsync(self, path: str) -> None:
        if self.faults:
            self._fault("fsync", path)
        inode = self._inode(path)
        inode.durable = bytes(inode.data)
        inode.append_only = True
        self.fsyncs += 1

    def fsync_dir(self, path: str) -> None:
        if self.faults:
            self._fault("fsync_dir", path)
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self._durable_names if p.startswith(prefix)
                  and "/" not in p[len(prefix):]]:
            if p not in self._names:
                del self._durable_names[p]
        for p, inode in self._names.items():
            if p.startswith(prefix) and "/" not in p[len(prefix):]:
                self._durable_names[p] = inode
                if inode.flush_on_commit:
                    inode.durable = bytes(inode.data)
                    inode.flush_on_commit = False

    def rename(self, src: str, dst: str) -> None:
        if self.faults:
            self._fault("rename", src)
        inode = self._inode(src)
        if dst in self._names:
            # ext4 (auto_da_alloc): a rename over an existing file writes the new file's
            # data before the rename commits, so a crash shows the old or the new file.
            inode.flush_on_commit = True
        self._names[dst] = inode
        del self._names[src]

    def remove(self, path: str) -> None:
        if self.faults:
            self._fault("remove", path)
        self._inode(path)
        del self._names[path]
