"""one-way: asymmetric partitions. Mode ``deaf``: each target hears no other node, while the
others still hear it; mode ``mute``: no other node hears the targets, while the targets
still hear them. iptables DROP rules on the receiving side (INPUT, in a chain of this
package's own, so healing a symmetric partition leaves them in place).

What it does to TCP is what a one-way link fault does to Kafka: a request crosses and its
answer does not, so the sender times out on a peer that did get the request (a follower's
fetch reaches the leader, which counts it, and the answer never comes back); new
connections fail both ways (the SYN or the SYN-ACK is lost). Datagrams show the asymmetry
whole.
"""
from __future__ import annotations

from ..faults import chain_script, flush_script
from ..package import LEADER_FIRST, HeldFault

CHAIN = "ck-oneway"


def deaf_script(sources: list[str]) -> list[str]:
    """The command that drops every packet from ``sources`` (this node hears none of them)."""
    return chain_script(CHAIN, [f"-s {a} -j DROP" for a in sources])


def one_way_grudge(mode: str, targets: list[int], ids: list[int]) -> dict[int, set[int]]:
    """For each node, the nodes it will not hear from."""
    g: dict[int, set[int]] = {n: set() for n in ids}
    others = set(ids) - set(targets)
    for t in targets:
        if mode == "deaf":
            g[t] |= others
        else:
            for o in others:
                g[o].add(t)
    return g


class OneWay(HeldFault):
    name = "one-way"
    intends = ("raft-leader-elected",)
    modes = ("deaf", "mute")
    opens = ("start-one-way",)
    closes = ("stop-one-way",)
    colour = "#72b7b2"
    target_weights = LEADER_FIRST

    lifted = "one-way partition healed on"

    def plan(self, ctx, step, opts, targets):
        mode = step.mode or self.modes[0]
        g = one_way_grudge(mode, targets, ctx.ids)
        hearing = sorted(n for n, drops in g.items() if drops)  # the nodes that drop
        value = {"target": step.spec, "mode": mode, "nodes": targets,
                 "grudge": {str(n): sorted(g[n]) for n in hearing},
                 "mechanism": "iptables DROP on the receiving side"}
        how = "hear no one" if mode == "deaf" else "are heard by no one"
        return value, hearing, f"one-way {mode}: {targets} {how} (iptables DROP on {hearing})"

    async def put(self, ctx, holders, opts, value):
        address = {n.node_id: n.address for n in ctx.backend.nodes}
        grudge = value["grudge"]
        await ctx.exec_all(holders, lambda n: deaf_script([address[o] for o in grudge[str(n)]]),
                           check=True)

    def release(self, ctx, node):
        return flush_script(CHAIN)

    def sim_act(self, sim, step, opts, rng, targets):
        mode = step.mode or self.modes[0]
        sim.cut(one_way_grudge(mode, targets, sim.ids), self.name)
        how = "hear no one" if mode == "deaf" else "are heard by no one"
        return f"one-way {mode}: {targets} {how}", lambda: sim.heal_cut(self.name)


PACKAGE = OneWay
