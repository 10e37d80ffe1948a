"""faultfs: a FUSE file system under the node's data directory that fails and forgets from
outside the node process (lazyfs and CharybdeFS are the models).

    python3 -m node_image.faultfs mount BACKING MOUNTPOINT --control SOCKET
    python3 -m node_image.faultfs ctl SOCKET '{"cmd": "status"}'

The node sees an ordinary directory; every call it makes there comes through this
process, which keeps the data it has not fsynced in its own memory (a page cache, as the
kernel's) and writes it to BACKING at ``fsync``. So:

- **power loss** (``drop-unsynced``): the node is killed, then everything written since
  each file's last fsync is thrown away (with ``torn``, a random prefix of each file's
  unsynced pages reaches the disk first, as a torn write). Names (create, rename, unlink,
  mkdir) reach BACKING at once, data at fsync, as with the node's in-process seam
  (``node_image.fs.PowerLossFileSystem``), which this makes unnecessary.
- **disk errors** (``set``): EIO (or any errno) on the reads, writes or fsyncs of files
  matching a glob; a full disk (ENOSPC on writes, creates and fsyncs, and no free blocks in
  statfs); slow fsyncs (each delayed by a number of milliseconds, other calls going on).

Files are opened with ``direct_io``: the kernel keeps no pages of its own, so what the node
reads after a drop is what the disk holds. The control socket takes one JSON request per
connection and answers one JSON line.

The page cache (:class:`UnsyncedFile`) and the fault rules (:class:`Faults`) do no FUSE and
are tested on their own (tests/node/test_faultfs.py); ``pyfuse3`` is imported only to mount.
"""
from __future__ import annotations

import errno
import fnmatch
import json
import logging
import os
import random
import signal
import socket
import sys
import time
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


# ------------------------------------------------------------------------ FUSE

