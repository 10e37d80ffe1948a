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

The page cache and the fault rules do no FUSE (``node_image.faultfs_state``, tested on
their own); ``pyfuse3`` is imported only to mount.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import random
import signal
import socket
import sys
import time

from .faultfs_state import PAGE, Faults, FaultState, UnsyncedFile

logger = logging.getLogger("chaoskraft.faultfs")


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
