"""add-broker: the cluster grows by one broker while the clients write and other faults run,
as an operator adds a machine:

1. a new machine comes under the next unused node id (Docker starts another container from
   the same image on the cluster's network, over SSH the next of the hosts file's
   ``spare_hosts`` is taken, the simulator adds a node); it formats with a directory id of
   its own and registers, and the step waits until every running broker lists it;
2. a partition of the topic led with a full ISR moves onto it (a follower's replica
   replaced), done once it has caught up and joined the ISR.

Nothing leaves: beside ``decommission`` (which takes brokers out and brings new ones in
their place) the cluster's shape keeps changing. A backend with no machine to add (an SSH
hosts file naming no spare host left) ends the step as not reached, and the log says why.
The new node is a node of the cluster from then on: faults may pick it. ``max_nodes``
bounds the growth: once the cluster has that many nodes (those a ``decommission`` took out
not counted) the step is skipped, saying so. History rows:
``add-broker`` (invoke), ``broker-added`` (info: the new broker, the partition moved onto
it and its replicas).
"""
from __future__ import annotations

from ..package import NotReached, Scenario, Skipped, number
from .decommission import Decommission


def too_many(ids: list[int], opts: dict) -> str | None:
    """Why the cluster of ``ids`` may not grow, given the step's options, or None."""
    most = opts.get("max_nodes")
    if most is not None and len(ids) >= most:
        return f"the cluster has {len(ids)} nodes already (max_nodes {most:g})"
    return None


class AddBroker(Decommission):
    name = "add-broker"
    intends = ("reassignment-started", "reassignment-completed", "isr-expand")
    length_s = 30.0
    aims_at = "a new broker under a new node id registered and holding a partition"
    opens = ("add-broker",)
    closes = ("broker-added",)
    colour = "#bcbd22"
    options = {**Scenario.options, "max_nodes": number(1, 1000, "1..1000 nodes")}
    defaults: dict = {}

    def choose(self, infos, controllers, active, rng):
        # a partition led with a full ISR for the new broker to join (asked again once it
        # is there); none now (an ISR still short after a fault): aimed at again later
        full = [p for p, leader, replicas, isr in infos
                if leader >= 0 and len(replicas) > 1 and sorted(isr) == sorted(replicas)]
        return full or None

    async def start(self, ctx, step, opts, rng, controller, leader):
        if (why := too_many(ctx.ids, opts)) is not None:
            raise Skipped(why)
        return await Scenario.start(self, ctx, step, opts, rng, controller, leader)

    async def act(self, ctx, choice, rng):
        ctx.history.record("nemesis", "invoke", "add-broker")
        new = await ctx.add_broker(None)
        if new is None:
            raise NotReached("no machine to add (the log says why)")
        partition, target = await self._join(ctx, new, rng)
        ctx.history.record("nemesis", "info", "broker-added",
                           value={"node": new, "partition": partition, "replicas": target})

    def describe(self, choice):
        return "add-broker: a new broker joins", []

    # ------------------------------------------------------------- the simulated form

    def simulate(self, sim, step, opts, rng, controller, leader):
        if (why := too_many(sim.ids, opts)) is not None:
            raise Skipped(why)
        return Scenario.simulate(self, sim, step, opts, rng, controller, leader)

    def sim_act(self, sim, choice, rng):
        self._sim_join(sim, sim.add_broker(None), rng)


PACKAGE = AddBroker