def _operations(state: FaultState):
    import pyfuse3
    import trio
    from pyfuse3 import FUSEError

    def fuse_errors(f):
        async def wrapped(*args):
            try:
                return await f(*args)
            except OSError as exc:
                raise FUSEError(exc.errno or errno.EIO) from None
        wrapped.__name__ = f.__name__
        return wrapped

    class Operations(pyfuse3.Operations):
        """A pass-through of BACKING by inode (as pyfuse3's passthroughfs example), with the
        data of open files going through ``state``'s page cache."""

        def __init__(self) -> None:
            super().__init__()
            self.paths: dict[int, str] = {pyfuse3.ROOT_INODE: state.backing}
            self.fds: dict[int, int] = {}  # inode -> backing fd while open
            self.opens: dict[int, int] = {}  # inode -> open count

        def _path(self, inode: int) -> str:
            try:
                return self.paths[inode]
            except KeyError:
                raise FUSEError(errno.ENOENT) from None

        def _attr(self, path: str) -> "pyfuse3.EntryAttributes":
            st = os.lstat(path)
            entry = pyfuse3.EntryAttributes()
            for a in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size",
                      "st_atime_ns", "st_mtime_ns", "st_ctime_ns"):
                setattr(entry, a, getattr(st, a))
            ino = st.st_ino if path != state.backing else pyfuse3.ROOT_INODE
            entry.st_ino = ino
            f = state.files.get(ino)
            if f is not None:
                entry.st_size = f.size
            entry.generation = 0
            entry.entry_timeout = 0
            entry.attr_timeout = 0
            entry.st_blksize = PAGE
            entry.st_blocks = (entry.st_size + 511) // 512
            return entry

        def _child(self, inode_p: int, name: bytes) -> str:
            return os.path.join(self._path(inode_p), os.fsdecode(name))

        def _known(self, path: str) -> "pyfuse3.EntryAttributes":
            attr = self._attr(path)
            self.paths[attr.st_ino] = path
            return attr

        @fuse_errors
        async def lookup(self, inode_p, name, ctx=None):
            return self._known(self._child(inode_p, name))

        @fuse_errors
        async def getattr(self, inode, ctx=None):
            return self._attr(self._path(inode))

        async def forget(self, inode_list):
            # The kernel forgets a name; a file's unsynced pages stay (keyed by inode) until
            # its fsync, its unlink or a power loss, and so does the path a torn write needs.
            for inode, _ in inode_list:
                if (inode != pyfuse3.ROOT_INODE and inode not in self.fds
                        and inode not in state.files):
                    self.paths.pop(inode, None)

        @fuse_errors
        async def setattr(self, inode, attr, fields, fh, ctx):
            path = self._path(inode)
            if fields.update_size:
                state.check("write", path)
                f = self._unsynced(inode, path)
                f.truncate(attr.st_size)
            if fields.update_mode:
                os.chmod(path, attr.st_mode & 0o7777)
            if fields.update_mtime or fields.update_atime:
                st = os.lstat(path)
                os.utime(path, ns=(attr.st_atime_ns if fields.update_atime else st.st_atime_ns,
                                   attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns))
            return self._attr(path)

        def _unsynced(self, inode: int, path: str) -> UnsyncedFile:
            f = state.files.get(inode)
            if f is None:
                f = state.files[inode] = UnsyncedFile(os.path.getsize(path))
            return f

        async def opendir(self, inode, ctx):
            return inode

        @fuse_errors
        async def readdir(self, inode, start_id, token):
            path = self._path(inode)
            entries = []
            for name in os.listdir(path):
                try:
                    attr = self._attr(os.path.join(path, name))
                except FileNotFoundError:
                    continue
                entries.append((attr.st_ino, name, attr))
            for ino, name, attr in sorted(entries):
                if ino <= start_id:
                    continue
                if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, ino):
                    break
                self.paths[ino] = os.path.join(path, name)

        async def releasedir(self, fh):
            pass

        @fuse_errors
        async def fsyncdir(self, fh, datasync):
            path = self._path(fh)
            state.check("fsync", path)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        @fuse_errors
        async def mkdir(self, inode_p, name, mode, ctx):
            path = self._child(inode_p, name)
            state.check("create", path)
            os.mkdir(path, mode & 0o7777)
            return self._known(path)

        @fuse_errors
        async def rmdir(self, inode_p, name, ctx):
            os.rmdir(self._child(inode_p, name))

        @fuse_errors
        async def unlink(self, inode_p, name, ctx):
            path = self._child(inode_p, name)
            ino = os.lstat(path).st_ino
            os.unlink(path)
            if ino not in self.fds:
                state.files.pop(ino, None)
                self.paths.pop(ino, None)

        @fuse_errors
        async def rename(self, inode_p_old, name_old, inode_p_new, name_new, flags, ctx):
            if flags != 0:
                raise FUSEError(errno.EINVAL)
            old, new = self._child(inode_p_old, name_old), self._child(inode_p_new, name_new)
            try:
                replaced = os.lstat(new).st_ino
            except FileNotFoundError:
                replaced = None
            os.rename(old, new)
            ino = os.lstat(new).st_ino
            if replaced is not None and replaced != ino and replaced not in self.fds:
                state.files.pop(replaced, None)
                self.paths.pop(replaced, None)
            self.paths[ino] = new

        @fuse_errors
        async def statfs(self, ctx):
            st = os.statvfs(state.backing)
            out = pyfuse3.StatvfsData()
            for a in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files",
                      "f_ffree", "f_favail", "f_namemax"):
                setattr(out, a, getattr(st, a))
            if state.faults.full:
                out.f_bfree = out.f_bavail = 0
            return out

        def _opened(self, inode: int, path: str, flags: int) -> "pyfuse3.FileInfo":
            if inode not in self.fds:
                self.fds[inode] = os.open(path, os.O_RDWR)
                self.opens[inode] = 0
            self.opens[inode] += 1
            if flags & os.O_TRUNC:
                self._unsynced(inode, path).truncate(0)
            return pyfuse3.FileInfo(fh=inode, direct_io=True)

        @fuse_errors
        async def open(self, inode, flags, ctx):
            path = self._path(inode)
            if flags & os.O_TRUNC:
                state.check("write", path)
            return self._opened(inode, path, flags)

        @fuse_errors
        async def create(self, inode_p, name, mode, flags, ctx):
            path = self._child(inode_p, name)
            state.check("create", path)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY | (flags & os.O_EXCL), mode & ~ctx.umask & 0o7777))
            attr = self._known(path)
            return self._opened(attr.st_ino, path, flags), self._attr(path)

        @fuse_errors
        async def read(self, fh, off, size):
            path = self._path(fh)
            state.check("read", path)
            f = state.files.get(fh)
            if f is None:
                return os.pread(self.fds[fh], size, off)
            return f.read(self.fds[fh], off, size)

        @fuse_errors
        async def write(self, fh, off, buf):
            path = self._path(fh)
            state.check("write", path)
            return self._unsynced(fh, path).write(self.fds[fh], off, bytes(buf))

        async def flush(self, fh):
            pass

        @fuse_errors
        async def fsync(self, fh, datasync):
            path = self._path(fh)
            if state.faults.fsync_delay_ms:
                state.counts["delayed_fsyncs"] += 1
                await trio.sleep(state.faults.fsync_delay_ms / 1000)
            state.check("fsync", path)
            f = state.files.pop(fh, None)
            fd = self.fds[fh]
            if f is not None:
                try:
                    f.flush(fd)
                except OSError:
                    state.files[fh] = f  # still unsynced
                    raise
            os.fsync(fd)
            state.counts["fsyncs"] += 1

        async def release(self, fh):
            self.opens[fh] -= 1
            if self.opens[fh] == 0:
                del self.opens[fh]
                fd = self.fds.pop(fh)
                if os.fstat(fd).st_nlink == 0:  # unlinked while open: gone with its pages
                    state.files.pop(fh, None)
                os.close(fd)  # otherwise the unsynced pages stay: closing is not fsync

    return Operations()


