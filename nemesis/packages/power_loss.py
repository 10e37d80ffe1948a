"""power-loss: a kill of a node that loses what it had not fsynced, as a machine losing power
does. Two mechanisms (option ``via``):

- ``fuse`` (the default): the node writes through faultfs, a FUSE file system under its
  data directory that holds un-fsynced data outside the node process; after the kill
  faultfs throws that data away (``ck-ctl disk drop-unsynced``; with ``torn``, a random
  prefix of each file's unsynced pages reaches the disk first). The node's own seam is off,
  so a node that wrote past it, or a bug in it, is seen.
- ``process``: the nodes run with ``chaoskraft.power.loss.enable=true``, so their
  un-fsynced writes live in the node process's memory and die with it
  (``node_image.fs.PowerLossFileSystem``); no FUSE in the containers.

Targets: the campaign's ``power_loss_targets`` (default one, minority)."""
from __future__ import annotations

import json

from ..disk import disk_cmd
from .kill import Kill

VIA = ("process", "fuse")


def _via(v):
    return None if v in VIA else f"unknown value {v!r} (known: {', '.join(VIA)})"


def _flag(v):
    return None if isinstance(v, bool) else f"{v!r} is not true or false"


class PowerLoss(Kill):
    name = "power-loss"
    needs_acked_writes = 10
    intends = ("raft-leader-elected", "broker-fenced", "partition-leader-elected",
               "isr-shrink", "epoch-truncation")
    options = {"via": _via, "torn": _flag}
    defaults = {"via": "fuse", "torn": False}
    opens = ("power-loss",)
    colour = "#9d1c1c"
    first = {}

    @classmethod
    def node_properties(cls, opts):
        return {"chaoskraft.power.loss.enable": "true"} if opts.get("via") != "fuse" else {}

    @classmethod
    def needs_faultfs(cls, opts):
        return opts.get("via") == "fuse"

    @classmethod
    def targets_for(cls, workload, opts, power_loss_targets):
        if "targets" in opts:
            return {t: 1 for t in opts["targets"]}
        return {t: 1 for t in power_loss_targets}

    @classmethod
    def first_target(cls, workload, power_loss_targets):
        return power_loss_targets[0]

    async def act(self, ctx, step, opts, rng, targets):
        if opts.get("via") != "fuse":
            return await super().act(ctx, step, opts, rng, targets)
        value = {"target": step.spec, "nodes": targets, "via": "fuse",
                 "torn": bool(opts.get("torn"))}
        await ctx.kill(self.name, targets, value)  # dead before its data is dropped
        ctx.history.record("nemesis", "invoke", "drop-unsynced", value=value)
        seed = rng.randrange(1 << 30)
        outs = await ctx.exec_all(targets, lambda n: disk_cmd(
            {"cmd": "drop-unsynced", "torn": bool(opts.get("torn")), "seed": seed + n}),
            check=True)
        dropped = {}
        for n, (_, out) in zip(targets, outs):
            try:
                dropped[n] = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                dropped[n] = out.strip()
        ctx.history.record("nemesis", "info", "drop-unsynced", value={**value, "dropped": dropped})
        return (f"{self.name} {step.spec} {targets} (faultfs)",
                lambda: ctx.restart(targets))

    def sim_act(self, sim, step, opts, rng, targets):
        # Either mechanism loses what was not fsynced; the simulated disk tears as faultfs.
        torn = bool(opts.get("torn"))
        sim.kill(targets, lose_unsynced=True, torn=torn)
        return (f"{self.name} {step.spec} {targets}{' (torn)' if torn else ''}",
                lambda: sim.restart(targets))


PACKAGE = PowerLoss
