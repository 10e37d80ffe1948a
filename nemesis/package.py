"""What a fault package is: everything about one fault, in one object.

As in Jepsen's combined nemesis, a package knows its name, which workloads it
fits, the options a campaign may give it (each with a check the campaign
validator runs), how it draws targets, how long its faults last, the node
properties it needs, how to start a fault and undo it, how to heal whatever
it left in force, and how reports draw it (the history rows that open and
close it, its colour). The runner runs packages and knows none by name; a
new fault is one new module in ``nemesis/packages/`` and its test.

A package acts on a ``FaultContext`` (the campaign): the cluster backend,
the history, node lifecycle (``kill``/``restart``), partitions
(``cut``/``heal_cut``), and what the workload can tell about its data
(``partition_infos``, ``partition_leader``, ``active_controller``). Package
objects are made per campaign, so they may keep the state of their faults.
"""
from __future__ import annotations

import asyncio
import random
from typing import Awaitable, Callable, Protocol

from .faults import check_target, node_targets

Undo = Callable[[], Awaitable[None]]


class Skipped(Exception):
    """A fault that cannot act now (no node matches its target, no partition fits); the
    message says why, and the step is recorded as skipped."""


class NotReached(Exception):
    """A scenario whose aimed-at state never came within its bounded wait (no new leader was
    named, the ISR never shrank, no partition fit): the step is recorded as ``not-reached``
    with the message, and a run whose planned scenario never reached its state is ``unknown``
    (``harness.analyze.gates``). ``undo`` undoes what it did on the way; ``nodes``: what it
    killed."""

    def __init__(self, why: str, undo: Undo | None = None, nodes: list[int] | None = None):
        super().__init__(why)
        self.undo = undo
        self.nodes = sorted(nodes or [])


class Unreachable(NotReached):
    """The state a scenario aims at can no longer come this time, and nothing irreversible
    has happened yet (nothing killed, clients not refused): for instance the followers of a
    cut-off leader had already fallen out of the ISR, or the replica to strand became the
    leader. ``Scenario.start`` heals the cut and aims again, up to ``Scenario.ATTEMPTS``
    times, before it counts as not reached."""


class NotSimulated(Exception):
    """A fault the simulator has no form of (``simulate``); a stored run's twin reports the
    step as not simulated."""


class FaultContext(Protocol):
    """What a package may use of the campaign running it."""
    cfg: object  # harness.config.RunConfig: seed, workload, ...
    backend: object  # nodes, exec, kill_node, start_node
    history: object  # record(process, type, f, key=None, value=None, ...)
    ids: list[int]
    killed: set[int]
    moving: set[int]  # partitions a scenario is moving now: another leaves them alone
    partitioned: bool
    data_dir: str
    clock: object  # harness.clock: monotonic() and await sleep(s), real or virtual

    def log(self, msg: str) -> None: ...
    def status(self, label: str) -> None: ...  # a scenario's phase, for the progress lines
    def exec_all(self, nodes, cmd_for, check: bool = False) -> Awaitable: ...
    async def cut(self, g: dict[int, set[int]], value: dict) -> None: ...
    async def heal_cut(self) -> None: ...
    async def kill(self, f: str, targets: list[int], value: dict,
                   clean: bool = False) -> None: ...  # clean: SIGTERM
    async def restart(self, nodes: list[int]) -> None: ...
    async def measure_clocks(self, nodes: list[int]) -> dict[int, float]: ...
    def clock_set_back(self, back_s: dict[int, float]) -> None: ...  # node -> s set back
    async def active_controller(self) -> int | None: ...
    async def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None: ...
    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]: ...
    # one AlterPartitionReassignments of partitions (of the workload's topic, or ``topic``)
    # to their new replicas: partition -> error name or None (blocking)
    def reassign(self, moves: dict[int, list[int]],
                 topic: str | None = None) -> dict[int, str | None]: ...
    def elect(self, partition: int) -> str | None: ...  # blocking: ElectLeaders, PREFERRED
    # the quorum leader, its voters, its voters whose disk was replaced, every replica's
    # directory id as the leader saw it fetch (None: no leader answered)
    async def quorum_view(self) -> tuple[int, list[int], list[int], dict[int, str]] | None: ...
    # RemoveRaftVoter / AddRaftVoter through the quorum leader (or the controller named):
    # (error name or None, message)
    async def change_voter(self, kind: str, node: int, directory: str,
                           leader: int | None = None) -> tuple[str | None, str | None]: ...
    # the brokers each running broker's Metadata lists (None: it did not answer)
    async def broker_lists(self) -> dict[int, tuple[int, ...] | None]: ...
    # UnregisterBroker through the running brokers, asked again while no controller takes
    # it: the error's name, or None once committed
    async def unregister_broker(self, broker: int, patience_s: float) -> str | None: ...
    # a new machine under a new node id, in the place of a stopped broker that leaves the
    # cluster for good (None: beside the others): its id (None: the backend has no machine
    # to add; the log says why)
    async def add_broker(self, replacing: int | None) -> int | None: ...
    # the stopped node leaves the cluster for good, no machine in its place (nothing starts
    # it again, no fault picks it; its machine and logs are kept)
    def retire(self, node: int) -> None: ...
    # the finalized feature levels (their epoch, feature -> level, the newest
    # metadata.version supported) each running broker reports (None: it did not answer)
    async def feature_levels(self) -> dict[int, tuple[int, dict[str, int], int] | None]: ...
    # UpdateFeatures of (feature, level, upgrade type) rows, asked again while no controller
    # takes it: the error's name, or None once committed
    async def update_features(self, updates: list[tuple[str, int, int]],
                              patience_s: float) -> str | None: ...