async def _serve_control(sock_path: str, state: FaultState, ops) -> None:
    import trio
    try:
        os.unlink(sock_path)
    except FileNotFoundError:
        pass
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind(sock_path)
    listener.listen(16)
    rng = random.Random()
    while True:
        conn, _ = await listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = await conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            try:
                reply = _handle(json.loads(data or b"{}"), state, ops, rng)
            except (ValueError, TypeError) as exc:
                reply = {"error": str(exc)}
            out = memoryview(json.dumps(reply).encode() + b"\n")
            while out:
                out = out[await conn.send(out):]


def _handle(req: dict, state: FaultState, ops, rng: random.Random) -> dict:
    if not isinstance(req, dict):
        raise ValueError(f"a request is a JSON object, not {req!r}")
    cmd = req.get("cmd")
    if cmd == "status":
        return state.status()
    name = req.get("name", "default")
    if not isinstance(name, str):
        raise ValueError(f"name: {name!r} is not a string")
    if cmd == "set":
        state.set(name, Faults.parse(req))
        logger.info("faults %s now %s", name, state.named[name].as_dict())
        return state.status()
    if cmd == "clear":
        if "name" in req:
            state.set(name, None)
        else:
            state.named.clear()
            state.set(name, None)
        logger.info("faults %s cleared", req.get("name", "(all)"))
        return state.status()
    if cmd == "drop-unsynced":
        if "seed" in req:
            rng.seed(req["seed"])
        out = state.drop_unsynced(ops.paths, bool(req.get("torn", False)), rng)
        logger.info("power loss: dropped %s", out)
        return out
    raise ValueError(f"cmd: {cmd!r} is not one of status, set, clear, drop-unsynced")


def mount(backing: str, mountpoint: str, control: str) -> int:
    import pyfuse3
    import trio
    os.makedirs(backing, exist_ok=True)
    os.makedirs(mountpoint, exist_ok=True)
    state = FaultState(os.path.realpath(backing))
    ops = _operations(state)
    options = set(pyfuse3.default_options) | {"fsname=faultfs"}
    options.discard("default_permissions")
    pyfuse3.init(ops, mountpoint, options)
    logger.info("faultfs: %s mounted on %s, control %s", backing, mountpoint, control)

    async def on_sigterm():
        # A clean shutdown of the machine: what the page cache holds reaches the disk.
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                out = state.sync_all(ops.paths)
                logger.info("shutting down: synced %s", out)
                pyfuse3.terminate()
                return

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_control, control, state, ops)
            nursery.start_soon(on_sigterm)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()
    try:
        trio.run(main)
    finally:
        pyfuse3.close(unmount=True)
    return 0


def ctl(sock_path: str, request: dict, timeout_s: float = 10.0) -> dict:
    """Send one request to a mounted faultfs and return its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(sock_path)
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def main(argv: list[str]) -> int:
    if argv[:1] == ["mount"] and len(argv) == 5 and argv[3] == "--control":
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.Formatter.converter = time.gmtime
        return mount(argv[1], argv[2], argv[4])
    if argv[:1] == ["ctl"] and len(argv) == 3:
        try:
            req = json.loads(argv[2])
        except ValueError as exc:
            print(f"faultfs ctl: the request is not JSON: {exc}", file=sys.stderr)
            return 2
        out = ctl(argv[1], req)
        print(json.dumps(out))
        return 1 if "error" in out else 0
    print("usage: python3 -m node_image.faultfs mount BACKING MOUNTPOINT --control SOCKET\n"
          "       python3 -m node_image.faultfs ctl SOCKET JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
