"""The runner: one campaign, from images to verdict.

Phases, each logged: images -> cluster up -> wait for a leader -> workload
and nemesis for the time limit -> heal (every partition flushed, every node
started) -> recovery wait -> final reads -> collect node logs -> teardown ->
analysis. The seed (printed and stored) drives the workload generator and
the fault schedule. Ctrl-C (or SIGTERM) at any point heals, tears the
cluster down and keeps the history; the run can then be analysed with
``chaoskraft analyze RUN_DIR``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import random
import signal
import sys
import time
import uuid
from pathlib import Path

import yaml

from node_image.messages import ERROR_NAMES
from nemesis.faults import (LOSS_CHAIN, PARTITION_CHAIN, bump_offsets, clock_script,
                            corrupt_script, drop_script, flush_script, grudge, heal_partitions,
                            loss_script, netem_probe, node_targets, target_partition)
from nemesis.schedule import SCENARIOS, FaultStep, package_options, plan
from workloads.register import RegisterGenerator
from workloads.register_client import Indeterminate, RegisterClient

from .backends import DATA_DIR
from .config import RunConfig
from .history import HistoryWriter
from .store import new_run_dir

PORT = 9093
FINAL_PROCESS_BASE = 1000
EXIT = {True: 0, False: 1, "unknown": 2}
CLOCK_MEASURE_S = 10.0  # how long a clock fault asks the nodes that did not answer again
# How long a fault lasts (uniform in the range). Queue faults outlast the broker session
# (9 s) often enough for the controller to fence the victim and elect new leaders, which
# is where acknowledged-but-unreplicated data is lost.
FAULT_DURATION_S = {"register": (3.0, 6.0), "queue": (5.0, 15.0)}


def grudge_value(g: dict[int, set[int]]) -> dict[str, list[int]]:
    return {str(k): sorted(v) for k, v in g.items()}


class Logger:
    def __init__(self, path: Path, stream=sys.stdout) -> None:
        self._f = open(path, "a", buffering=1)
        self._stream = stream
        self._t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        line = f"[{time.monotonic() - self._t0:7.1f}s] {msg}"
        self._f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + line + "\n")
        print(line, file=self._stream, flush=True)

    def close(self) -> None:
        self._f.close()


async def _ask_all(nodes, ask, within_s: float) -> dict:
    """``ask(node)`` of every node, asking those that did not answer (``None``) again until
    ``within_s`` has passed: on a loaded 2-core machine a node has left a 1 s and a 3 s query
    unanswered while it served."""
    seen: dict = {}
    deadline = time.monotonic() + within_s
    while True:
        asked = [n for n in nodes if n.node_id not in seen]
        seen.update((n.node_id, a) for n, a in zip(asked, await asyncio.gather(*map(ask, asked)))
                    if a is not None)
        if len(seen) == len(nodes) or time.monotonic() >= deadline:
            return seen
        await asyncio.sleep(0.2)


async def describe_all(nodes, timeout_s: float = 1.0, within_s: float = 0.0) -> dict:
    """Each answering node's DescribeQuorum, by node id."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            return await c.describe()
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def clock_offsets(nodes, timeout_s: float = 3.0, within_s: float = 0.0) -> dict[int, float]:
    """Each answering node's wall clock minus ours, in seconds (from its DescribeQuorum); the
    error is at most half the round trip, however long the node took to answer (on a loaded
    machine 1 s was too short for a node to answer at all). With ``within_s``, the nodes that
    did not answer are asked again until that much time has passed."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            before = time.time()
            d = await c.describe()
            after = time.time()
            return round(d.wall_clock_ms / 1000 - (before + after) / 2, 3)
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def active_controller(nodes) -> int | None:
    described = await describe_all(nodes)
    leaders = [(d.epoch, i) for i, d in described.items() if d.role == "Leader"]
    if leaders:
        return max(leaders)[1]
    hints = [(d.epoch, d.leader_id) for d in described.values() if d.leader_id >= 0]
    return max(hints)[1] if hints else None


async def serves(addr: str, port: int = PORT) -> bool:
    """Does the node at ``addr`` answer a register read?"""
    c = RegisterClient(addr, port, 2.0)
    try:
        return (await c.read("__probe__")).outcome == "ok"
    except (Indeterminate, ConnectionRefusedError, OSError):
        return False
    finally:
        await c.close()


async def wait_for_service(nodes, timeout_s: float, log) -> int:
    """Wait until some node accepts a register read; returns the active controller."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leader = await active_controller(nodes)
        if leader is not None and await serves(next(n.address for n in nodes
                                                    if n.node_id == leader)):
            return leader
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the cluster did not serve register reads within {timeout_s:.0f} s")