# ----------------------------------------------------------------- option checks
# Each returns what is wrong with a value, or None when it is fine.

def number(lo: float, hi: float | None = None, what: str = ""):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{v!r} is not a number"
        if v < lo or (hi is not None and v > hi):
            return f"{v!r} is out of range ({what})"
        return None
    return check


def duration(v):
    if isinstance(v, list):
        if len(v) != 2:
            return f"{v!r}: a duration range is [low, high]"
        for x in v:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                return f"{x!r} is not a number"
            if x < 0:
                return f"{x!r} is negative"
        if v[0] > v[1]:
            return f"{v!r}: low is above high"
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not a number of seconds or [low, high]"
    return f"{v!r} is negative" if v < 0 else None


def choices(known):
    def check(v):
        if not isinstance(v, list) or not v:
            return f"{v!r} is not a non-empty list"
        for x in v:
            if x not in known:
                return f"unknown value {x!r} (known: {', '.join(known)})"
        return None
    return check


def one_of(known):
    def check(v):
        return None if v in known else f"unknown value {v!r} (known: {', '.join(known)})"
    return check


COMMON = {"duration_s": duration, "interval_s": number(0.1, None, "seconds, above 0"),
          "weight": number(0, None, "not negative")}


class Package:
    name = ""
    weight = 1.0  # how often a sequential plan draws it
    workloads: tuple[str, ...] = ("register", "queue")
    needs = ""  # what the other workloads lack, for the error that refuses it with them
    modes: tuple[str, ...] = ()  # e.g. clock: bump, strobe
    options: dict = {}  # its own options beside COMMON (and ``targets`` where targeted)
    defaults: dict = {}  # values of its own options when the campaign gives none
    properties: dict[str, str] = {}  # node properties its faults need
    opens: tuple[str, ...] = ()  # history rows (f, type info) that open one of its faults
    closes: tuple[str, ...] = ()  # and that close it
    colour = "#999999"  # its band in the report and the timeline
    # the node events (node_image.coverage.EVENTS) its faults aim to cause: a run's coverage
    # says which of them came
    intends: tuple[str, ...] = ()
    # Writes the clients must have had acknowledged since the previous fault before one of
    # its faults starts (waited for, bounded: the campaign's ``await_acked_writes``): a
    # fault that destroys what was acknowledged means nothing before anything was (a
    # machine that stalled for 12 s once had a power loss strike before the first ack)
    needs_acked_writes = 0
    # A per-node quantity its faults set, plotted in the report under this title (``series``)
    series_title = ""
    series_unit = ""
    targeted = True  # takes node targets (``targets``); a scenario chooses its own
    length_s: float | None = None  # a scenario's fixed length; else drawn by the plan
    faketime = False  # the nodes must run under libfaketime
    faultfs = False  # each node's data directory must be a faultfs mount
    # target -> weight per workload, and the target of a campaign's first fault of the package
    target_weights: dict[str, dict[str, float]] = {}
    first: dict[str, str] = {}
    # How the seeded simulator draws its faults (``nemesis.seeded.Seeded``); none: it does not
    seeded: tuple = ()

    def __init__(self) -> None:
        assert self.name, type(self)

    @classmethod
    def series(cls, rows: list[tuple[str, float, dict]], end_s: float) -> dict[str, list]:
        """Per node, the (time s, value) steps of ``series_title`` from the nemesis rows of a
        history ((f, time s, value) of each info row); a step at ``end_s`` closes each."""
        return {}

    # ------------------------------------------------------------- planning

    @classmethod
    def option_checks(cls) -> dict:
        checks = dict(COMMON)
        if cls.targeted:
            checks["targets"] = cls.check_targets
        checks.update(cls.options)
        if cls.modes:
            checks["modes"] = choices(cls.modes)
        return checks

    @classmethod
    def check_together(cls, options: dict) -> tuple[str, str] | None:
        """(option, what is wrong) where options good one by one disagree, or None."""
        return None

    @classmethod
    def check_targets(cls, v) -> str | None:
        if not isinstance(v, list) or not v:
            return f"{v!r} is not a non-empty list"
        for x in v:
            if not isinstance(x, str):
                return f"{x!r} is not a target"
            if (why := cls.check_target(x)) is not None:
                return why
        return None

    @classmethod
    def check_target(cls, target: str) -> str | None:
        return check_target(target)

    @classmethod
    def run_options(cls, workload: str, options: dict | None) -> dict:
        """The options its faults run with: its defaults, then the campaign's."""
        out = {**cls.defaults, **({"modes": list(cls.modes)} if cls.modes else {})}
        out.update(options or {})
        return out

    @classmethod
    def node_properties(cls, opts: dict) -> dict[str, str]:
        """The node properties its faults need, given its run options."""
        return dict(cls.properties)

    @classmethod
    def needs_faultfs(cls, opts: dict) -> bool:
        """Must each node's data directory be a faultfs mount, given its run options?"""
        return cls.faultfs

    @classmethod
    def targets_for(cls, workload: str, opts: dict, power_loss_targets: tuple[str, ...]) -> dict:
        """Target -> weight for this campaign."""
        if "targets" in opts:
            return {t: 1 for t in opts["targets"]}
        if not cls.targeted:
            return {"partition": 1}
        return dict(cls.target_weights.get(workload) or cls.target_weights["*"])

    @classmethod
    def first_target(cls, workload: str, power_loss_targets: tuple[str, ...]) -> str | None:
        return cls.first.get(workload)

    @classmethod
    def length(cls, spec: str, rng: random.Random, duration_s: tuple[float, float]) -> float:
        """How long one fault lasts when the campaign sets no ``duration_s``."""
        if cls.length_s is not None:
            return cls.length_s
        return rng.uniform(*duration_s)

    # -------------------------------------------------------------- running

    async def prepare(self, ctx: FaultContext) -> None:
        """Before the workload starts (say what the machine allows)."""

    async def start(self, ctx: FaultContext, step, opts: dict, rng: random.Random,
                    controller: int | None, leader: int | None) -> tuple[str, Undo, list[int]]:
        """Start one fault: a label for the progress lines, the coroutine function that
        undoes it, and the nodes it acted on. ``controller`` and ``leader``: the active
        controller and the aimed partition's leader, looked up when the step's target
        names them. Raise ``Skipped`` when it cannot act now."""
        raise NotImplementedError

    async def heal(self, ctx: FaultContext) -> None:
        """Undo whatever of its faults is still in force (the workload ended mid-fault)."""

    def simulate(self, sim, step, opts: dict, rng: random.Random, controller: int | None,
                 leader: int | None) -> tuple[str, Callable[[], None], list[int]]:
        """The same fault on the simulated cluster of a stored run's twin (``sim``:
        ``simulator.twin.PlanFaults``), as ``start`` acts it on the real one: a label, the
        function that undoes it, the nodes it acted on. Raise ``NotSimulated`` when the
        simulator has no such fault, ``Skipped`` when it cannot act now."""
        raise NotSimulated(f"the simulator has no form of {self.name!r} faults")

    async def final_heal(self, ctx: FaultContext) -> None:
        """At the end of the run, on every node, whatever its faults may have left behind."""


