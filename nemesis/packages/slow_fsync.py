"""slow-fsync: each fsync on the target's data directory takes ``delay_ms`` longer (faultfs
holds it, other calls going on meanwhile), as a disk whose cache is full or a degraded
RAID. Nothing fails: the node acknowledges later, and a node whose Raft log is slow to
sync may lose its leadership."""
from __future__ import annotations

from ..disk import DiskFault
from ..package import LEADER_FIRST, NotSimulated, number


class SlowFsync(DiskFault):
    name = "slow-fsync"
    options = {"delay_ms": number(1, 60_000, "1 .. 60000 ms")}
    defaults = {"delay_ms": 200}
    opens = ("start-slow-fsync",)
    closes = ("stop-slow-fsync",)
    colour = "#bcbd22"
    target_weights = LEADER_FIRST

    def request(self, opts):
        return {"fsync_delay_ms": int(opts["delay_ms"])}

    def sim_act(self, sim, step, opts, rng, targets):
        raise NotSimulated("the simulated disk's fsync takes no time")

    def describe(self, opts):
        return f"+{opts['delay_ms']:g} ms per fsync"


PACKAGE = SlowFsync