async def wait_for_every_node(nodes, timeout_s: float, port: int = PORT) -> None:
    """Wait until every node answers a register read (a broker by forwarding it), so that the
    workload starts on a cluster whose nodes all serve: refusals at the start would be set-up,
    not the faults under test."""
    deadline = time.monotonic() + timeout_s

    async def one(node) -> bool:
        while time.monotonic() < deadline:
            if await serves(node.address, port):
                return True
            await asyncio.sleep(0.2)
        return False
    served = await asyncio.gather(*(one(n) for n in nodes))
    missing = [n.node_id for n, ok in zip(nodes, served) if not ok]
    if missing:
        raise TimeoutError(f"nodes {missing} did not serve register reads within {timeout_s:.0f} s")


class Campaign:
    def __init__(self, cfg: RunConfig, backend, history: HistoryWriter, log) -> None:
        self.cfg = cfg
        self.backend = backend
        self.history = history
        self.log = log
        self.addr = {n.node_id: n.address for n in backend.nodes}
        self.ids = sorted(self.addr)
        self.active: dict[int, str] = {}  # fault id -> what it is, for the progress lines
        self._fault_ids = itertools.count()
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self.skewed: set[int] = set()  # clocks not at offset 0
        self.lossy: set[int] = set()  # nodes with packet-loss rules
        self._strobes: dict[int, asyncio.Task] = {}
        self.partitioned = False
        self.keys: set[str] = set()
        # what became of each planned fault step (faults.json beside the history)
        self.fault_outcomes: dict[int, dict] = {}
        self._faults_path = Path(history.path).with_name("faults.json")

    # ------------------------------------------------------------ workload

    async def worker(self, process: int, stop_at: float) -> None:
        gen = RegisterGenerator(self.cfg.seed, self.ids, self.cfg.ops_per_key).ops(process)
        clients: dict[int, RegisterClient] = {}
        interval = 1.0 / self.cfg.rate
        try:
            for op in gen:
                if time.monotonic() >= stop_at:
                    break
                client = clients.get(op.node)
                if client is None:
                    client = clients[op.node] = RegisterClient(self.addr[op.node], PORT,
                                                               self.cfg.op_timeout_s)
                await self.invoke(client, process, op.f, op.key, op.value, op.node)
                await asyncio.sleep(interval)
        finally:
            for c in clients.values():
                await c.close()

    async def invoke(self, client: RegisterClient, process, f: str, key: str, value, node: int) -> str:
        self.keys.add(key)
        h = self.history
        h.record(process, "invoke", f, key, value, node)
        try:
            if f == "read":
                r = await client.read(key)
            elif f == "write":
                r = await client.write(key, value)
            else:
                r = await client.cas(key, value[0], value[1])
        except ConnectionRefusedError:
            h.record(process, "fail", f, key, value, node, "connection-refused")
            return "fail"
        except Indeterminate as exc:
            h.record(process, "info", f, key, value, node, f"indeterminate: {exc}")
            return "info"
        err = ERROR_NAMES.get(r.error, str(r.error)) if r.error else None
        if r.outcome == "ok":
            h.record(process, "ok", f, key, r.value if f == "read" else value, node)
        elif r.outcome == "fail":
            h.record(process, "fail", f, key, value, node, err or "cas-mismatch")
        else:
            h.record(process, "info", f, key, value, node, err or "unknown")
        return r.outcome

    # ------------------------------------------------------------- nemesis

    async def nemesis(self, steps: list[FaultStep], t0: float) -> None:
        """Run the plan: each step starts, lasts its duration and is undone; with
        ``nemesis_combine: concurrent`` every package runs its own timeline at once."""
        async def timeline(mine: list[FaultStep]) -> None:
            for step in mine:
                await asyncio.sleep(max(0.0, t0 + step.at_s - time.monotonic()))
                started = time.monotonic()
                try:
                    stop = await self.start_fault(step)  # a scenario spends part of its duration
                except Exception as exc:
                    self.note_fault(step, "skipped", f"failed to start: {type(exc).__name__}: {exc}")
                    raise
                try:
                    await asyncio.sleep(max(0.0, step.duration_s - (time.monotonic() - started)))
                finally:
                    await asyncio.shield(stop())
        try:
            if self.cfg.nemesis_combine == "concurrent":
                groups: dict[str, list[FaultStep]] = {}
                for step in steps:
                    groups.setdefault(step.kind, []).append(step)
                await asyncio.gather(*(timeline(g) for g in groups.values()))
            else:
                await timeline(steps)
        finally:
            for step in steps:
                if step.index not in self.fault_outcomes:
                    self.note_fault(step, "skipped", "the workload ended before its time came")
            await asyncio.shield(self.stop_faults())

    def note_fault(self, step: FaultStep, status: str, why: str = "",
                   nodes: list[int] | None = None) -> None:
        """Record what became of a planned step (happened / skipped, and why) in faults.json,
        rewritten whole each time (temp + rename), so a crashed harness leaves it readable."""
        self.fault_outcomes[step.index] = {
            "step": step.index, "kind": step.kind, "spec": step.spec, "at_s": step.at_s,
            "status": status, "why": why, "nodes": nodes}
        tmp = self._faults_path.with_suffix(".tmp")
        tmp.write_text(json.dumps([self.fault_outcomes[i] for i in sorted(self.fault_outcomes)],
                                  indent=1) + "\n")
        os.replace(tmp, self._faults_path)
        if status != "happened":
            self.log(f"nemesis: step {step.index} ({step.kind} {step.spec}) skipped: {why}")

    async def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None:
        """The leader of a partition (a random one when None) of the workload's topic (queue
        workload only)."""
        return None

    async def scenario(self, step: FaultStep, rng: random.Random) -> str | None:
        """Act out a scenario step; returns why it was skipped, or None when it happened."""
        raise NotImplementedError(f"the {self.cfg.workload} workload has no {step.kind} scenario")

    def _exec_all(self, nodes, cmd_for, check: bool = False):
        return asyncio.gather(*(asyncio.to_thread(self.backend.exec, n, cmd_for(n), check)
                                for n in nodes))

    async def cut(self, g: dict[int, set[int]], value: dict) -> None:
        self.history.record("nemesis", "invoke", "start-partition", value=value)
        addr = {n.node_id: n.address for n in self.backend.nodes}
        await self._exec_all([n for n, drops in g.items() if drops],
                             lambda n: drop_script([addr[o] for o in sorted(g[n])]), check=True)
        self.partitioned = True
        self.history.record("nemesis", "info", "start-partition", value=value)

    async def kill(self, f: str, targets: list[int], value: dict) -> None:
        self.history.record("nemesis", "invoke", f, value=value)
        await asyncio.gather(*(asyncio.to_thread(self.backend.kill_node, t) for t in targets))
        self.killed.update(targets)
        self.history.record("nemesis", "info", f, value=value)

    async def heal_cut(self) -> None:
        self.history.record("nemesis", "invoke", "stop-partition")
        await self._exec_all(self.ids, lambda n: flush_script(PARTITION_CHAIN))
        self.partitioned = False
        self.history.record("nemesis", "info", "stop-partition")
        self.log("nemesis: partition healed")

    async def restart(self, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & self.killed)
        if not nodes:
            return
        self.history.record("nemesis", "invoke", "start", value={"nodes": nodes})
        await asyncio.gather(*(asyncio.to_thread(self.backend.start_node, t) for t in nodes))
        self.killed.difference_update(nodes)
        self.history.record("nemesis", "info", "start", value={"nodes": nodes})
        self.log(f"nemesis: restarted {nodes}")

    async def resume(self, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & self.paused)
        if not nodes:
            return
        self.history.record("nemesis", "invoke", "resume", value={"nodes": nodes})
        await self._exec_all(nodes, lambda n: ["ck-ctl", "resume"])
        self.paused.difference_update(nodes)
        self.history.record("nemesis", "info", "resume", value={"nodes": nodes})
        self.log(f"nemesis: resumed {nodes}")

    async def reset_clocks(self, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & self.skewed)
        if not nodes:
            return
        for n in nodes:
            task = self._strobes.pop(n, None)
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.history.record("nemesis", "invoke", "clock-reset", value={"nodes": nodes})
        await self._exec_all(nodes, lambda n: clock_script(0.0))
        self.skewed.difference_update(nodes)
        measured = await clock_offsets([n for n in self.backend.nodes if n.node_id in nodes],
                                       within_s=CLOCK_MEASURE_S)
        self.history.record("nemesis", "info", "clock-reset",
                            value={"nodes": nodes, "measured": {str(k): v for k, v in measured.items()}})
        self.log(f"nemesis: clocks reset on {nodes} (measured offsets {measured})")

    async def stop_loss(self, nodes: list[int]) -> None:
        nodes = sorted(set(nodes) & self.lossy)
        if not nodes:
            return
        self.history.record("nemesis", "invoke", "stop-packet-loss", value={"nodes": nodes})
        await self._exec_all(nodes, lambda n: flush_script(LOSS_CHAIN))
        self.lossy.difference_update(nodes)
        self.history.record("nemesis", "info", "stop-packet-loss", value={"nodes": nodes})
        self.log(f"nemesis: packet loss healed on {nodes}")

    async def _strobe(self, node: int, delta_s: float, period_s: float) -> None:
        on = False
        while True:
            on = not on
            await asyncio.to_thread(self.backend.exec, node, clock_script(delta_s if on else 0.0),
                                    False)
            await asyncio.sleep(period_s)

    async def _aim(self, spec: str, rng: random.Random) -> tuple[int | None, int | None]:
        controller = leader = None
        if spec in ("isolate-controller", "active-controller"):
            controller = await active_controller(self.backend.nodes)
        if spec in ("isolate-partition-leader", "partition-leader") or \
                spec.startswith("leader-of:"):
            leader = await self.partition_leader(rng, target_partition(spec))
        return controller, leader

    async def start_fault(self, step: FaultStep):
        """Start one step's fault; returns the coroutine function that undoes it."""
        rng = random.Random(f"{self.cfg.seed}-fault-{step.index}")
        fid = next(self._fault_ids)
        if step.kind in SCENARIOS:
            before = set(self.killed)
            try:
                skipped = await self.scenario(step, rng)
            except asyncio.CancelledError:
                # The workload ended while the scenario was acting: what it did so far happened.
                if self.partitioned or self.killed - before:
                    self.note_fault(step, "happened", "cut short when the workload ended",
                                    nodes=sorted(self.killed - before))
                raise
            mine = sorted(self.killed - before)
            if skipped:
                self.note_fault(step, "skipped", skipped)
            else:
                self.note_fault(step, "happened", nodes=mine)

            async def undo_scenario():
                if self.partitioned:
                    await self.heal_cut()
                await self.restart(mine)
                self.active.pop(-1, None)
            return undo_scenario
        opts = package_options(step.kind, self.cfg.nemesis_options.get(step.kind),
                               self.cfg.workload)
        controller, leader = await self._aim(step.spec, rng)
        if step.kind == "partition":
            g = grudge(step.spec, self.ids, rng, controller, leader)
            cut = sorted(n for n, drops in g.items() if drops)
            if not cut:
                self.note_fault(step, "skipped", f"the {step.spec} shape cuts no link now")
                return _nothing
            await self.cut(g, {"shape": step.spec, "grudge": grudge_value(g)})
            self.note_fault(step, "happened", nodes=cut)
            label = f"partition {step.spec}"

            async def undo():
                if self.partitioned:
                    await self.heal_cut()
        else:
            targets = node_targets(step.spec, self.ids, rng, controller, leader)
            if not targets:
                self.note_fault(step, "skipped", f"no node matches the target {step.spec!r} now")
                return _nothing
            label, undo = await self._start_on_nodes(step, targets, opts, rng)
            self.note_fault(step, "happened", nodes=sorted(targets))
        self.active[fid] = label
        self.log(f"nemesis: {label}")

        async def stop():
            try:
                await undo()
            finally:
                self.active.pop(fid, None)
        return stop

    async def _start_on_nodes(self, step: FaultStep, targets: list[int], opts: dict,
                              rng: random.Random):
        kind, value = step.kind, {"target": step.spec, "nodes": targets}
        if kind in ("kill", "power-loss"):
            await self.kill(kind, targets, value)
            return f"{kind} {step.spec} {targets}", lambda: self.restart(targets)
        if kind == "pause":
            self.history.record("nemesis", "invoke", "pause", value=value)
            await self._exec_all(targets, lambda n: ["ck-ctl", "pause"])
            self.paused.update(targets)
            self.history.record("nemesis", "info", "pause", value=value)
            return f"pause {step.spec} {targets}", lambda: self.resume(targets)
        if kind == "clock":
            self.skewed.update(targets)
            if step.mode == "strobe":
                delta, period_ms = opts["strobe_delta_s"], opts["strobe_period_ms"]
                value.update(delta_s=delta, period_ms=period_ms)
                self.history.record("nemesis", "invoke", "clock-strobe", value=value)
                for n in targets:
                    self._strobes[n] = asyncio.create_task(self._strobe(n, delta, period_ms / 1000))
                self.history.record("nemesis", "info", "clock-strobe", value=value)
                label = f"clock strobe {step.spec} {targets} (+{delta:g} s every {period_ms:g} ms)"
            else:
                offsets = bump_offsets(targets, opts["max_skew_s"], rng)
                value["offsets"] = {str(n): o for n, o in offsets.items()}
                self.history.record("nemesis", "invoke", "clock-bump", value=value)
                await self._exec_all(targets, lambda n: clock_script(offsets[n]))
                measured = await clock_offsets([n for n in self.backend.nodes
                                                if n.node_id in targets], within_s=CLOCK_MEASURE_S)
                value["measured"] = {str(n): o for n, o in measured.items()}
                self.history.record("nemesis", "info", "clock-bump", value=value)
                label = f"clock bump {step.spec} {offsets} (measured {measured})"
            return label, lambda: self.reset_clocks(targets)
        if kind == "packet-loss":
            p = opts["probability"]
            value["probability"] = p
            self.history.record("nemesis", "invoke", "start-packet-loss", value=value)
            others = {n.node_id: n.address for n in self.backend.nodes}
            await self._exec_all(targets, lambda n: loss_script(
                [a for i, a in sorted(others.items()) if i != n], p), check=True)
            self.lossy.update(targets)
            self.history.record("nemesis", "info", "start-packet-loss", value=value)
            return (f"packet loss {step.spec} {targets} (p={p:g})",
                    lambda: self.stop_loss(targets))
        if kind == "corrupt":
            await self.kill("kill", targets, {**value, "for": "corrupt"})
            value.update(mode=step.mode, files=opts["files"][0])
            self.history.record("nemesis", "invoke", "corrupt", value=value)
            damage = {}
            for n in targets:
                _, out = await asyncio.to_thread(
                    self.backend.exec, n, corrupt_script(DATA_DIR, step.mode, opts["files"][0],
                                                         f"{self.cfg.seed}-{step.index}-{n}"))
                damage[str(n)] = json.loads(out.strip().splitlines()[-1] or "[]")
            value["damage"] = damage
            self.history.record("nemesis", "info", "corrupt", value=value)
            files = sum(len(d) for d in damage.values())
            return (f"corrupt {step.mode} {step.spec} {targets} ({files} segments)",
                    lambda: self.restart(targets))
        raise AssertionError(f"no fault for package {kind!r}")

    async def stop_faults(self) -> None:
        """Undo every fault still in force."""
        if self.partitioned:
            await self.heal_cut()
        await self.stop_loss(sorted(self.lossy))
        await self.restart(sorted(self.killed))
        await self.resume(sorted(self.paused))
        await self.reset_clocks(sorted(self.skewed))
        self.active.clear()

    # --------------------------------------------------------------- phases

    async def progress(self, t0: float, limit: float) -> None:
        while True:
            await asyncio.sleep(5)
            c = self.history.counts
            faults = ", ".join(self.active.values()) or "none"
            self.log(f"{time.monotonic() - t0:5.0f}/{limit:.0f} s: {c['ok']} ok, {c['fail']} fail, "
                     f"{c['info']} info; faults: {faults}")

    async def final_reads(self, leader: int) -> None:
        client = RegisterClient(self.addr[leader], PORT, self.cfg.op_timeout_s)
        process = FINAL_PROCESS_BASE
        try:
            for key in sorted(self.keys):
                for _attempt in range(5):
                    outcome = await self.invoke(client, process, "read", key, None, leader)
                    if outcome == "ok":
                        break
                    await asyncio.sleep(0.5)
        finally:
            await client.close()

    async def setup(self) -> None:
        """Workload set-up once the cluster serves (the queue creates its topic)."""

    async def workers(self, stop_at: float) -> None:
        await asyncio.gather(*(self.worker(p, stop_at) for p in range(self.cfg.concurrency)))

    async def final_phase(self) -> None:
        leader = await wait_for_service(self.backend.nodes, 60, self.log)
        self.log(f"final reads of {len(self.keys)} keys on n{leader}")
        await self.final_reads(leader)

    async def run(self) -> None:
        cfg = self.cfg
        self.log("waiting for the cluster to elect a controller")
        leader = await wait_for_service(self.backend.nodes, 60, self.log)
        self.log(f"active controller: n{leader}")
        await wait_for_every_node(self.backend.nodes, 60)
        self.log("every node serves")
        await self.setup()
        if "packet-loss" in cfg.nemesis:
            rc, out = await asyncio.to_thread(self.backend.exec, self.ids[0], netem_probe(), False)
            self.log("packet loss: iptables statistic rules; tc netem is "
                     + ("available in this kernel" if rc == 0 else
                        f"not available in this kernel ({out.strip()[:100]}): no netem "
                        f"delay or loss in this campaign"))
        steps = fault_plan(cfg)
        self.log(f"workload {cfg.workload}: {cfg.concurrency} clients at {cfg.rate:g} ops/s each "
                 f"for {cfg.time_limit_s:g} s; {len(steps)} faults planned")
        t0 = time.monotonic()
        stop_at = t0 + cfg.time_limit_s
        progress = asyncio.create_task(self.progress(t0, cfg.time_limit_s))
        nemesis = asyncio.create_task(self.nemesis(steps, t0))
        try:
            await self.workers(stop_at)
        finally:
            nemesis.cancel()
            progress.cancel()
            await asyncio.gather(nemesis, progress, return_exceptions=True)
        self.log("heal: all partitions flushed, all nodes started")
        self.history.record("nemesis", "invoke", "heal")
        await asyncio.to_thread(heal_partitions, self.backend)
        for n in self.ids:
            await asyncio.to_thread(self.backend.start_node, n)  # also resumes a paused node
        if "clock" in cfg.nemesis:
            await self._exec_all(self.ids, lambda n: clock_script(0.0))
        self.history.record("nemesis", "info", "heal")
        self.log(f"recovery: waiting {cfg.recovery_s:g} s")
        await asyncio.sleep(cfg.recovery_s)
        await self.final_phase()