def simulated(cls) -> bool:
    """Has the package a simulated form (``simulate``, or a node fault's ``sim_act``)?"""
    if issubclass(cls, NodeFault) and cls.simulate is NodeFault.simulate:
        return cls.sim_act is not NodeFault.sim_act
    return cls.simulate is not Package.simulate


# Target weights of a node fault that hurts most on the leader the workload depends on: the
# active controller (register), a partition's leader (queue).
LEADER_FIRST = {"*": {"one": 1, "minority": 1},
                "register": {"active-controller": 2, "one": 1, "minority": 1},
                "queue": {"partition-leader": 2, "one": 1, "minority": 1}}


class NodeFault(Package):
    """A package whose faults act on the nodes a target names (one, minority, the active
    controller, a partition's leader, ...)."""
    target_weights = {"*": {"one": 1, "minority": 1, "all": 1}}

    async def start(self, ctx, step, opts, rng, controller, leader):
        targets = node_targets(step.spec, ctx.ids, rng, controller, leader)
        if not targets:
            raise Skipped(f"no node matches the target {step.spec!r} now")
        label, undo = await self.act(ctx, step, opts, rng, targets)
        return label, undo, sorted(targets)

    async def act(self, ctx: FaultContext, step, opts: dict, rng: random.Random,
                  targets: list[int]) -> tuple[str, Undo]:
        raise NotImplementedError

    def simulate(self, sim, step, opts, rng, controller, leader):
        targets = node_targets(step.spec, sim.ids, rng, controller, leader)
        if not targets:
            raise Skipped(f"no node matches the target {step.spec!r} now")
        label, undo = self.sim_act(sim, step, opts, rng, targets)
        return label, undo, sorted(targets)

    def sim_act(self, sim, step, opts: dict, rng: random.Random,
                targets: list[int]) -> tuple[str, Callable[[], None]]:
        """``act`` on the simulated cluster (``simulate``); the undo is a plain function."""
        raise NotSimulated(f"the simulator has no form of {self.name!r} faults")

    @staticmethod
    async def lift(ctx: FaultContext, held: set[int], nodes, f: str, cmd_for, said: str) -> None:
        """Undo the fault on those of ``nodes`` still in ``held``: ``cmd_for(node)`` on each,
        between an invoke and an info row ``f``."""
        nodes = sorted(set(nodes) & held)
        if not nodes:
            return
        ctx.history.record("nemesis", "invoke", f, value={"nodes": nodes})
        await ctx.exec_all(nodes, cmd_for)
        held.difference_update(nodes)
        ctx.history.record("nemesis", "info", f, value={"nodes": nodes})
        ctx.log(f"nemesis: {said} {nodes}")


