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
from ..seeded import Seeded
from .kill import Kill

VIA = ("process", "fuse")


def seeded_crash(ctx, r, o, mean_ms):
    """The crash timeline: one node that is up (seven times in ten) or a minority of the
    voters loses power, its disk tearing what it had not fsynced as the seed's
    ``torn_write_prob`` says and, rarely (``wipe_prob``; at most one voter a run), wiped;
    each comes back on its own within ``down_ms``."""
    alive = ctx.alive()
    if alive:
        count = 1 if r.random() < 0.7 else max(1, ctx.voters // 2)
        for victim in r.sample(alive, min(count, len(alive))):
            wipe = r.random() < o.wipe_prob and ctx.may_wipe(victim)
            ctx.trace("crash", victim, wipe)
            ctx.crash(victim, wipe)
            ctx.restart_after(1 + r.randrange(o.down_ms), victim)
    if ctx.now < ctx.duration_ms:
        return int(r.expovariate(1 / mean_ms)) + 1
    return None


def seeded_power_off(ctx, r, o, mean_ms):
    """The power-off timeline (the target ``all``): every node that is up loses power at
    once; each comes back on its own."""
    alive = ctx.alive()
    ctx.trace("power_loss", alive)
    ctx.count("power_losses")
    for victim in alive:
        ctx.crash(victim, False)
        ctx.restart_after(1 + r.randrange(o.down_ms), victim)
    return int(r.expovariate(1 / mean_ms)) + 1


def seeded_after_vote(ctx, r, o, node):
    """A voter has just voted: with the seed's ``election_crash_prob`` it loses power 1-5 ms
    later, while the election is still going on (what a persisted vote is for)."""
    if r.random() < o.election_crash_prob:
        ctx.later(1 + r.randrange(5), _quick_crash, node)


def _quick_crash(ctx, r, node):
    if node in ctx.alive():
        ctx.trace("quick_crash", node)
        ctx.crash(node, False)
        ctx.restart_after(1 + r.randrange(20), node)


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
    seeded = (Seeded("crash", mean_ms=lambda o, q: o.crash_mean_ms, fire=seeded_crash),
              Seeded("power-off", mean_ms=lambda o, q: q and q.power_loss_mean_ms,
                     fire=seeded_power_off),
              Seeded(on="voted", chance=lambda o: o.election_crash_prob,
                     fire=seeded_after_vote))

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
