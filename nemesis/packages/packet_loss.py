"""packet-loss: each target drops packets from the other nodes at random with
``probability`` (iptables ``statistic`` rules in their own chain, so healing a partition
leaves them in place). This kernel has no netem: the package says at the start whether
delay and loss by tc would have been available (the delay package holds packets in an NFQUEUE
program instead)."""
from __future__ import annotations

import asyncio

from ..faults import LOSS_CHAIN, chain_script, flush_script
from ..package import HeldFault, number


def loss_script(sources: list[str], probability: float) -> list[str]:
    """The command that drops packets from ``sources`` at random with ``probability``."""
    return chain_script(LOSS_CHAIN, [f"-s {a} -m statistic --mode random "
                                      f"--probability {probability:.4f} -j DROP"
                                      for a in sources])


def netem_probe() -> list[str]:
    """Whether the kernel has sch_netem: add and remove a 1 ms delay on the loopback."""
    return ["sh", "-c", "tc qdisc add dev lo root netem delay 1ms 2>&1 && "
                        "tc qdisc del dev lo root 2>&1"]


class PacketLoss(HeldFault):
    name = "packet-loss"
    intends = ("isr-shrink",)
    options = {"probability": number(0.0001, 1, "0 < p <= 1")}
    defaults = {"probability": 0.3}
    opens = ("start-packet-loss",)
    closes = ("stop-packet-loss",)
    colour = "#9d755d"

    lifted = "packet loss healed on"

    async def prepare(self, ctx):
        rc, out = await asyncio.to_thread(ctx.backend.exec, ctx.ids[0], netem_probe(), False)
        ctx.log("packet loss: iptables statistic rules; tc netem is "
                + ("available in this kernel" if rc == 0 else
                   f"not available in this kernel ({out.strip()[:100]}): loss by iptables "
                   f"statistic rules, delay and reordering by the delay package's NFQUEUE "
                   f"program"))

    def plan(self, ctx, step, opts, targets):
        p = opts["probability"]
        value = {"target": step.spec, "nodes": targets, "probability": p}
        return value, targets, f"packet loss {step.spec} {targets} (p={p:g})"

    async def put(self, ctx, holders, opts, value):
        others = {n.node_id: n.address for n in ctx.backend.nodes}
        await ctx.exec_all(holders, lambda n: loss_script(
            [a for i, a in sorted(others.items()) if i != n], opts["probability"]), check=True)

    def release(self, ctx, node):
        return flush_script(LOSS_CHAIN)

    def sim_act(self, sim, step, opts, rng, targets):
        # Node-to-node traffic is TCP: a lost packet is sent again after the kernel's
        # retransmission timeout, so the message arrives late.
        sim.inbound(targets, loss=opts["probability"])
        return (f"packet-loss {step.spec} {targets} p={opts['probability']:g}",
                lambda: sim.clear_inbound(targets))


PACKAGE = PacketLoss
