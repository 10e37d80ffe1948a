"""clock: skew the nodes' wall clocks through libfaketime, which re-reads the offset from
``FAKETIME_FILE`` on every call (the nodes run under it when the campaign has this package).

Modes: ``bump`` steps each target's clock by up to ``max_skew_s`` (at least ``min_skew_s``,
by default a tenth of ``max_skew_s``), forward or back as ``directions`` allows, for the
fault's length; ``strobe`` flips it between +``strobe_delta_s``
and 0 every ``strobe_period_ms``. Every change is measured afterwards (the node's own wall
clock, from DescribeQuorum) and the measurement recorded beside it.
"""
from __future__ import annotations

import asyncio
import random

from ..package import NodeFault, number
from ..seeded import Seeded

FAKETIME_FILE = "/etc/chaoskraft/faketime"  # libfaketime reads the node's offset from here


def clock_script(offset_s: float, rate: float | None = None) -> list[str]:
    """Set the node's wall-clock offset (and speed factor: libfaketime keeps the one it
    last read when the file names none); written to a temporary file and renamed, so the
    node never reads half of it."""
    value = f"{offset_s:+.3f}" + (f" x{rate:.6f}" if rate is not None else "")
    return ["sh", "-c", f"printf '%s' '{value}' > {FAKETIME_FILE}.tmp && "
                        f"mv {FAKETIME_FILE}.tmp {FAKETIME_FILE}"]


DIRECTIONS = {"back": -1, "forward": 1}


def bump_offsets(nodes: list[int], max_skew_s: float, rng: random.Random,
                 directions=("back", "forward"), min_skew_s: float | None = None
                 ) -> dict[int, float]:
    """A step of up to ``max_skew_s`` per node, at least ``min_skew_s`` (by default a tenth
    of ``max_skew_s``), in one of ``directions``."""
    signs = [DIRECTIONS[d] for d in DIRECTIONS if d in directions]
    low = max_skew_s / 10 if min_skew_s is None else min_skew_s
    return {n: round(rng.choice(signs) * rng.uniform(low, max_skew_s), 3) for n in nodes}


def _check_directions(v) -> str | None:
    if not isinstance(v, list) or not v or any(d not in DIRECTIONS for d in v):
        return f"{v!r} is not a non-empty list of {', '.join(DIRECTIONS)}"
    return None


def seeded_bump(ctx, r, mean_ms):
    """The clock-step timeline: a bump of one node's wall clock (half the time the
    leader's) 1 to 30 s forward or back for 1 to 20 s; a stepped clock is left alone until
    its reset."""
    leader = ctx.leader()
    victim = leader if leader is not None and r.random() < 0.5 else r.choice(ctx.ids)
    if not ctx.clock_step(victim):
        step = r.choice((-1, 1)) * r.randint(1000, 30000)
        ctx.set_clock_step(victim, step)
        ctx.count("clock_steps")
        ctx.trace("clock_step", victim, step)
        ctx.later(r.randint(1000, 20000), _reset, victim)
    return int(r.expovariate(1 / mean_ms)) + 1


def _reset(ctx, r, node):
    if ctx.clock_step(node):
        ctx.trace("clock_reset", node)
        ctx.set_clock_step(node, 0)


