"""The simulated nemesis: partitions, crashes and wall-clock steps at seeded exponential
intervals while the faults last. Partitions take the Docker nemesis's shapes (``nemesis.faults.grudge``) and
one-way ones; a crash takes one node or a minority, may tear its unsynced writes (the
disk) and, rarely, wipe its disk (at most one voter per run). A clock step moves one
node's wall clock (half the time the leader's) 1 to 30 s forward or back for 1 to 20 s,
as the Docker clock package's bump does. For the queue workload the seed may also draw
power losses of every node at once (the Docker power-loss package's target ``all``). One
seeded ``random.Random`` decides every fault."""
from __future__ import annotations

import random

from nemesis.faults import grudge

SHAPES = {"isolate": "isolate-one", "halves": "halves", "ring": "majorities-ring",
          "bridge": "bridge"}


class SimNemesis:
    def __init__(self, sim, rng: random.Random, options) -> None:
        """``sim``: the simulation (its time, event queue, nodes, network and crashes)."""
        self.sim = sim
        self.rng = rng
        self.options = options

    def schedule(self) -> None:
        o, sim = self.options, self.sim
        if o.partition_mean_ms:
            sim.push(int(self.rng.expovariate(1 / o.partition_mean_ms)), "partition")
        if o.crash_mean_ms:
            sim.push(int(self.rng.expovariate(1 / o.crash_mean_ms)), "crash")
        if o.clock_step_mean_ms:
            sim.push(int(self.rng.expovariate(1 / o.clock_step_mean_ms)), "clock_step")

    def partition(self) -> None:
        o, sim, r = self.options, self.sim, self.rng
        ids = sorted(sim.nodes)
        shape = r.choice(["isolate", "halves", "one-way", "ring", "bridge"])
        if len(ids) < 3:
            shape = "isolate"
        if shape == "one-way":  # asymmetric: iptables grudges have no such shape
            victim = r.choice(ids)
            if r.random() < 0.5:
                blocked = {(victim, x) for x in ids if x != victim}  # it cannot send
            else:
                blocked = {(x, victim) for x in ids if x != victim}  # it cannot hear
        else:  # the Docker nemesis's shapes (nemesis.faults.grudge): x hears nothing from g[x]
            g = grudge(SHAPES[shape], ids, r)
            blocked = {(src, dst) for dst, srcs in g.items() for src in srcs}
        sim.network.blocked = blocked
        sim.stats["partitions"] += 1
        sim.trace(sim.now, "partition", shape, sorted(blocked))
        sim.push(sim.now + 1 + r.randrange(o.partition_length_ms), "heal")
        if sim.now < sim.duration_ms:
            sim.push(sim.now + o.partition_length_ms + int(r.expovariate(1 / o.partition_mean_ms)),
                     "partition")

    SCENARIOS = ("depose-leader", "strand-replica")

    def schedule_scenarios(self, mean_ms: int) -> None:
        self.sim.push(int(self.rng.expovariate(1 / mean_ms)), "scenario", mean_ms)

    def scenario(self, mean_ms: int) -> None:
        """One of the Docker scenarios aimed at a partition, acted by its package's simulated
        form (``simulator.twin.PlanFaults``); the next comes after it ends."""
        from nemesis.packages import PACKAGES
        from nemesis.schedule import FaultStep
        sim, r = self.sim, self.rng
        kind = r.choice(self.SCENARIOS)
        length = PACKAGES[kind].length_s
        step = FaultStep(len(sim.plan.steps), round(sim.now / 1000, 3), kind, "partition",
                         length)
        sim.stats["scenarios"] = sim.stats.get("scenarios", 0) + 1
        sim.plan.start_now(step)
        sim.push(sim.now + int(length * 1000) + int(r.expovariate(1 / mean_ms)) + 1,
                 "scenario", mean_ms)

    def schedule_power_loss(self, mean_ms: int) -> None:
        self.sim.push(int(self.rng.expovariate(1 / mean_ms)), "power_loss", mean_ms)

    def power_loss(self, mean_ms: int) -> None:
        """Every node that is up loses power at once; each comes back on its own."""
        o, sim, r = self.options, self.sim, self.rng
        alive = [i for i in sorted(sim.nodes) if sim.nodes[i].node is not None]
        sim.trace(sim.now, "power_loss", alive)
        sim.stats["power_losses"] += 1
        for victim in alive:
            sim.crash(sim.nodes[victim], False)
            sim.push(sim.now + 1 + r.randrange(o.down_ms), "restart", victim)
        sim.push(sim.now + int(r.expovariate(1 / mean_ms)) + 1, "power_loss", mean_ms)

    def crash(self) -> None:
        o, sim, r = self.options, self.sim, self.rng
        alive = [i for i in sorted(sim.nodes) if sim.nodes[i].node is not None]
        if alive:
            count = 1 if r.random() < 0.7 else max(1, len(sim.voter_ids) // 2)
            for victim in r.sample(alive, min(count, len(alive))):
                sn = sim.nodes[victim]
                wipe = r.random() < o.wipe_prob and (not sn.voter or sim.voter_wipes == 0)
                sim.trace(sim.now, "crash", victim, wipe)
                sim.crash(sn, wipe)
                sim.push(sim.now + 1 + r.randrange(o.down_ms), "restart", victim)
        if sim.now < sim.duration_ms:
            sim.push(sim.now + int(r.expovariate(1 / o.crash_mean_ms)) + 1, "crash")

    def clock_step(self) -> None:
        o, sim, r = self.options, self.sim, self.rng
        leader = sim.leader()
        victim = leader[0] if leader is not None and r.random() < 0.5 else r.choice(sorted(sim.nodes))
        if not sim.nodes[victim].clock.step_ms:  # a stepped clock is left until its reset
            step = r.choice((-1, 1)) * r.randint(1000, 30000)
            sim.nodes[victim].clock.step_ms = step
            sim.stats["clock_steps"] += 1
            sim.trace(sim.now, "clock_step", victim, step)
            sim.push(sim.now + r.randint(1000, 20000), "clock_reset", victim)
        sim.push(sim.now + int(r.expovariate(1 / o.clock_step_mean_ms)) + 1, "clock_step")

    def clock_reset(self, node_id: int) -> None:
        sn = self.sim.nodes[node_id]
        if sn.clock.step_ms:
            self.sim.trace(self.sim.now, "clock_reset", node_id)
            sn.clock.step_ms = 0

    def crash_after_vote(self, node_id: int) -> None:
        """A targeted fault, drawn when a voter has just voted: restart it while the
        election is still going on (what a persisted vote is for)."""
        if self.rng.random() < self.options.election_crash_prob:
            self.sim.push(self.sim.now + 1 + self.rng.randrange(5), "quick_crash", node_id)

    def quick_crash(self, node_id: int) -> None:
        sim = self.sim
        sn = sim.nodes[node_id]
        if sn.node is not None:
            sim.trace(sim.now, "quick_crash", sn.node_id)
            sim.crash(sn, wipe=False)
            sim.push(sim.now + 1 + self.rng.randrange(20), "restart", sn.node_id)
