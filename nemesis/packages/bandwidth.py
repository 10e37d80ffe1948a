"""bandwidth: each target's outgoing traffic on the cluster network is capped at
``rate_kbit`` by a token bucket (``tc qdisc ... tbf``, in this kernel; netem is not), with
``burst_kb`` of burst and packets queued at most ``latency_ms`` before they are dropped.
A capped leader falls behind in answering fetches and produces, and its followers behind
in fetching: replication lag and request timeouts without a single packet cut.
"""
from __future__ import annotations

from ..package import LEADER_FIRST, NodeFault, number


def _dev(peer: str) -> str:
    """Shell: the interface a packet to ``peer`` leaves by."""
    return f"$(ip -o route get {peer} | sed -n 's/.* dev \\([^ ]*\\).*/\\1/p')"


def cap_script(peer: str, rate_kbit: float, burst_kb: float, latency_ms: float) -> list[str]:
    return ["sh", "-ec", f"tc qdisc replace dev {_dev(peer)} root tbf rate {rate_kbit:g}kbit "
                         f"burst {burst_kb:g}kb latency {latency_ms:g}ms"]


def uncap_script(peer: str) -> list[str]:
    return ["sh", "-c", f"tc qdisc del dev {_dev(peer)} root 2>/dev/null; true"]


class Bandwidth(NodeFault):
    name = "bandwidth"
    options = {"rate_kbit": number(8, 10_000_000, "8 kbit/s .. 10 Gbit/s"),
               "burst_kb": number(2, 1_000_000, "2 .. 1,000,000 KiB"),
               "latency_ms": number(1, 60_000, "1 .. 60000 ms")}
    defaults = {"rate_kbit": 1000, "burst_kb": 32, "latency_ms": 400}
    opens = ("start-bandwidth",)
    closes = ("stop-bandwidth",)
    colour = "#bcbd22"
    target_weights = LEADER_FIRST

    def __init__(self) -> None:
        super().__init__()
        self.capped: set[int] = set()

    @staticmethod
    def _peer(ctx, node: int) -> str:
        """Another node's address: the cluster network is the route to it."""
        return next(n.address for n in ctx.backend.nodes if n.node_id != node)

    async def act(self, ctx, step, opts, rng, targets):
        rate, burst, latency = opts["rate_kbit"], opts["burst_kb"], opts["latency_ms"]
        value = {"target": step.spec, "nodes": targets, "rate_kbit": rate, "burst_kb": burst,
                 "latency_ms": latency, "mechanism": "tc tbf on the node's egress"}
        ctx.history.record("nemesis", "invoke", "start-bandwidth", value=value)
        await ctx.exec_all(targets, lambda n: cap_script(self._peer(ctx, n), rate, burst, latency),
                           check=True)
        self.capped.update(targets)
        ctx.history.record("nemesis", "info", "start-bandwidth", value=value)
        return (f"bandwidth {step.spec} {targets} capped at {rate:g} kbit/s (tc tbf)",
                lambda: self.stop(ctx, targets))

    async def stop(self, ctx, nodes: list[int]) -> None:
        await self.lift(ctx, self.capped, nodes, "stop-bandwidth",
                        lambda n: uncap_script(self._peer(ctx, n)), "bandwidth cap lifted on")

    async def heal(self, ctx):
        await self.stop(ctx, sorted(self.capped))

    async def final_heal(self, ctx):
        await ctx.exec_all(ctx.ids, lambda n: uncap_script(self._peer(ctx, n)))


PACKAGE = Bandwidth
