"""disk-full: the target's disk is full: writes, creates and fsyncs under the data
directory answer ENOSPC and statfs shows no free block (faultfs). As for any failed log
directory holding the metadata log, the node halts (exit 74) and comes back once there is
room again."""
from __future__ import annotations

from ..disk import DiskFault
from ..package import LEADER_FIRST


class DiskFull(DiskFault):
    name = "disk-full"
    intends = ("log-dir-failed",)
    opens = ("start-disk-full",)
    closes = ("stop-disk-full",)
    colour = "#7f7f7f"
    target_weights = LEADER_FIRST

    def request(self, opts):
        return {"full": True}


PACKAGE = DiskFull
