"""partition: network partitions between nodes (iptables grudges, nemesis.faults.grudge).

Shapes: isolate-one, halves, majorities-ring, bridge, isolate-controller,
isolate-partition-leader. A cut that isolates the leader the workload depends
on lasts at least ``LEADER_PARTITION_MIN_S``: with the node's defaults a
cut-off controller resigns after 3 s (1.5 x controller.quorum.fetch.timeout.ms)
and the others elect one within 2-4 s. A shorter cut heals first, the old
leader keeps its log, and what it acknowledged alone is never lost: a bug like
reply-before-commit or ack-before-replication goes unseen.
"""
from __future__ import annotations

from ..faults import PARTITION_SHAPES, grudge, grudge_value
from ..package import Package, Skipped
from ..seeded import Seeded

LEADER_PARTITIONS = ("isolate-controller", "isolate-partition-leader")
LEADER_PARTITION_MIN_S = 7.5
# The seeded simulator's shapes: the grudges above and a one-way cut (which iptables
# grudges do not have: the one-way package's), drawn alike
SEEDED_SHAPES = {"isolate": "isolate-one", "halves": "halves", "one-way": None,
                 "ring": "majorities-ring", "bridge": "bridge"}


def seeded_cut(ctx, r, o, mean_ms):
    """The network timeline: one cut of a drawn shape for up to ``partition_length_ms``,
    the next one that long plus an exponential draw later."""
    ids = ctx.ids
    shape = r.choice(list(SEEDED_SHAPES))
    if len(ids) < 3:  # drawn all the same, so a seed's later draws do not depend on it
        shape = "isolate"
    if shape == "one-way":
        victim = r.choice(ids)
        if r.random() < 0.5:
            blocked = {(victim, x) for x in ids if x != victim}  # it cannot send
        else:
            blocked = {(x, victim) for x in ids if x != victim}  # it cannot hear
    else:  # x hears nothing from g[x]
        g = grudge(SEEDED_SHAPES[shape], ids, r)
        blocked = {(src, dst) for dst, srcs in g.items() for src in srcs}
    ctx.block(blocked)
    ctx.count("partitions")
    ctx.trace("partition", shape, sorted(blocked))
    ctx.heal_after(1 + r.randrange(o.partition_length_ms))
    if ctx.now < ctx.duration_ms:
        return o.partition_length_ms + int(r.expovariate(1 / mean_ms))
    return None


class Partition(Package):
    name = "partition"
    intends = ("raft-leader-elected", "raft-leader-resigned", "partition-leader-elected",
               "isr-shrink", "broker-fenced")
    weight = 2
    opens = ("start-partition",)
    closes = ("stop-partition",)
    colour = "#4c78a8"
    # Cuts aimed at the leader the workload depends on find the most bugs: the active
    # controller for the register, a partition leader for the queue. They come more often,
    # and first.
    target_weights = {
        "register": {"isolate-controller": 6, "isolate-one": 1, "halves": 1,
                     "majorities-ring": 1, "bridge": 1},
        "queue": {"isolate-partition-leader": 4, "isolate-controller": 1, "isolate-one": 1,
                  "halves": 1, "majorities-ring": 1, "bridge": 1},
    }
    first = {"register": "isolate-controller", "queue": "isolate-partition-leader"}
    seeded = (Seeded("network", mean_ms=lambda o, q: o.partition_mean_ms, fire=seeded_cut),)

    @classmethod
    def check_target(cls, target):
        if target not in PARTITION_SHAPES:
            return f"unknown partition shape {target!r} (known: {', '.join(PARTITION_SHAPES)})"
        return None

    @classmethod
    def length(cls, spec, rng, duration_s):
        n = rng.uniform(*duration_s)
        return max(n, LEADER_PARTITION_MIN_S) if spec in LEADER_PARTITIONS else n

    async def start(self, ctx, step, opts, rng, controller, leader):
        g = grudge(step.spec, ctx.ids, rng, controller, leader)
        cut = sorted(n for n, drops in g.items() if drops)
        if not cut:
            raise Skipped(f"the {step.spec} shape cuts no link now")
        await ctx.cut(g, {"shape": step.spec, "grudge": grudge_value(g)})

        async def undo():
            if ctx.partitioned:
                await ctx.heal_cut()
        return f"partition {step.spec}", undo, cut

    def simulate(self, sim, step, opts, rng, controller, leader):
        g = grudge(step.spec, sim.ids, rng, controller, leader)
        cut = sorted(n for n, drops in g.items() if drops)
        if not cut:
            raise Skipped(f"the {step.spec} shape cuts no link now")
        sim.cut(g)
        return f"partition {step.spec}", sim.heal_cut, cut

PACKAGE = Partition