class Clock(NodeFault):
    name = "clock"
    modes = ("bump", "strobe")
    options = {"max_skew_s": number(0.001, 86400 * 365, "0 < s <= a year"),
               "min_skew_s": number(0.001, 86400 * 365, "0 < s <= a year"),
               "strobe_delta_s": number(0.001, 86400, "0 < s <= a day"),
               "strobe_period_ms": number(50, 60_000, "50..60000 ms"),
               "directions": _check_directions}
    defaults = {"max_skew_s": 120.0, "strobe_delta_s": 10.0, "strobe_period_ms": 200,
                "directions": ["back", "forward"]}
    opens = ("clock-bump", "clock-strobe")
    closes = ("clock-reset",)
    colour = "#f58518"
    faketime = True
    series_title = "Clock offsets applied (node wall clock)"
    series_unit = "offset (s)"
    seeded = (Seeded("clock-step", mean_ms=lambda o, q: o.clock_step_mean_ms,
                     fire=lambda ctx, r, o, mean_ms: seeded_bump(ctx, r, mean_ms)),)

    @classmethod
    def series(cls, rows: list[tuple[str, float, dict]], end_s: float) -> dict[str, list]:
        """Per node, the offsets its clock was set to (measured where we have it)."""
        points: dict[str, list] = {}
        for f, t, v in rows:
            if f == "clock-bump":
                seen = v.get("measured") or v.get("offsets") or {}
                for n, o in seen.items():
                    points.setdefault(str(n), [(0.0, 0.0)]).append((t, float(o)))
            elif f == "clock-strobe":
                for n in v.get("nodes", []):
                    points.setdefault(str(n), [(0.0, 0.0)]).append((t, float(v.get("delta_s", 0))))
            elif f in cls.closes:
                for n in v.get("nodes", []):
                    points.setdefault(str(n), [(0.0, 0.0)]).append((t, 0.0))
        for pts in points.values():
            pts.append((end_s, pts[-1][1]))
        return points

    @classmethod
    def check_together(cls, options: dict) -> tuple[str, str] | None:
        low = options.get("min_skew_s")
        high = options.get("max_skew_s", cls.defaults["max_skew_s"])
        if low is not None and low > high:
            return "min_skew_s", f"{low!r} is above max_skew_s ({high!r})"
        return None

    def __init__(self) -> None:
        super().__init__()
        self.skewed: set[int] = set()  # clocks not at offset 0
        self.applied: dict[int, float] = {}  # node -> the offset set (a strobe's when on)
        self._strobes: dict[int, asyncio.Task] = {}

    async def act(self, ctx, step, opts, rng, targets):
        value = {"target": step.spec, "nodes": targets}
        self.skewed.update(targets)
        if step.mode == "strobe":
            delta, period_ms = opts["strobe_delta_s"], opts["strobe_period_ms"]
            value.update(delta_s=delta, period_ms=period_ms)
            self.applied.update({n: delta for n in targets})
            ctx.history.record("nemesis", "invoke", "clock-strobe", value=value)
            for n in targets:
                self._strobes[n] = asyncio.create_task(self._strobe(ctx, n, delta, period_ms / 1000))
            ctx.history.record("nemesis", "info", "clock-strobe", value=value)
            label = f"clock strobe {step.spec} {targets} (+{delta:g} s every {period_ms:g} ms)"
        else:
            offsets = bump_offsets(targets, opts["max_skew_s"], rng, opts["directions"],
                                   opts.get("min_skew_s"))
            value["offsets"] = {str(n): o for n, o in offsets.items()}
            self.applied.update(offsets)
            ctx.history.record("nemesis", "invoke", "clock-bump", value=value)
            await ctx.exec_all(targets, lambda n: clock_script(offsets[n]))
            measured = await ctx.measure_clocks(targets)
            value["measured"] = {str(n): o for n, o in measured.items()}
            ctx.history.record("nemesis", "info", "clock-bump", value=value)
            label = f"clock bump {step.spec} {offsets} (measured {measured})"
        return label, lambda: self.reset(ctx, targets)

    def sim_act(self, sim, step, opts, rng, targets):
        if step.mode == "strobe":
            delta, period_ms = opts["strobe_delta_s"], opts["strobe_period_ms"]
            state = {"on": False}

            def flip():
                state["on"] = not state["on"]
                for n in targets:
                    sim.skew_clock(n, delta if state["on"] else 0.0)
                sim.after(period_ms / 1000, flip)
            flip()
            label = f"clock strobe {step.spec} {targets} (+{delta:g} s every {period_ms:g} ms)"
        else:
            offsets = bump_offsets(targets, opts["max_skew_s"], rng, opts["directions"],
                                   opts.get("min_skew_s"))
            for n, offset in offsets.items():
                sim.skew_clock(n, offset)
            label = f"clock bump {step.spec} {offsets}"

        def reset():
            for n in targets:
                sim.skew_clock(n, 0.0)
        return label, reset

    async def _strobe(self, ctx, node: int, delta_s: float, period_s: float) -> None:
        on = False
        while True:
            on = not on
            write = asyncio.ensure_future(asyncio.to_thread(
                ctx.backend.exec, node, clock_script(delta_s if on else 0.0), False))
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                # a cancelled await does not stop the thread: let its write land before the
                # reset's, or the node is left skewed after the reset
                await asyncio.gather(write, return_exceptions=True)
                raise
            await ctx.clock.sleep(period_s)

    async def reset(self, ctx, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & self.skewed)
        if not nodes:
            return
        for n in nodes:
            task = self._strobes.pop(n, None)
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        ctx.history.record("nemesis", "invoke", "clock-reset", value={"nodes": nodes})
        await ctx.exec_all(nodes, lambda n: clock_script(0.0))
        self.skewed.difference_update(nodes)
        ctx.clock_set_back({n: self.applied.pop(n, 0.0) for n in nodes})
        measured = await ctx.measure_clocks(nodes)
        ctx.history.record("nemesis", "info", "clock-reset",
                           value={"nodes": nodes, "measured": {str(k): v for k, v in measured.items()}})
        ctx.log(f"nemesis: clocks reset on {nodes} (measured offsets {measured})")

    async def heal(self, ctx):
        await self.reset(ctx, sorted(self.skewed))

    async def final_heal(self, ctx):
        await ctx.exec_all(ctx.ids, lambda n: clock_script(0.0))


PACKAGE = Clock
