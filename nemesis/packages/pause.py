"""pause: SIGSTOP the node process (``ck-ctl pause``), SIGCONT when the fault ends: a node
that stops answering without closing a connection, as a long GC pause or a stalled VM."""
from __future__ import annotations

from ..package import HeldFault


class Pause(HeldFault):
    name = "pause"
    intends = ("raft-leader-elected", "broker-fenced", "isr-shrink")
    opens = ("pause",)
    closes = ("resume",)
    colour = "#b279a2"
    target_weights = {"register": {"active-controller": 2, "one": 1, "minority": 1},
                      "queue": {"partition-leader": 2, "active-controller": 1, "one": 1,
                                "minority": 1}}

    lifted = "resumed"

    def plan(self, ctx, step, opts, targets):
        return {"target": step.spec, "nodes": targets}, targets, f"pause {step.spec} {targets}"

    async def put(self, ctx, holders, opts, value):
        await ctx.exec_all(holders, lambda n: ["ck-ctl", "pause"])

    def release(self, ctx, node):
        return ["ck-ctl", "resume"]

    def sim_act(self, sim, step, opts, rng, targets):
        # Messages to a stopped process wait in its sockets; it reads them when resumed.
        sim.pause(targets)
        return f"pause {step.spec} {targets}", lambda: sim.resume(targets)


PACKAGE = Pause
