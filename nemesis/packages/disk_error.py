"""disk-error: the target's disk answers chosen calls (``ops``: read, write, fsync) on
chosen files (``files``, a glob relative to the data directory, e.g. ``*.log`` or
``__cluster_metadata-0/*``) with an error (``errno``, EIO by default), from faultfs under
the data directory. The node must do what Kafka does: its one log directory holds the
metadata log, so it halts (exit 74) rather than serve or acknowledge what it could not
write, and comes back when the disk does."""
from __future__ import annotations

from ..disk import DiskFault
from ..package import LEADER_FIRST, choices, one_of

OPS = ("read", "write", "fsync")
ERRNOS = ("EIO", "ENOSPC", "EROFS", "EDQUOT")


def glob(v):
    return None if isinstance(v, str) and v else f"{v!r} is not a file glob"


class DiskError(DiskFault):
    name = "disk-error"
    intends = ("log-dir-failed",)
    options = {"ops": choices(OPS), "files": glob, "errno": one_of(ERRNOS)}
    defaults = {"ops": ["write", "fsync"], "files": "*", "errno": "EIO"}
    opens = ("start-disk-error",)
    closes = ("stop-disk-error",)
    colour = "#8c564b"
    target_weights = LEADER_FIRST

    def request(self, opts):
        return {"errors": [{"ops": list(opts["ops"]), "path": opts["files"],
                            "errno": opts["errno"]}]}

    def describe(self, opts):
        return f"{opts['errno']} on {'/'.join(opts['ops'])} of {opts['files']}"


PACKAGE = DiskError
