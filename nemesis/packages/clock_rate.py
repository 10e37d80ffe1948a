"""clock-rate: a node's wall clock runs fast or slow (libfaketime's speed factor, as Jepsen's
``rand-factor`` clocks) for the fault's length, while its monotonic clock keeps time; then
the clock is back at true time.

Each target draws a rate, log-uniform in ``rate`` ([low, high]; the default 0.25 to 4: a
quarter as fast to four times as fast). The nodes run under libfaketime (as for the clock
package), which reads ``FAKETIME_FILE`` on every call. libfaketime counts a rate from the
process's start (wall = real + D + (R - 1) * E, E the process's age), so the package
computes E in the node from the node process's start time and writes ``+D xR`` with
D = D0 + (1 - R) * E (D0: the offset in force): the clock changes pace without jumping
(within the 10 ms of /proc's clock ticks). The reset writes ``+0 x1``: true time again. Every change is measured
(the node's own wall clock, from DescribeQuorum) and the rate the measurements show is
recorded when the fault ends.

Limits: a node restarted while a rate is in force starts from the same file, so its clock
runs at R from its own start and jumps by D; libfaketime also scales the node's sleeps and
poll timeouts by 1/R, so on a slow clock the node's event loop wakes late (the simulated
form changes the wall clock's pace only). The clock package and this one write the same
file: in one campaign their faults must not overlap (the campaign validator refuses both
under ``nemesis_combine: concurrent``).
"""
from __future__ import annotations

import math
import random

from ..package import LEADER_FIRST, NodeFault, Skipped
from .clock import FAKETIME_FILE, clock_script

NODE_PID_FILE = "/run/chaoskraft/node.pid"  # the node's supervisor writes the node's pid here
RATE_WINDOW_S = 1.0  # the shortest time between two measurements a rate is computed from


def rate_script(rate: float) -> list[str]:
    """Make the node's wall clock run at ``rate`` from now, without a jump: the offset that
    keeps it continuous is computed in the node from its process's age (field 22 of
    /proc/PID/stat, in clock ticks since boot, against /proc/uptime)."""
    awk = ("BEGIN { e = up - st / hz; d0 = cur + 0; "
           "printf \"%+.3f x%.6f\", d0 + (1 - r) * e, r }")
    return ["sh", "-c",
            f"pid=$(cat {NODE_PID_FILE}) && stat=$(cat /proc/$pid/stat) && "
            f"st=$(echo \"$stat\" | sed 's/.*) //' | cut -d' ' -f20) && [ -n \"$st\" ] && "
            f"up=$(cut -d' ' -f1 /proc/uptime) && hz=$(getconf CLK_TCK) && "
            f"cur=$(cut -d' ' -f1 {FAKETIME_FILE} 2>/dev/null || echo 0) && "
            f"awk -v up=\"$up\" -v st=\"$st\" -v hz=\"$hz\" -v cur=\"${{cur:-0}}\" "
            f"-v r={rate!r} '{awk}' > {FAKETIME_FILE}.tmp && "
            f"mv {FAKETIME_FILE}.tmp {FAKETIME_FILE}"]


def draw_rates(nodes: list[int], low: float, high: float,
               rng: random.Random) -> dict[int, float]:
    """A rate per node, log-uniform between ``low`` and ``high``."""
    return {n: round(math.exp(rng.uniform(math.log(low), math.log(high))), 4) for n in nodes}


def _check_rate(v) -> str | None:
    if (not isinstance(v, list) or len(v) != 2
            or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v)):
        return f"{v!r} is not [low, high]"
    if not 0.01 <= v[0] <= v[1] <= 100:
        return f"{v!r} is out of range (0.01 <= low <= high <= 100)"
    return None


class ClockRate(NodeFault):
    name = "clock-rate"
    weight = 1
    options = {"rate": _check_rate}
    defaults = {"rate": [0.25, 4.0], "duration_s": [5.0, 15.0]}
    opens = ("clock-rate",)
    closes = ("clock-rate-reset",)
    colour = "#e45756"
    faketime = True
    intends = ("raft-leader-elected", "raft-leader-resigned")
    target_weights = LEADER_FIRST
    def __init__(self) -> None:
        super().__init__()
        self.skewed: dict[int, tuple[float, float, float]] = {}  # node -> rate, at, offset

    async def act(self, ctx, step, opts, rng, targets):
        rates = draw_rates(targets, *opts["rate"], rng)
        value = {"target": step.spec, "nodes": targets, "rates": {str(n): r for n, r in rates.items()}}
        ctx.history.record("nemesis", "invoke", "clock-rate", value=value)
        outs = await ctx.exec_all(targets, lambda n: rate_script(rates[n]))
        failed = {str(n): out.strip()[-200:] for n, (rc, out) in zip(targets, outs) if rc}
        if failed:  # a node whose process is down has no age to count a rate from
            value["failed"] = failed
            targets = [n for n in targets if str(n) not in failed]
        measured = await ctx.measure_clocks(targets) if targets else {}
        now = ctx.clock.monotonic()
        for n in targets:
            self.skewed[n] = (rates[n], now, measured.get(n, 0.0))
        value["measured"] = {str(n): o for n, o in measured.items()}
        ctx.history.record("nemesis", "info", "clock-rate", value=value)
        if not targets:
            raise Skipped(f"no target's clock took the rate: {failed}")
        return f"{self.name} {step.spec} {rates}", lambda: self.reset(ctx, targets)

    def sim_act(self, sim, step, opts, rng, targets):
        rates = draw_rates(targets, *opts["rate"], rng)
        for n, r in rates.items():
            sim.clock_rate(n, r)

        def reset():
            for n in targets:
                sim.reset_clock(n)
        return f"{self.name} {step.spec} {rates}", reset

    async def reset(self, ctx, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & set(self.skewed))
        if not nodes:
            return
        before = await ctx.measure_clocks(nodes)
        now = ctx.clock.monotonic()
        seen = {}
        for n in nodes:
            rate, at, offset = self.skewed[n]
            # over a shorter window (a start that took most of the fault's length on a busy
            # machine) the two measurements' own error is the rate: none is recorded
            if n in before and now - at >= RATE_WINDOW_S:
                seen[str(n)] = round(1 + (before[n] - offset) / (now - at), 3)
        ctx.history.record("nemesis", "invoke", "clock-rate-reset",
                           value={"nodes": nodes, "measured_rates": seen})
        await ctx.exec_all(nodes, lambda n: clock_script(0.0, 1.0))
        for n in nodes:
            del self.skewed[n]
        ctx.clock_set_back(before)  # a clock that ran fast goes back to true time
        measured = await ctx.measure_clocks(nodes)
        ctx.history.record("nemesis", "info", "clock-rate-reset",
                           value={"nodes": nodes, "measured_rates": seen,
                                  "measured": {str(k): v for k, v in measured.items()}})
        ctx.log(f"nemesis: clock rates reset on {nodes} (measured rates {seen}, offsets "
                f"after {measured})")

    async def heal(self, ctx):
        await self.reset(ctx, sorted(self.skewed))

    async def final_heal(self, ctx):
        await ctx.exec_all(ctx.ids, lambda n: clock_script(0.0, 1.0))


PACKAGE = ClockRate