async def _nothing() -> None:
    """The undo of a fault step that was skipped."""


def install_interrupt_handlers() -> None:
    """SIGTERM and SIGINT interrupt the run (teardown, history kept, exit 130), however the
    process was started: one that inherits SIGINT as ignored (a background job of a
    non-interactive shell, a pytest-xdist worker's child) gets Python's handler back."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    try:
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass  # not the main thread


def node_config(cfg: RunConfig) -> dict[str, str]:
    """Node properties for the run: the campaign's, plus what its nemesis needs."""
    props = dict(cfg.node_config)
    if "power-loss" in cfg.nemesis:
        props.setdefault("chaoskraft.power.loss.enable", "true")
    if "strand-replica" in cfg.nemesis:
        # the stranded follower must leave the ISR within the scenario's first phase
        props.setdefault("replica.lag.time.max.ms", "3000")
    if "depose-leader" in cfg.nemesis:
        # the deposed leader must lead again before the run ends
        props.setdefault("leader.imbalance.check.interval.seconds", "3")
    return props


def fault_plan(cfg: RunConfig) -> list[FaultStep]:
    """The run's fault schedule: a pure function of the resolved config (seed included)."""
    return plan(cfg.seed, cfg.nemesis, cfg.time_limit_s, cfg.nemesis_interval_s,
                duration_s=FAULT_DURATION_S[cfg.workload], workload=cfg.workload,
                power_loss_targets=tuple(cfg.power_loss_targets), options=cfg.nemesis_options,
                combine=cfg.nemesis_combine)


