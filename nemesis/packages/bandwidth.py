"""bandwidth: each target's outgoing traffic on the cluster network is capped at
``rate_kbit`` by a token bucket (``tc qdisc ... tbf``, in this kernel; netem is not), with
``burst_kb`` of burst and packets queued at most ``latency_ms`` before they are dropped.
A capped leader falls behind in answering fetches and produces, and its followers behind
in fetching: replication lag and request timeouts without a single packet cut.
"""
from __future__ import annotations

from ..package import LEADER_FIRST, HeldFault, number


def _dev(peer: str) -> str:
    """Shell: the interface a packet to ``peer`` leaves by."""
    return f"$(ip -o route get {peer} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')"


def cap_script(peer: str, rate_kbit: float, burst_kb: float, latency_ms: float) -> list[str]:
    return ["sh", "-ec", f"tc qdisc replace dev {_dev(peer)} root tbf rate {rate_kbit:g}kbit "
                         f"burst {burst_kb:g}kb latency {latency_ms:g}ms"]


def uncap_script(peer: str) -> list[str]:
    return ["sh", "-c", f"tc qdisc del dev {_dev(peer)} root 2>/dev/null; true"]


class Bandwidth(HeldFault):
    name = "bandwidth"
    options = {"rate_kbit": number(8, 10_000_000, "8 kbit/s .. 10 Gbit/s"),
               "burst_kb": number(2, 1_000_000, "2 .. 1,000,000 KiB"),
               "latency_ms": number(1, 60_000, "1 .. 60000 ms")}
    defaults = {"rate_kbit": 1000, "burst_kb": 32, "latency_ms": 400}
    opens = ("start-bandwidth",)
    closes = ("stop-bandwidth",)
    colour = "#bcbd22"
    target_weights = LEADER_FIRST

    lifted = "bandwidth cap lifted on"

    @staticmethod
    def _peer(ctx, node: int) -> str:
        """Another node's address: the cluster network is the route to it."""
        return next(n.address for n in ctx.backend.nodes if n.node_id != node)

    def plan(self, ctx, step, opts, targets):
        rate, burst, latency = opts["rate_kbit"], opts["burst_kb"], opts["latency_ms"]
        value = {"target": step.spec, "nodes": targets, "rate_kbit": rate, "burst_kb": burst,
                 "latency_ms": latency, "mechanism": "tc tbf on the node's egress"}
        return value, targets, f"bandwidth {step.spec} {targets} capped at {rate:g} kbit/s (tc tbf)"

    async def put(self, ctx, holders, opts, value):
        await ctx.exec_all(holders, lambda n: cap_script(
            self._peer(ctx, n), opts["rate_kbit"], opts["burst_kb"], opts["latency_ms"]),
            check=True)

    def release(self, ctx, node):
        return uncap_script(self._peer(ctx, node))

PACKAGE = Bandwidth
