"""A campaign: the workload and the nemesis against a cluster that is up, then the heal,
the recovery wait and the final phase (``Campaign.run``). It knows no workload and no fault
by name. The workload (``workloads.registry``, by ``cfg.workload``) sets itself up, runs
its clients and its final phase through the ``workloads.workload.WorkloadRun`` it opens
on the campaign. The nemesis runs the fault packages of nemesis/packages, which act on the
campaign through the ``nemesis.package.FaultContext`` it offers (node lifecycle,
partitions, node queries).
"""
from __future__ import annotations

import asyncio
import itertools
import random
import struct
import time
from pathlib import Path

from core.run_dir import RunDir
from nemesis.faults import (PARTITION_CHAIN, aimed_at, drop_script, flush_script, heal_partitions,
                            target_partition)
from nemesis.package import NotReached, Skipped
from nemesis.schedule import REGISTRY, FaultStep, package_options, plan
from node_image import messages as m
from workloads.nodes import (BRING_UP_S, KAFKA_PORT, active_controller, change_voter,
                             clock_offsets, feature_levels, metadata, quorum_state,
                             wait_for_every_node, wait_for_service)
from workloads.registry import WORKLOADS
from workloads.workload import Deadline

from .backends import DATA_DIR, NoMachine
from .clock import REAL_CLOCK
from .config import RunConfig
from .history import HistoryWriter
from .quorum_admin import QuorumChangeError, retrying, unregister_broker, update_features

CLOCK_MEASURE_S = 10.0  # how long a clock fault asks the nodes that did not answer again
ACKED_WRITES_S = 60.0  # the longest a fault waits for the writes it needs acknowledged


def machine_pressure() -> str:
    """The machine's CPU and I/O pressure over the last 10 s (Linux PSI: the share of time
    some task waited), for the progress lines: a run that went wrong on a stalled machine
    says so. Empty where the kernel has no PSI."""
    parts = []
    for what in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{what}") as f:
                some = f.readline().split()[1].split("=")[1]
        except (OSError, IndexError):
            return ""
        parts.append(f"{what} {float(some):.0f}%")
    return f"; machine waiting on {', '.join(parts)}"