class HeldFault(NodeFault):
    """A fault held on some nodes until it is lifted (rules of their own, a cap, a stopped
    process, a disk fault): the one template of the start row, the commands, the info row,
    the undo of exactly the nodes it holds on, the heal of whatever still holds and, with
    ``final_release``, a release of every node at the very end. A package says what a step
    puts in force (``plan``: the row's value, the nodes that will hold it, the label; ``put``:
    the commands) and how one node is released (``release``)."""
    lifted = "lifted on"  # the log line's words when it is undone: "<lifted> [nodes]"
    final_release = True  # release every node at the very end, whatever the run left

    def __init__(self) -> None:
        super().__init__()
        self.holding: set[int] = set()  # nodes where the fault is (or may be) in force

    def plan(self, ctx: FaultContext, step, opts: dict,
             targets: list[int]) -> tuple[dict, list[int], str]:
        """(the start rows' value, the nodes that will hold the fault, the label)."""
        raise NotImplementedError

    async def put(self, ctx: FaultContext, holders: list[int], opts: dict, value: dict) -> None:
        """Put the fault in force on ``holders`` (their commands, checked)."""
        raise NotImplementedError

    def release(self, ctx: FaultContext, node: int) -> list[str]:
        """The command that lifts the fault on ``node`` (harmless where it is not held)."""
        raise NotImplementedError

    async def act(self, ctx, step, opts, rng, targets):
        value, holders, label = self.plan(ctx, step, opts, targets)
        start = self.opens[0]
        ctx.history.record("nemesis", "invoke", start, value=value)
        self.holding.update(holders)  # before the commands: a heal undoes a half-done start
        await self.put(ctx, holders, opts, value)
        ctx.history.record("nemesis", "info", start, value=value)
        return label, lambda: self.lift_on(ctx, holders)

    async def lift_on(self, ctx: FaultContext, nodes) -> None:
        await self.lift(ctx, self.holding, nodes, self.closes[0],
                        lambda n: self.release(ctx, n), self.lifted)

    async def heal(self, ctx):
        await self.lift_on(ctx, sorted(self.holding))

    async def final_heal(self, ctx):
        if self.final_release:
            await ctx.exec_all(ctx.ids, lambda n: self.release(ctx, n))


