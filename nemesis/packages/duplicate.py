"""duplicate: packets the other nodes send each target arrive twice, each with
``probability``. This kernel has no netem: on every other node an iptables TEE rule (mangle
table, POSTROUTING, chain ``ck-dup``, with a ``statistic`` match) clones the packet and sends
the clone straight to the target as well. TCP takes the copies as retransmissions; what
rides on datagrams sees them twice.
"""
from __future__ import annotations

from ..package import LEADER_FIRST, HeldFault, number

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


class Duplicate(HeldFault):
    name = "duplicate"
    options = {"probability": number(0.0001, 1, "0 < p <= 1")}
    defaults = {"probability": 0.2}
    opens = ("start-duplicate",)
    closes = ("stop-duplicate",)
    colour = "#b279a2"
    target_weights = LEADER_FIRST

    lifted = "duplication stopped on"

    def plan(self, ctx, step, opts, targets):
        p = opts["probability"]
        senders = sorted(set(ctx.ids) - set(targets)) or sorted(ctx.ids)
        value = {"target": step.spec, "nodes": targets, "probability": p, "senders": senders,
                 "mechanism": "iptables TEE on the senders (no netem here)"}
        return value, senders, f"duplicate {step.spec} {targets} p={p:g} (TEE on {senders})"

    async def put(self, ctx, holders, opts, value):
        """The rules are the senders': each clones what it sends the targets."""
        address = {n.node_id: n.address for n in ctx.backend.nodes}
        targets = value["nodes"]
        await ctx.exec_all(holders, lambda n: tee_script(
            [address[t] for t in targets if t != n], opts["probability"]), check=True)

    def release(self, ctx, node):
        return untee_script()

    def sim_act(self, sim, step, opts, rng, targets):
        # Between nodes every message rides on TCP, which takes a copied packet for a
        # retransmission and drops it: nothing reaches the node, as nothing reaches Kafka.
        return (f"duplicate {step.spec} {targets} (TCP drops the copies: no effect on "
                "messages)", lambda: None)


PACKAGE = Duplicate
