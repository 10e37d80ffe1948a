"""kill: SIGKILL the node process (``ck-ctl kill``) and keep it down until the fault ends
(``ck-ctl start``). Its page cache survives: what it wrote but did not fsync is kept."""
from __future__ import annotations

from ..package import NodeFault


class Kill(NodeFault):
    name = "kill"
    intends = ("raft-leader-elected", "broker-fenced", "broker-unfenced",
               "partition-leader-elected", "isr-shrink", "isr-expand")
    opens = ("kill", "stop")  # stop: a clean shutdown (SIGTERM), as scenarios use it
    closes = ("start",)
    colour = "#e45756"
    target_weights = {"register": {"active-controller": 2, "one": 1, "minority": 1},
                      "queue": {"partition-leader": 3, "active-controller": 1, "one": 1,
                                "minority": 1}}
    first = {"register": "active-controller", "queue": "partition-leader"}

    async def act(self, ctx, step, opts, rng, targets):
        await ctx.kill(self.name, targets, {"target": step.spec, "nodes": targets})
        return f"{self.name} {step.spec} {targets}", lambda: ctx.restart(targets)

    def sim_act(self, sim, step, opts, rng, targets):
        sim.kill(targets)  # the page cache survives a process kill
        return f"{self.name} {step.spec} {targets}", lambda: sim.restart(targets)

PACKAGE = Kill
