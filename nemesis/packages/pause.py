"""pause: SIGSTOP the node process (``ck-ctl pause``), SIGCONT when the fault ends: a node
that stops answering without closing a connection, as a long GC pause or a stalled VM."""
from __future__ import annotations

from ..package import NodeFault


class Pause(NodeFault):
    name = "pause"
    intends = ("raft-leader-elected", "broker-fenced", "isr-shrink")
    opens = ("pause",)
    closes = ("resume",)
    colour = "#b279a2"
    target_weights = {"register": {"active-controller": 2, "one": 1, "minority": 1},
                      "queue": {"partition-leader": 2, "active-controller": 1, "one": 1,
                                "minority": 1}}

    def __init__(self) -> None:
        super().__init__()
        self.paused: set[int] = set()

    async def act(self, ctx, step, opts, rng, targets):
        value = {"target": step.spec, "nodes": targets}
        ctx.history.record("nemesis", "invoke", "pause", value=value)
        await ctx.exec_all(targets, lambda n: ["ck-ctl", "pause"])
        self.paused.update(targets)
        ctx.history.record("nemesis", "info", "pause", value=value)
        return f"pause {step.spec} {targets}", lambda: self.resume(ctx, targets)

    async def resume(self, ctx, nodes: list[int]) -> None:
        await self.lift(ctx, self.paused, nodes, "resume", lambda n: ["ck-ctl", "resume"],
                        "resumed")

    async def heal(self, ctx):
        await self.resume(ctx, sorted(self.paused))

    def sim_act(self, sim, step, opts, rng, targets):
        # Messages to a stopped process wait in its sockets; it reads them when resumed.
        sim.pause(targets)
        return f"pause {step.spec} {targets}", lambda: sim.resume(targets)


PACKAGE = Pause