class Campaign:
    def __init__(self, cfg: RunConfig, backend, history: HistoryWriter, log,
                 clock=REAL_CLOCK, steps: list | None = None, generator=None) -> None:
        """``steps`` (the fault plan) and ``generator`` (the workload's operations): the ones
        the run wrote to plan.json and generated.jsonl; made from ``cfg`` when not given."""
        self.cfg = cfg
        self.steps = fault_plan(cfg) if steps is None else steps
        self.generator = generator if generator is not None else \
            WORKLOADS[cfg.workload].generator(cfg)
        self.clock = clock  # harness.clock: the nemesis and the packages wait on it
        self.backend = backend
        self.history = history
        self.log = log
        self.addr = {n.node_id: n.address for n in backend.nodes}
        self.ids = sorted(self.addr)
        self.active: dict[int, str] = {}  # fault id -> what it is, for the progress lines
        self._fault_ids = itertools.count()
        self.killed: set[int] = set()
        self.retired: set[int] = set()  # out of the cluster for good (``add_broker``)
        self.moving: set[int] = set()  # partitions a scenario is moving (decommission)
        self.partitioned = False
        self.data_dir = DATA_DIR
        # one object per fault package of the campaign, holding its faults' state
        self.packages = {name: REGISTRY[name]() for name in cfg.nemesis}
        # what became of each planned fault step (faults.json beside the history)
        self.fault_outcomes: dict[int, dict] = {}
        self.late_s = 0.0  # how far behind its plan the nemesis runs (``nemesis``)
        # until when (``clock.monotonic``) a wall clock the faults set back holds its node's
        # Raft timers, which read it (``clock_set_back``)
        self.clocks_held_until = 0.0
        self._acked_at_last_fault = 0  # acknowledged writes when the last fault ended
        self._running: dict[int, tuple[float, float]] = {}  # step -> (late_s then, planned end)
        self._run_dir = RunDir(Path(history.path).parent)  # faults.json beside the history
        self.workload = WORKLOADS[cfg.workload].open(self)

    @property
    def client_port(self) -> int:
        return self.workload.client_port

    # ------------------------------------------------------------- nemesis

    async def nemesis(self, steps: list[FaultStep], t0: float) -> None:
        """Run the plan: each step starts, lasts its duration and is undone; with
        ``nemesis_combine: concurrent`` every package runs its own timeline at once.

        A step that runs past its planned end (a scenario waiting for the state it aims at)
        makes the whole plan late by as much: every later step starts that much later, and
        the workload's deadline (``lateness``) moves with it, so that slow phases on a slow
        machine shift the plan instead of cutting its last steps off."""
        async def timeline(mine: list[FaultStep]) -> None:
            for step in mine:
                await self.clock.sleep(max(0.0, t0 + step.at_s + self.late_s
                                           - self.clock.monotonic()))
                # while it waits the plan runs late (``lateness``), and after it by as much
                self._running[step.index] = (self.late_s, t0 + step.at_s + self.late_s)
                if await self.await_acked_writes(step):
                    self.late_s = max(self.late_s, self.clock.monotonic() - t0 - step.at_s)
                started = self.clock.monotonic()
                late0 = self.late_s
                planned_end = t0 + step.at_s + late0 + step.duration_s
                self._running[step.index] = (late0, planned_end)
                try:
                    try:
                        stop = await self.start_fault(step)  # a scenario spends part of its duration
                    except Exception as exc:
                        self.note_fault(step, "skipped",
                                        f"failed to start: {type(exc).__name__}: {exc}")
                        raise
                    try:
                        await self.clock.sleep(max(0.0, step.duration_s
                                                   - (self.clock.monotonic() - started)))
                    finally:
                        await asyncio.shield(stop())
                finally:
                    self._running.pop(step.index, None)
                    self._acked_at_last_fault = self._acked_writes()
                    over = self.clock.monotonic() - planned_end
                    if over > 1.0 and late0 + over > self.late_s:
                        self.late_s = late0 + over
                        self.log(f"nemesis: step {step.index} ({step.kind}) ended {over:.1f} s "
                                 f"after its planned end; the plan is now {self.late_s:.1f} s "
                                 f"late and the workload runs that much longer")
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
                    self.note_fault(step, "skipped", "the workload ended before its time came"
                                    + (f" (the time limit, stretched to {self.cfg.max_stretch:g}x, "
                                       f"ran out)" if self.late_s else ""))
            await asyncio.shield(self.stop_faults())

    def lateness(self) -> float:
        """How far behind its plan the nemesis is now: what finished steps overran, or more
        while a running step is past its planned end."""
        now = self.clock.monotonic()
        return max([self.late_s] + [late0 + now - end
                                    for late0, end in list(self._running.values())])

    def note_fault(self, step: FaultStep, status: str, why: str = "",
                   nodes: list[int] | None = None) -> None:
        """Record what became of a planned step (happened / not-reached / skipped, and why) in
        faults.json,
        rewritten whole each time (temp + rename), so a crashed harness leaves it readable."""
        self.fault_outcomes[step.index] = {
            "step": step.index, "kind": step.kind, "spec": step.spec, "at_s": step.at_s,
            "status": status, "why": why, "nodes": nodes}
        self._run_dir.write_faults(
            [self.fault_outcomes[i] for i in sorted(self.fault_outcomes)])
        if status != "happened":
            self.log(f"nemesis: step {step.index} ({step.kind} {step.spec}) {status}: {why}")

    async def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None:
        """The leader of a partition (a random one when None) of the workload's data, or None
        (the workload's data has no partitions, or no leader is known now)."""
        return await self.workload.partition_leader(rng, partition)

    def exec_all(self, nodes, cmd_for, check: bool = False):
        return asyncio.gather(*(asyncio.to_thread(self.backend.exec, n, cmd_for(n), check)
                                for n in nodes))

    async def cut(self, g: dict[int, set[int]], value: dict) -> None:
        self.history.record("nemesis", "invoke", "start-partition", value=value)
        addr = {n.node_id: n.address for n in self.backend.nodes}
        await self.exec_all([n for n, drops in g.items() if drops],
                             lambda n: drop_script([addr[o] for o in sorted(g[n])]), check=True)
        self.partitioned = True
        self.history.record("nemesis", "info", "start-partition", value=value)

    async def kill(self, f: str, targets: list[int], value: dict, clean: bool = False) -> None:
        """SIGKILL ``targets`` (``clean``: SIGTERM, a controlled shutdown that flushes the
        node's logs first); they stay down until ``restart``."""
        self.history.record("nemesis", "invoke", f, value=value)
        down = self.backend.stop_node if clean else self.backend.kill_node
        await asyncio.gather(*(asyncio.to_thread(down, t) for t in targets))
        self.killed.update(targets)
        self.history.record("nemesis", "info", f, value=value)

    async def heal_cut(self) -> None:
        self.history.record("nemesis", "invoke", "stop-partition")
        await self.exec_all(self.ids, lambda n: flush_script(PARTITION_CHAIN))
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

    async def _aim(self, spec: str, rng: random.Random) -> tuple[int | None, int | None]:
        controller = leader = None
        aim = aimed_at(spec)
        if aim == "controller":
            controller = await self.active_controller()
        elif aim == "leader":
            leader = await self.partition_leader(rng, target_partition(spec))
        return controller, leader

    async def start_fault(self, step: FaultStep):
        """Start one step's fault; returns the coroutine function that undoes it."""
        rng = random.Random(f"{self.cfg.seed}-fault-{step.index}")
        fid = next(self._fault_ids)
        package = self._package(step.kind)
        opts = package_options(step.kind, self.cfg.nemesis_options.get(step.kind),
                               self.cfg.workload)
        controller, leader = await self._aim(step.spec, rng)
        before = set(self.killed)
        try:
            label, undo, nodes = await package.start(self, step, opts, rng, controller, leader)
        except Skipped as why:
            self.note_fault(step, "skipped", str(why))
            return _nothing
        except NotReached as why:
            # A scenario whose state never came: recorded as such; what it did is undone.
            self.note_fault(step, "not-reached", str(why), nodes=why.nodes)
            return why.undo or _nothing
        except asyncio.CancelledError:
            # The workload ended while a scenario was acting: what it did so far happened.
            if self.partitioned or self.killed - before:
                self.note_fault(step, "happened", "cut short when the workload ended",
                                nodes=sorted(self.killed - before))
            raise
        finally:
            self.active.pop(-1, None)  # a scenario's last phase
        self.note_fault(step, "happened", nodes=nodes)
        self.active[fid] = label
        self.log(f"nemesis: {label}")

        async def stop():
            try:
                await undo()
            finally:
                self.active.pop(fid, None)
        return stop

    def _acked_writes(self) -> int:
        return sum(self.history.ok_by_f.get(f, 0) for f in WORKLOADS[self.cfg.workload].writes)

    def _package(self, kind: str):
        package = self.packages.get(kind)
        if package is None:  # a step of a package the campaign did not list (tests drive so)
            package = self.packages[kind] = REGISTRY[kind]()
        return package

    async def await_acked_writes(self, step: FaultStep) -> bool:
        """Before a fault that destroys acknowledged writes: wait until the clients have had
        the package's ``needs_acked_writes`` writes acknowledged since the previous fault ended
        (at most ACKED_WRITES_S; the fault then starts anyway, and the log says so). True when
        it waited a second or more: the caller makes the plan late by as much."""
        n = self._package(step.kind).needs_acked_writes
        if not n:
            return False
        since = self._acked_at_last_fault
        start = self.clock.monotonic()
        while self._acked_writes() - since < n:
            waited = self.clock.monotonic() - start
            if waited >= ACKED_WRITES_S:
                self.log(f"nemesis: step {step.index} ({step.kind}): only "
                         f"{self._acked_writes() - since} of {n} writes acknowledged since the "
                         f"last fault after {waited:.0f} s; starting it anyway")
                return True
            await self.clock.sleep(0.5)
        waited = self.clock.monotonic() - start
        if waited >= 1.0:
            self.log(f"nemesis: step {step.index} ({step.kind}) waited {waited:.1f} s for "
                     f"{n} acknowledged writes")
        return waited >= 1.0

    def status(self, label: str) -> None:
        """A scenario's phase: shown in the progress lines until the scenario is done."""
        self.active[-1] = label
        self.log(f"nemesis: {label}")

    def clock_set_back(self, back_s: dict[int, float]) -> None:
        """Wall clocks a package has just set back by so many seconds (a clock ahead reset
        to true time): each node's Raft timers wait until its clock has caught up, and the
        liveness phase allows for that (DESIGN section 9)."""
        back = max([0.0, *back_s.values()])
        if back > 0:
            self.clocks_held_until = max(self.clocks_held_until, self.clock.monotonic() + back)

    def liveness_bound(self) -> tuple[float, float]:
        """(the liveness phase's bound, the seconds of it a clock set back still holds)."""
        held = round(max(0.0, self.clocks_held_until - self.clock.monotonic()), 1)
        return self.cfg.liveness_s + held, held

    async def measure_clocks(self, nodes: list[int]) -> dict[int, float]:
        return await clock_offsets([n for n in self.backend.nodes if n.node_id in nodes],
                                   within_s=CLOCK_MEASURE_S)

    async def active_controller(self) -> int | None:
        return await active_controller(self.backend.nodes)

    async def quorum_view(self) -> tuple[int, list[int], list[int], dict[int, str]] | None:
        """(the quorum leader, its voters, [], every replica's directory id as the leader saw
        it fetch); None when no leader answers."""
        state = await quorum_state(self.backend.nodes)
        if state is None:
            return None
        dirs = {row[0]: row[1] for row in state.voters + state.observers}
        return state.leader_id, sorted(row[0] for row in state.voters), [], dirs

    async def change_voter(self, kind: str, node: int, directory: str,
                           leader: int | None = None) -> tuple[str | None, str | None]:
        """RemoveRaftVoter / AddRaftVoter of ``node`` through the quorum leader (``leader``
        if given: the one a cut has just left in place): (Kafka's error name, None when
        done; the leader's message)."""
        if leader is None:
            leader = await self.active_controller()
        if leader is None:
            return "NOT_LEADER_OR_FOLLOWER", "no quorum leader"
        error, message = await change_voter(self.backend.nodes, leader, kind, node, directory)
        return (None if error == m.NONE else m.ERROR_NAMES.get(error, str(error))), message

    def _running_brokers(self) -> list:
        """The nodes with the broker role that no fault of the campaign has killed."""
        return [n for n in self.backend.nodes if "broker" in n.roles
                and n.node_id not in self.killed | self.retired]

    async def broker_lists(self) -> dict[int, tuple[int, ...] | None]:
        """The brokers each running broker's Metadata lists (None: it did not answer)."""
        up = self._running_brokers()

        def listed(n):
            try:
                return tuple(sorted(b.node_id for b in metadata(n.address, [], 3.0).brokers))
            except (OSError, ValueError, struct.error):
                return None
        lists = await asyncio.gather(*(asyncio.to_thread(listed, n) for n in up))
        return {n.node_id: ids for n, ids in zip(up, lists)}

    async def unregister_broker(self, broker: int, patience_s: float) -> str | None:
        """UnregisterBroker of ``broker`` through the running brokers, asked again while no
        controller takes it, for up to ``patience_s``: Kafka's error name, or None once
        committed (or found done by a retry: BROKER_ID_NOT_REGISTERED after an unknown
        outcome)."""
        bootstrap = ",".join(f"{n.address}:{KAFKA_PORT}" for n in self._running_brokers())
        try:
            await asyncio.to_thread(retrying, unregister_broker, bootstrap, broker,
                                    deadline_s=patience_s, done=(m.BROKER_ID_NOT_REGISTERED,))
        except QuorumChangeError as exc:
            return m.ERROR_NAMES.get(exc.code, str(exc)) if exc.code else str(exc)
        return None

    async def add_broker(self, replacing: int | None) -> int | None:
        """A new machine under a new node id (the backend's ``add_node``: Docker's extra
        container, a spare host over SSH), in the place of the stopped ``replacing`` (None:
        the cluster grows), which leaves the cluster for good: nothing starts it again and
        no fault picks it (its container or host, and its logs, are kept). The new node's
        id; None, and the log says why, when the backend has no machine to add."""
        add = getattr(self.backend, "add_node", None)
        if add is None:
            self.log(f"nemesis: no machine to add: the {type(self.backend).__name__} backend "
                     f"cannot add nodes")
            return None
        try:
            info = await asyncio.to_thread(add)
        except NoMachine as exc:
            self.log(f"nemesis: no machine to add: {exc}")
            return None
        self.addr[info.node_id] = info.address
        if replacing is not None:
            self._leave(replacing)
        self.ids[:] = sorted(set(self.ids) | {info.node_id})  # the workload's too
        self.log(f"nemesis: n{info.node_id} ({info.address}) added" + (
            "" if replacing is None else f" in the place of n{replacing}, which leaves the "
                                         f"cluster"))
        return info.node_id

    def retire(self, node: int) -> None:
        """The stopped ``node`` leaves the cluster for good with no machine in its place:
        nothing starts it again and no fault picks it (its container or host, and its logs,
        are kept)."""
        self._leave(node)
        self.log(f"nemesis: n{node} leaves the cluster; no machine takes its place")

    def _leave(self, node: int) -> None:
        self.killed.discard(node)
        self.retired.add(node)
        self.ids[:] = sorted(set(self.ids) - {node})  # the workload's too

    async def feature_levels(self) -> dict[int, tuple[int, dict[str, int], int] | None]:
        """The finalized feature levels, with their epoch and the newest metadata.version
        supported, each running broker reports (ApiVersions; None: it did not answer)."""
        up = self._running_brokers()

        def levels(n):
            try:
                return feature_levels(n.address, 3.0)
            except (OSError, ValueError, struct.error):
                return None
        answers = await asyncio.gather(*(asyncio.to_thread(levels, n) for n in up))
        return {n.node_id: a for n, a in zip(up, answers)}

    async def update_features(self, updates: list[tuple[str, int, int]],
                              patience_s: float) -> str | None:
        """UpdateFeatures of ``updates`` through the running brokers, asked again while no
        controller takes it, for up to ``patience_s``: Kafka's error name, or None once
        committed."""
        bootstrap = ",".join(f"{n.address}:{KAFKA_PORT}" for n in self._running_brokers())
        try:
            await asyncio.to_thread(retrying, update_features, bootstrap, updates,
                                    deadline_s=patience_s)
        except QuorumChangeError as exc:
            return m.ERROR_NAMES.get(exc.code, str(exc)) if exc.code else str(exc)
        return None

    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]:
        """(partition, leader, replicas, ISR) of the workload's data (or of the internal
        ``topic``); none if unpartitioned."""
        return self.workload.partition_infos(topic)

    def reassign(self, moves: dict[int, list[int]],
                 topic: str | None = None) -> dict[int, str | None]:
        """Move partitions of the workload's data (or of the internal ``topic``) to their
        new replicas in one request (blocking: run it in a thread): partition -> the error
        the cluster answered, or None (one the answer left out is not in it)."""
        return self.workload.reassign(moves, topic)

    def elect(self, partition: int) -> str | None:
        """A preferred leader election of a partition of the workload's data (blocking: run
        it in a thread); the error the cluster answered, or None."""
        return self.workload.elect(partition)

    async def stop_faults(self) -> None:
        """Undo every fault still in force."""
        if self.partitioned:
            await self.heal_cut()
        for package in self.packages.values():
            await package.heal(self)
        await self.restart(sorted(self.killed))
        self.active.clear()

    # --------------------------------------------------------------- phases

    async def progress(self, t0: float, deadline: Deadline) -> None:
        while True:
            await asyncio.sleep(5)
            c = self.history.counts
            faults = ", ".join(self.active.values()) or "none"
            self.log(f"{time.monotonic() - t0:5.0f}/{deadline.at() - t0:.0f} s: {c['ok']} ok, "
                     f"{c['fail']} fail, "
                     f"{c['info']} info; faults: {faults}{machine_pressure()}")

    async def run(self) -> None:
        self.log("waiting for the cluster to elect a controller")
        leader = await wait_for_service(self.backend.nodes, BRING_UP_S, self.log,
                                        stopped=self.backend.refusing_nodes)
        self.log(f"active controller: n{leader}")
        await wait_for_every_node(self.backend.nodes, BRING_UP_S)
        self.log("every node serves")
        try:
            await self._run()
        finally:
            await self.workload.close()

    async def _run(self) -> None:
        cfg = self.cfg
        await self.workload.setup()
        for package in self.packages.values():
            await package.prepare(self)
        steps = self.steps
        self.log(f"workload {cfg.workload}: {cfg.concurrency} clients at {cfg.rate:g} ops/s each "
                 f"for {cfg.time_limit_s:g} s; {len(steps)} faults planned")
        t0 = time.monotonic()
        deadline = Deadline(t0 + cfg.time_limit_s, t0 + cfg.time_limit_s * cfg.max_stretch,
                            self.lateness)
        progress = asyncio.create_task(self.progress(t0, deadline))
        nemesis = asyncio.create_task(self.nemesis(steps, self.clock.monotonic()))
        try:
            await self.workload.workers(deadline)
        finally:
            nemesis.cancel()
            progress.cancel()
            await asyncio.gather(nemesis, progress, return_exceptions=True)
        self.log("heal: all partitions flushed, all nodes started")
        self.history.record("nemesis", "invoke", "heal")
        await asyncio.to_thread(heal_partitions, self.backend)
        for n in self.ids:
            await asyncio.to_thread(self.backend.start_node, n)  # also resumes a paused node
        for package in self.packages.values():
            await package.final_heal(self)
        self.history.record("nemesis", "info", "heal")
        recovery_s = cfg.recovery_s if cfg.recovery_s is not None else 0 if cfg.liveness else 10
        if recovery_s:
            self.log(f"recovery: waiting {recovery_s:g} s")
            await asyncio.sleep(recovery_s)
        await self.liveness()
        await self.workload.final_phase()

    async def liveness(self) -> None:
        """The liveness phase: every fault is healed, so the cluster must be whole again
        within ``liveness_s`` (the workload says what whole means: ``WorkloadRun.liveness``).
        liveness.json beside the history says what was still stuck, naming partition or
        node and since when; analysis makes such a run invalid."""
        cfg = self.cfg
        run_dir = RunDir(Path(self.history.path).parent)
        if not cfg.liveness:
            run_dir.write_liveness({"checked": False})
            self.log("liveness: not checked (liveness: false)")
            return
        bound, held = self.liveness_bound()
        self.log(f"liveness: waiting up to {bound:g} s for the cluster to be whole"
                 + (f" ({held:g} s of them for a clock the faults set back, whose node's "
                    f"Raft timers wait for it)" if held else ""))
        started = time.monotonic()
        stuck = await self.workload.liveness(bound)
        took = round(time.monotonic() - started, 1)
        run_dir.write_liveness({"checked": True, "bound_s": bound, "took_s": took,
                                "stuck": stuck, **({"clock_held_s": held} if held else {})})
        if stuck:
            for s in stuck:
                self.log(f"liveness: STUCK {s['what']}: {s['detail']} (for {s['since_s']} s)")
        else:
            self.log(f"liveness: whole again after {took:g} s")


async def _nothing() -> None:
    """The undo of a fault step that was skipped."""


def fault_plan(cfg: RunConfig) -> list[FaultStep]:
    """The run's fault schedule: a pure function of the resolved config (seed included)."""
    return plan(cfg.seed, cfg.nemesis, cfg.time_limit_s, cfg.nemesis_interval_s,
                duration_s=WORKLOADS[cfg.workload].fault_duration_s, workload=cfg.workload,
                power_loss_targets=tuple(cfg.power_loss_targets), options=cfg.nemesis_options,
                combine=cfg.nemesis_combine)