class Scenario(Package):
    """A short sequence of faults aimed at one partition of the workload's topic, chosen
    from the freshest metadata when the scenario fires (``choose``). Each phase waits for the
    state the next one needs (a new leader elected, a replica out of the ISR) with a bounded
    deadline (``PATIENCE_S``) instead of assuming it came after a fixed time: on a slow
    machine the phase takes longer and the campaign's plan runs late with it
    (``harness.campaign``). A state that never comes ends the scenario as ``NotReached``.
    ``length_s`` is its nominal length; its rows are the ordinary ``start-partition`` /
    ``kill`` / ``stop-partition`` ones with the scenario and the partition it chose."""
    workloads = ("queue",)
    needs = "aims at a partition of the queue workload's topic"
    targeted = False
    colour = "#54a24b"
    WAIT_S = 60.0  # the longest it waits for a partition it can act on
    ATTEMPTS = 3  # aims this many times at most while its state turns out unreachable
    PATIENCE_S = 90.0  # the longest a phase waits for the state it needs
    # a campaign may bound both waits (``patience_s``): a slow machine wants more
    options = {"patience_s": number(1, None, "seconds, at least 1")}
    needs_controller = False  # ``choose`` is told the active controller
    aims_at = ""  # the state it aims at, in words (reports, and the reason when not reached)

    async def await_partition(self, ctx: FaultContext, partition: int, holds,
                              patience_s: float, what: str = "", topic: str | None = None):
        """Ask the freshest metadata every 0.5 s until ``holds`` is true of ``partition``'s
        (partition, leader, replicas, ISR) row, for at most ``patience_s``: a phase that must
        have happened before the next one means anything (a new leader elected, a replica out
        of the ISR) is waited for, not assumed, on a machine that may be slow. The harness log
        says what it waits for and how long it took. Returns the row (None if it never held)
        and the seconds waited. ``topic``: a partition of that internal topic instead of
        the workload's."""
        held, _, waited = await self.await_partitions(ctx, {partition: holds}, patience_s,
                                                      what, topic)
        return held.get(partition), waited

    async def await_partitions(self, ctx: FaultContext, holds: dict, patience_s: float,
                               what: str = "", topic: str | None = None):
        """``await_partition`` of many partitions of one topic (partition -> its ``holds``)
        in one loop, one metadata read a look: (partition -> its row once it held, partition
        -> its last row (None: unknown) of those that never held, the seconds waited)."""
        start = ctx.clock.monotonic()
        said = 0.0
        held: dict[int, tuple] = {}
        while True:
            try:
                infos = await asyncio.to_thread(ctx.partition_infos, *([topic] if topic else []))
            except Exception:  # noqa: BLE001 - no metadata now: not yet
                infos = []
            rows = {p[0]: p for p in infos}
            held.update({p: rows[p] for p, h in holds.items()
                         if p not in held and p in rows and h(rows[p])})
            left = {p: rows.get(p) for p in holds if p not in held}
            waited = ctx.clock.monotonic() - start
            now = "" if not left else (
                f"partition {next(iter(left))} now {next(iter(left.values()))}" if len(left) == 1
                else f"{len(left)} partitions not yet, {next(iter(left))} now "
                     f"{next(iter(left.values()))}")
            if not left:
                if waited >= 1.0 and what:
                    ctx.log(f"{self.name}: {what}: came after {waited:.1f} s")
                return held, left, waited
            if waited >= patience_s:
                if what:
                    ctx.log(f"{self.name}: {what}: did not come within {waited:.0f} s "
                            f"(last metadata: {now})")
                return held, left, waited
            if what and waited - said >= 10.0:
                said = waited
                ctx.log(f"{self.name}: waiting {waited:.0f} s so far (at most {patience_s:.0f}) "
                        f"for {what}; {now}")
            await ctx.clock.sleep(0.5)

    async def await_progress(self, ctx: FaultContext, ops: int, at_least_s: float,
                             patience_s: float, what: str) -> bool:
        """Wait at least ``at_least_s``, and until the clients have completed ``ops`` more
        operations ``ok`` than now (writes acknowledged while the scenario's state holds),
        for at most ``patience_s``. Whether they did."""
        start = ctx.clock.monotonic()
        base = ctx.history.counts["ok"]
        while True:
            waited = ctx.clock.monotonic() - start
            done = ctx.history.counts["ok"] - base
            if waited >= at_least_s and done >= ops:
                if waited >= at_least_s + 1.0:
                    ctx.log(f"{self.name}: {what}: came after {waited:.1f} s")
                return True
            if waited >= patience_s:
                ctx.log(f"{self.name}: {what}: only {done} of {ops} within {waited:.0f} s")
                return False
            await ctx.clock.sleep(0.5)

    def choose(self, infos, controllers: set[int], active: int | None, rng: random.Random):
        """What to act on, from (partition, leader, replicas, ISR) rows; None if nothing fits."""
        raise NotImplementedError

    async def act(self, ctx: FaultContext, choice, rng: random.Random) -> None:
        """Play the scenario out; raise ``NotReached`` (without its undo: ``start`` adds it)
        when a phase's state never came."""
        raise NotImplementedError

    def simulate(self, sim, step, opts, rng, controller, leader):
        # The simulated cluster's metadata is read at once (a fault just before may leave an
        # ISR short for a moment there too: then the step is skipped, and says so).
        infos = sim.partition_infos()
        choice = self.choose(infos, sim.controllers, sim.active_controller(), rng)
        if choice is None:
            raise Skipped(f"no partition of the topic fits now ({infos})")
        before = set(sim.killed)
        self.sim_act(sim, choice, rng)

        def undo():
            sim.heal_cut()
            sim.admit_clients(sim.ids)
            sim.restart(sorted(sim.killed - before))
        label, nodes = self.describe(choice)
        return label, undo, sorted(nodes)

    async def _aim(self, ctx, rng):
        """A choice from the freshest metadata. Right after another fault some ISRs are still
        short (a deposed leader rejoins them within seconds; on a starved machine much
        later): wait up to WAIT_S for a partition that fits, else NotReached."""
        start = ctx.clock.monotonic()
        while True:
            try:
                infos = await asyncio.to_thread(ctx.partition_infos)
            except Exception:  # noqa: BLE001 - no metadata now: no partition fits
                infos = []
            controllers = {n.node_id for n in ctx.backend.nodes if n.is_controller}
            active = await ctx.active_controller() if self.needs_controller else None
            choice = self.choose(infos, controllers, active, rng)
            if choice is not None or ctx.clock.monotonic() - start > self.WAIT_S:
                break
            await ctx.clock.sleep(0.5)
        if choice is None:
            why = (f"no partition of the topic fit within {self.WAIT_S:.0f} s "
                   f"(last metadata: {infos})")
            ctx.history.record("nemesis", "invoke", "skip-scenario", value={"scenario": self.name})
            ctx.history.record("nemesis", "info", "skip-scenario",
                               value={"scenario": self.name, "reason": why})
            raise NotReached(why)
        waited = ctx.clock.monotonic() - start
        if waited >= 1.0:
            ctx.log(f"{self.name}: a partition fit after {waited:.1f} s")
        return choice

    def describe(self, choice) -> tuple[str, list[int]]:
        """A label for the choice, and the nodes it kills (what a Docker run's faults.json
        records of a scenario)."""
        return self.name, []

    def sim_act(self, sim, choice, rng: random.Random) -> None:
        """``act`` on the simulated cluster: its phases run later through ``sim.after``."""
        raise NotSimulated(f"the simulator has no form of the {self.name!r} scenario")

    async def start(self, ctx, step, opts, rng, controller, leader):
        if "patience_s" in opts:  # the campaign's bound on every wait of this scenario
            self.WAIT_S = self.PATIENCE_S = float(opts["patience_s"])
        before = set(ctx.killed)
        mine: list[int] = []  # the nodes it killed, once it is done acting

        async def undo():
            if ctx.partitioned:
                await ctx.heal_cut()
            await ctx.restart(mine)
        for attempt in range(1, self.ATTEMPTS + 1):
            choice = await self._aim(ctx, rng)
            try:
                await self.act(ctx, choice, rng)
                break
            except Unreachable as exc:
                if attempt == self.ATTEMPTS or ctx.killed - before:
                    mine[:] = sorted(ctx.killed - before)
                    raise NotReached(f"{exc} (attempt {attempt} of {self.ATTEMPTS})", undo,
                                     mine) from None
                ctx.log(f"{self.name}: {exc}; healing and aiming again (attempt {attempt} of "
                        f"{self.ATTEMPTS})")
                if ctx.partitioned:
                    await ctx.heal_cut()
            except NotReached as exc:
                mine[:] = sorted(ctx.killed - before)
                raise NotReached(str(exc), undo, mine) from None
        mine[:] = sorted(ctx.killed - before)
        return self.name, undo, list(mine)