def generated_ops(cfg: RunConfig, per_process: int | None = None):
    """What the workload generator hands each process, in order: the first ``per_process``
    operations (default: half again what the rate allows in the time limit)."""
    from workloads.queue import QueueGenerator
    n = per_process or int(cfg.rate * cfg.time_limit_s * 1.5) + 10
    if cfg.workload == "queue":
        gen = QueueGenerator(cfg.seed, cfg.partitions)
    else:
        gen = RegisterGenerator(cfg.seed, list(range(1, cfg.nodes + 1)), cfg.ops_per_key)
    for p in range(cfg.concurrency):
        for op in itertools.islice(gen.ops(p), n):
            yield {"process": p, "f": op.f, "key": op.key, "value": op.value}


def write_plan(cfg: RunConfig, run_dir: Path) -> None:
    """plan.json (the fault schedule) and generated.jsonl (the generator's operations):
    ``chaoskraft reproduce`` compares them between a run and its re-run."""
    steps = [dataclasses.asdict(s) for s in fault_plan(cfg)]
    (run_dir / "plan.json").write_text(json.dumps(steps, indent=1) + "\n")
    with open(run_dir / "generated.jsonl", "w") as f:
        for row in generated_ops(cfg):
            f.write(json.dumps(row) + "\n")


def make_backend(cfg: RunConfig, run_id: str, image: str, log):
    from .backends.docker_backend import DockerCluster
    if cfg.backend == "docker":
        return DockerCluster(run_id, image, cfg.nodes, cfg.controllers, node_config(cfg), cfg.bugs,
                             seed=cfg.seed, log=log, faketime="clock" in cfg.nemesis), None
    from .backends.ssh_backend import ssh_over_docker
    return ssh_over_docker(cfg, run_id, image, log)


