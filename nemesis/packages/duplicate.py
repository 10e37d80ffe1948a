"""duplicate: packets the other nodes send each target arrive twice, each with
``probability``. This kernel has no netem: on every other node an iptables TEE rule (mangle
table, POSTROUTING, chain ``ck-dup``, with a ``statistic`` match) clones the packet and sends
the clone straight to the target as well. TCP takes the copies as retransmissions; what
rides on datagrams sees them twice.
"""
from __future__ import annotations

from ..package import LEADER_FIRST, NodeFault, number

CHAIN = "ck-dup"


def tee_script(targets: list[str], probability: float) -> list[str]:
    """On a sender: clone what goes to each of ``targets`` with ``probability``."""
    lines = [f"iptables -t mangle -N {CHAIN} 2>/dev/null || true",
             f"iptables -t mangle -C POSTROUTING -j {CHAIN} 2>/dev/null || "
             f"iptables -t mangle -I POSTROUTING 1 -j {CHAIN}"]
    lines += [f"iptables -t mangle -A {CHAIN} -d {a} -m statistic --mode random "
              f"--probability {probability:.4f} -j TEE --gateway {a}" for a in targets]
    return ["sh", "-ec", "\n".join(lines)]


def untee_script() -> list[str]:
    return ["sh", "-c", f"iptables -t mangle -F {CHAIN} 2>/dev/null; true"]


class Duplicate(NodeFault):
    name = "duplicate"
    options = {"probability": number(0.0001, 1, "0 < p <= 1")}
    defaults = {"probability": 0.2}
    opens = ("start-duplicate",)
    closes = ("stop-duplicate",)
    colour = "#b279a2"
    target_weights = LEADER_FIRST

    def __init__(self) -> None:
        super().__init__()
        self.senders: set[int] = set()  # nodes with rules in force

    async def act(self, ctx, step, opts, rng, targets):
        p = opts["probability"]
        address = {n.node_id: n.address for n in ctx.backend.nodes}
        senders = sorted(set(ctx.ids) - set(targets)) or sorted(ctx.ids)
        value = {"target": step.spec, "nodes": targets, "probability": p, "senders": senders,
                 "mechanism": "iptables TEE on the senders (no netem here)"}
        ctx.history.record("nemesis", "invoke", "start-duplicate", value=value)
        await ctx.exec_all(senders, lambda n: tee_script(
            [address[t] for t in targets if t != n], p), check=True)
        self.senders.update(senders)
        ctx.history.record("nemesis", "info", "start-duplicate", value=value)
        return (f"duplicate {step.spec} {targets} p={p:g} (TEE on {senders})",
                lambda: self.stop(ctx, senders))

    async def stop(self, ctx, nodes: list[int]) -> None:
        await self.lift(ctx, self.senders, nodes, "stop-duplicate", lambda n: untee_script(),
                        "duplication stopped on")

    async def heal(self, ctx):
        await self.stop(ctx, sorted(self.senders))

    async def final_heal(self, ctx):
        await ctx.exec_all(ctx.ids, lambda n: untee_script())

    def sim_act(self, sim, step, opts, rng, targets):
        # Between nodes every message rides on TCP, which takes a copied packet for a
        # retransmission and drops it: nothing reaches the node, as nothing reaches Kafka.
        return (f"duplicate {step.spec} {targets} (TCP drops the copies: no effect on "
                "messages)", lambda: None)


PACKAGE = Duplicate
