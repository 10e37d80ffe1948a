"""What the disk packages share: faults set and cleared in each node's faultfs (the FUSE
file system under its data directory, ``node_image.faultfs``) through ``ck-ctl disk``.

Each package sets its faults under its own name, so the faults of several packages hold on
one node together and each clears only its own."""
from __future__ import annotations

import json

from .package import NodeFault


def disk_cmd(request: dict) -> list[str]:
    return ["ck-ctl", "disk", json.dumps(request, sort_keys=True)]


class DiskFault(NodeFault):
    """A fault of the node's disk, from outside the node process: ``request(opts)`` says
    what faultfs sets while it lasts; the fault's rows are ``start-NAME`` / ``stop-NAME``."""
    faultfs = True
    mechanism = "faultfs (FUSE under the data directory)"

    def __init__(self) -> None:
        super().__init__()
        self.faulty: set[int] = set()
        assert self.opens == (f"start-{self.name}",) and self.closes == (f"stop-{self.name}",)

    def request(self, opts: dict) -> dict:
        raise NotImplementedError

    def describe(self, opts: dict) -> str:
        return ""

    async def act(self, ctx, step, opts, rng, targets):
        faults = self.request(opts)
        request = {"cmd": "set", "name": self.name, **faults}
        value = {"target": step.spec, "nodes": targets, **faults, "mechanism": self.mechanism}
        ctx.history.record("nemesis", "invoke", f"start-{self.name}", value=value)
        self.faulty.update(targets)
        await ctx.exec_all(targets, lambda n: disk_cmd(request), check=True)
        ctx.history.record("nemesis", "info", f"start-{self.name}", value=value)
        return (f"{self.name} {step.spec} {targets} {self.describe(opts)}".rstrip(),
                lambda: self.stop(ctx, targets))

    def sim_act(self, sim, step, opts, rng, targets):
        sim.disk_fault(targets, self.name, self.request(opts))
        return (f"{self.name} {step.spec} {targets} {self.describe(opts)}".rstrip(),
                lambda: sim.clear_disk_fault(targets, self.name))

    async def stop(self, ctx, nodes: list[int]) -> None:
        await self.lift(ctx, self.faulty, nodes, f"stop-{self.name}",
                        lambda n: disk_cmd({"cmd": "clear", "name": self.name}),
                        f"{self.name} lifted on")

    async def heal(self, ctx):
        await self.stop(ctx, sorted(self.faulty))

    async def final_heal(self, ctx):
        await ctx.exec_all(ctx.ids, lambda n: disk_cmd({"cmd": "clear", "name": self.name}))