def run(cfg: RunConfig, root: Path | None = None, stream=None, run_dir: Path | None = None) -> int:
    """Run one campaign; returns Jepsen's exit code (0 valid, 1 invalid, 2 unknown).
    Progress goes to ``stream`` (stdout by default) and to the run's harness.log. ``run_dir``:
    a directory made by ``store.new_run_dir`` (the caller then knows where the run is)."""
    from .analyze import analyze
    from .images import build_images
    if cfg.seed is None:
        cfg.seed = random.SystemRandom().randrange(1 << 31)
    run_dir = run_dir or new_run_dir(Path(root or cfg.results_dir), cfg.test, cfg.seed)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    write_plan(cfg, run_dir)
    log = Logger(run_dir / "harness.log", stream or sys.stdout)
    log(f"run {run_dir} seed {cfg.seed} (reproduce with: chaoskraft run --seed {cfg.seed} ...; "
        f"the resolved config is in config.yaml)")
    history = HistoryWriter(run_dir / "history.jsonl")
    install_interrupt_handlers()
    run_id = f"{uuid.uuid4().hex[:8]}"
    log(f"run id {run_id}: its Docker resources carry the label chaoskraft.run={run_id} "
        f"(`chaoskraft cleanup --run {run_id}` removes them if the harness is killed)")
    backend = owner = None
    interrupted = False
    error = None
    try:
        log("images: building or reusing")
        image = build_images(log=log)
        backend, owner = make_backend(cfg, run_id, image, log)
        (owner or backend).up()
        if owner is not None:
            backend.connect()
        campaign_cls = Campaign
        if cfg.workload == "queue":
            from .queue_campaign import QueueCampaign
            campaign_cls = QueueCampaign
        asyncio.run(campaign_cls(cfg, backend, history, log).run())
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: healing and tearing down; the history is kept")
    except Exception as exc:  # noqa: BLE001 - reported, then teardown, then re-raised
        error = exc
        log(f"run failed: {type(exc).__name__}: {exc}")
    finally:
        history.close()
        if backend is not None:
            try:
                if backend.nodes:
                    log("collecting node logs")
                    backend.collect_logs(run_dir / "nodes")
            except Exception as exc:  # noqa: BLE001 - teardown must go on
                log(f"could not collect node logs: {exc}")
            if hasattr(backend, "close"):
                backend.close()
        if owner is not None or backend is not None:
            log("teardown: removing containers, volumes and network")
            (owner or backend).down()
    if error is not None:
        raise error
    if interrupted:
        log(f"history kept in {run_dir}/history.jsonl; analyse it with: chaoskraft analyze {run_dir}")
        log.close()
        return 130
    results = analyze(run_dir, engine=cfg.engine, spark_master=cfg.spark_master,
                      budget_s=cfg.check_budget_s, log=log)
    word = {True: "valid", False: "invalid", "unknown": "unknown"}[results["valid"]]
    log(f"verdict: {word}")
    log(f"run directory: {run_dir}")
    log.close()
    return EXIT[results["valid"]]
