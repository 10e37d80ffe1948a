"""What the disk packages share: faults set and cleared in each node's faultfs (the FUSE
file system under its data directory, ``node_image.faultfs``) through ``ck-ctl disk``.

Each package sets its faults under its own name, so the faults of several packages hold on
one node together and each clears only its own."""
from __future__ import annotations

import json

from .package import HeldFault


def disk_cmd(request: dict) -> list[str]:
    return ["ck-ctl", "disk", json.dumps(request, sort_keys=True)]


class DiskFault(HeldFault):
    """A fault of the node's disk, from outside the node process: ``request(opts)`` says
    what faultfs sets while it lasts; the fault's rows are ``start-NAME`` / ``stop-NAME``."""
    faultfs = True
    mechanism = "faultfs (FUSE under the data directory)"

    def __init__(self) -> None:
        super().__init__()
        assert self.opens == (f"start-{self.name}",) and self.closes == (f"stop-{self.name}",)

    @property
    def lifted(self) -> str:
        return f"{self.name} lifted on"

    def request(self, opts: dict) -> dict:
        raise NotImplementedError

    def describe(self, opts: dict) -> str:
        return ""

    def plan(self, ctx, step, opts, targets):
        value = {"target": step.spec, "nodes": targets, **self.request(opts),
                 "mechanism": self.mechanism}
        return value, targets, f"{self.name} {step.spec} {targets} {self.describe(opts)}".rstrip()

    async def put(self, ctx, holders, opts, value):
        request = {"cmd": "set", "name": self.name, **self.request(opts)}
        await ctx.exec_all(holders, lambda n: disk_cmd(request), check=True)

    def release(self, ctx, node):
        return disk_cmd({"cmd": "clear", "name": self.name})

    def sim_act(self, sim, step, opts, rng, targets):
        sim.disk_fault(targets, self.name, self.request(opts))
        return (f"{self.name} {step.spec} {targets} {self.describe(opts)}".rstrip(),
                lambda: sim.clear_disk_fault(targets, self.name))
