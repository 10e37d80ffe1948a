"""Every fault package against a recording backend, without Docker: what it runs on which
node, the history rows it writes (those its report metadata says open and close it), and
that its undo and the campaign's final heal leave nothing in force."""
import asyncio
import json

import pytest

from harness.campaign import Campaign
from harness.clock import MockClock
from harness.config import RunConfig, needs_faketime, needs_faultfs, node_config
from harness.history import HistoryWriter
from harness.backends import NodeControl, NodeInfo
from nemesis.package import NodeFault, Scenario
from nemesis.packages import PACKAGES, report_kinds
from nemesis.packages import depose_leader, strand_replica
from nemesis.schedule import FaultStep, check_options, plan

CONTROLLER = 2
# partition 0 led by its preferred replica n3, ISR full; partition 1 by another, ISR short
INFOS = [(0, 3, [3, 4, 5], [3, 4, 5]), (1, 5, [4, 5, 1], [5, 1])]


class RecordingBackend(NodeControl):
    def __init__(self) -> None:
        self.nodes = [NodeInfo(i, f"n{i}", f"10.9.0.{i}", ("controller", "broker") if i <= 3
                               else ("broker",)) for i in range(1, 6)]
        self.calls: list[tuple[int, str]] = []

    def exec(self, node_id, cmd, check=True):
        text = " ".join(cmd)
        self.calls.append((node_id, text))
        if "netem" in text:
            return 1, "Error: Specified qdisc not found."
        if cmd[:2] == ["ck-ctl", "disk"]:
            return 0, json.dumps({"files": 2, "unsynced_bytes": 8192, "torn_bytes_kept": 0})
        if cmd[0] == "python3":  # corrupt_script
            return 0, json.dumps([{"file": "/d/queue-0/0.log", "size": 10, "flipped": [[1, 2]]}])
        return 0, ""


class RecordingCampaign(Campaign):
    def _acked_writes(self) -> int:  # clients that have every write acknowledged at once
        return self.history.index * 1000

    async def measure_clocks(self, nodes):
        return {n: 0.0 for n in nodes}

    async def active_controller(self):
        return CONTROLLER

    async def partition_leader(self, rng, partition=None):
        return 3

    def partition_infos(self):
        return INFOS


def campaign(tmp_path, packages, workload="queue"):
    backend = RecordingBackend()
    history = HistoryWriter(tmp_path / "history.jsonl")
    cfg = RunConfig(seed=7, workload=workload, nemesis=list(packages))
    return RecordingCampaign(cfg, backend, history, lambda m: None), backend, history


def rows(history, tmp_path):
    history.close()
    return [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]


OPENS, CLOSES, _ = report_kinds()
NODE_FAULTS = [(name, spec, mode) for name, spec, mode in [
    ("kill", "one", ""), ("power-loss", "minority", ""), ("pause", "active-controller", ""),
    ("clock", "all", "bump"), ("clock", "one", "strobe"), ("packet-loss", "one", ""),
    ("corrupt", "one", "bitflip"), ("one-way", "active-controller", "deaf"),
    ("bandwidth", "minority", ""), ("delay", "partition-leader", ""),
    ("disk-error", "one", ""), ("disk-full", "minority", ""),
    ("slow-fsync", "partition-leader", "")]]


@pytest.mark.parametrize("name, spec, mode", NODE_FAULTS)
def test_a_node_fault_opens_and_closes_as_its_package_says(tmp_path, name, spec, mode):
    camp, backend, history = campaign(tmp_path, [name])

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, name, spec, 1.0, mode))
        await stop()
        await camp.stop_faults()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis" and r["type"] == "info"]
    opened = [r for r in out if OPENS.get(r["f"]) == name]
    closed = [r for r in out if name in CLOSES.get(r["f"], ())]
    assert opened and closed, out
    assert opened[0]["index"] < closed[-1]["index"]
    nodes = opened[0]["value"]["nodes"]
    assert nodes and set(nodes) <= {1, 2, 3, 4, 5}
    if spec == "active-controller":
        assert nodes == [CONTROLLER]
    assert camp.fault_outcomes[0]["status"] == "happened"
    assert camp.killed == set() and camp.active == {}
    touched = {n for n, _ in backend.calls}
    assert touched >= set(nodes), backend.calls


def test_each_node_fault_runs_its_own_commands(tmp_path):
    camp, backend, history = campaign(tmp_path, ["pause", "packet-loss", "clock"])

    async def go():
        for i, (name, spec, mode) in enumerate([("pause", "one", ""), ("packet-loss", "all", ""),
                                                ("clock", "all", "bump")]):
            stop = await camp.start_fault(FaultStep(i, 0.0, name, spec, 1.0, mode))
            await stop()
    asyncio.run(go())
    history.close()
    texts = [t for _, t in backend.calls]
    assert any(t == "ck-ctl pause" for t in texts) and any(t == "ck-ctl resume" for t in texts)
    loss = [t for t in texts if "--probability 0.3000" in t]
    assert len(loss) == 5 and all("10.9.0." in t for t in loss)
    assert any("iptables -F ck-loss" in t for t in texts)
    bumps = [t for t in texts if "/etc/chaoskraft/faketime" in t]
    assert len(bumps) == 10 and sum("'+0.000'" in t for t in bumps) == 5  # 5 bumps, 5 resets


@pytest.mark.parametrize("mode", ["deaf", "mute"])
def test_a_one_way_partition_drops_one_direction_only(tmp_path, mode):
    """deaf: the target drops what every other node sends it; mute: every other node drops
    what the target sends. Undone on the nodes it touched, and again everywhere at the end."""
    camp, backend, history = campaign(tmp_path, ["one-way"])

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "one-way", "active-controller", 1.0, mode))
        await stop()
        await camp.stop_faults()
        for package in camp.packages.values():
            await package.final_heal(camp)
    asyncio.run(go())
    drops = {n: t for n, t in backend.calls if "-j DROP" in t}
    if mode == "deaf":
        assert list(drops) == [CONTROLLER]
        assert all(f"-s 10.9.0.{o} -j DROP" in drops[CONTROLLER] for o in (1, 3, 4, 5))
        assert f"10.9.0.{CONTROLLER} " not in drops[CONTROLLER]
    else:
        assert sorted(drops) == [1, 3, 4, 5]
        assert all(t.count("-j DROP") == 1 and f"-s 10.9.0.{CONTROLLER} -j DROP" in t
                   for t in drops.values())
    assert all("ck-oneway" in t for t in drops.values())
    flushes = [n for n, t in backend.calls if t.startswith("sh -c iptables -F ck-oneway")]
    assert sorted(flushes) == sorted(list(drops) + [1, 2, 3, 4, 5])  # the undo, the final heal
    start = next(r for r in rows(history, tmp_path) if r["f"] == "start-one-way"
                 and r["type"] == "info")
    assert start["value"]["mode"] == mode and start["value"]["nodes"] == [CONTROLLER]


def test_a_bandwidth_cap_is_a_token_bucket_on_the_targets_egress(tmp_path):
    camp, backend, history = campaign(tmp_path, ["bandwidth"])
    camp.cfg.nemesis_options = {"bandwidth": {"rate_kbit": 400}}

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "bandwidth", "active-controller", 1.0))
        await stop()
    asyncio.run(go())
    calls = [(n, t) for n, t in backend.calls]
    assert [n for n, _ in calls] == [CONTROLLER, CONTROLLER]
    assert "tc qdisc replace dev $(ip -o route get 10.9.0.1 " in calls[0][1]
    assert "root tbf rate 400kbit burst 32kb latency 400ms" in calls[0][1]
    assert "tc qdisc del dev" in calls[1][1]


def test_a_delay_holds_the_targets_incoming_packets_in_a_queue_and_lets_them_go(tmp_path):
    camp, backend, history = campaign(tmp_path, ["delay"])

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "delay", "one", 1.0))
        await stop()
        await camp.stop_faults()
    asyncio.run(go())
    [(node, hold), (n2, rules), (n3, stop)] = backend.calls
    assert node == n2 == n3
    assert "nohup python3 /tmp/ck-delay-hold.py 7 100 50" in hold  # the defaults
    others = sorted({1, 2, 3, 4, 5} - {node})
    assert rules.count("-j NFQUEUE --queue-num 7 --queue-bypass") == 4
    assert all(f"-s 10.9.0.{o} " in rules for o in others)
    assert "iptables -F ck-delay" in stop and "pkill -f /tmp/ck-delay-hold.py" in stop


def test_duplication_clones_on_every_sender_what_goes_to_the_targets(tmp_path):
    camp, backend, history = campaign(tmp_path, ["duplicate"])

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "duplicate", "active-controller", 1.0))
        await stop()
    asyncio.run(go())
    tees = {n: t for n, t in backend.calls if "-j TEE" in t}
    assert sorted(tees) == [1, 3, 4, 5]  # every node but the target
    assert all(f"-d 10.9.0.{CONTROLLER} -m statistic --mode random --probability 0.2000 -j TEE "
               f"--gateway 10.9.0.{CONTROLLER}" in t for t in tees.values())
    assert sorted(n for n, t in backend.calls if "iptables -t mangle -F ck-dup" in t) == [1, 3, 4, 5]
    opened = next(r for r in rows(history, tmp_path) if r["f"] == "start-duplicate")
    assert opened["value"]["nodes"] == [CONTROLLER]


def test_a_package_the_campaign_did_not_list_is_still_healed_at_the_end(tmp_path):
    camp, backend, history = campaign(tmp_path, ["kill"])

    async def go():
        await camp.start_fault(FaultStep(0, 0.0, "pause", "one", 1.0))
        await camp.stop_faults()  # the workload ended before the step's undo
    asyncio.run(go())
    assert [t for _, t in backend.calls] == ["ck-ctl pause", "ck-ctl resume"]


def test_a_partition_cuts_what_its_grudge_says_and_heals(tmp_path):
    camp, backend, history = campaign(tmp_path, ["partition"], workload="register")

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "partition", "isolate-controller", 1.0))
        assert camp.partitioned
        await stop()
        assert not camp.partitioned
    asyncio.run(go())
    out = rows(history, tmp_path)
    start = next(r for r in out if r["f"] == "start-partition" and r["type"] == "info")
    assert start["value"]["grudge"][str(CONTROLLER)] == [1, 3, 4, 5]
    drops = [t for n, t in backend.calls if n == CONTROLLER and "-j DROP" in t]
    assert drops and all(f"10.9.0.{o}" in drops[0] for o in (1, 3, 4, 5))
    assert {n for n, t in backend.calls if "iptables -F ck-partition" in t} == {1, 2, 3, 4, 5}


def test_scenarios_act_on_the_partition_they_choose(tmp_path, monkeypatch):
    for module in (strand_replica, depose_leader):
        for const in ("CUT_S", "DOWN_S", "REFUSE_S", "AFTER_SHRINK_S", "PROGRESS_OPS"):
            if hasattr(module, const):
                monkeypatch.setattr(module, const, 0)
    camp, backend, history = campaign(tmp_path, ["depose-leader", "strand-replica"])
    # Once cut, the partition has what each scenario waits for: another leader (depose-leader),
    # an ISR without the stranded follower, still led by n3 (strand-replica).
    running = []
    cut_rows = {"depose-leader": (0, 4, [3, 4, 5], [4, 5]),
                "strand-replica": (0, 3, [3, 4, 5], [3])}
    camp.partition_infos = lambda: ([cut_rows[running[-1]]] + INFOS[1:] if camp.partitioned
                                    else INFOS)

    async def go():
        for i, name in enumerate(["depose-leader", "strand-replica"]):
            running.append(name)
            stop = await camp.start_fault(FaultStep(i, 0.0, name, "partition", 1.0))
            await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis" and r["type"] == "info"]
    cuts = [r["value"] for r in out if r["f"] == "start-partition"]
    assert [c["shape"] for c in cuts] == ["depose-leader", "strand-replica"]
    assert cuts[0]["partition"] == 0 and cuts[0]["grudge"]["3"] == [1, 2, 4, 5]
    refused = next(r["value"] for r in out if r["f"] == "refuse-clients")
    assert refused["nodes"] == [3] and refused["port"] == camp.client_port
    assert any(n == 3 and "--dport" in t and "tcp-reset" in t for n, t in backend.calls)
    # strand-replica: only partition 0 has a full ISR; the stranded follower is cut from the
    # others, which are then killed and brought back by the undo
    kill = next(r["value"] for r in out if r["f"] == "kill")
    stranded = next(int(k) for k, v in cuts[1]["grudge"].items() if len(v) == 2)
    assert stranded in (4, 5) and sorted(kill["nodes"]) == sorted({3, 4, 5} - {stranded})
    assert any(r["f"] == "start" and r["value"]["nodes"] == kill["nodes"] for r in out)
    assert [camp.fault_outcomes[i]["status"] for i in (0, 1)] == ["happened", "happened"]
    assert camp.fault_outcomes[1]["nodes"] == kill["nodes"]


def test_a_scenario_with_nothing_to_act_on_is_not_reached_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(Scenario, "WAIT_S", 0.0)
    camp, backend, history = campaign(tmp_path, ["depose-leader"])
    camp.partition_infos = lambda: [(0, -1, [3, 4, 5], [])]
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "depose-leader", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached", outcome
    assert "no partition of the topic fit within 0 s" in outcome["why"]
    assert backend.calls == []


def test_disk_faults_are_set_and_cleared_in_faultfs_each_under_its_own_name(tmp_path):
    camp, backend, history = campaign(tmp_path, ["disk-error", "slow-fsync"])
    camp.cfg.nemesis_options = {"disk-error": {"ops": ["read"], "files": "*.log"},
                                "slow-fsync": {"delay_ms": 250}}

    async def go():
        stops = [await camp.start_fault(FaultStep(i, 0.0, name, "one", 1.0))
                 for i, name in enumerate(["disk-error", "slow-fsync"])]
        for stop in stops:
            await stop()
    asyncio.run(go())
    history.close()
    sets = [json.loads(t.split(" ", 2)[2]) for _, t in backend.calls if t.startswith("ck-ctl disk")]
    assert {"cmd": "set", "name": "disk-error",
            "errors": [{"ops": ["read"], "path": "*.log", "errno": "EIO"}]} in sets
    assert {"cmd": "set", "name": "slow-fsync", "fsync_delay_ms": 250} in sets
    assert {"cmd": "clear", "name": "disk-error"} in sets and \
        {"cmd": "clear", "name": "slow-fsync"} in sets
    cfg = RunConfig(workload="queue", nemesis=["slow-fsync"])
    assert needs_faultfs(cfg) and not needs_faultfs(RunConfig(nemesis=["kill"]))


def test_power_loss_through_faultfs_kills_then_drops_and_turns_the_node_seam_off(tmp_path):
    camp, backend, history = campaign(tmp_path, ["power-loss"])
    camp.cfg.nemesis_options = {"power-loss": {"torn": True}}  # via fuse: the default
    assert needs_faultfs(camp.cfg) and "chaoskraft.power.loss.enable" not in node_config(camp.cfg)

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "power-loss", "minority", 1.0))
        await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis" and r["type"] == "info"]
    assert [r["f"] for r in out] == ["power-loss", "drop-unsynced", "start"]
    nodes = out[0]["value"]["nodes"]
    assert out[1]["value"]["dropped"] == {str(n): {"files": 2, "unsynced_bytes": 8192,
                                                   "torn_bytes_kept": 0} for n in nodes}
    texts = [(n, t) for n, t in backend.calls]
    kills = [i for i, (n, t) in enumerate(texts) if t == "ck-ctl kill"]
    drops = [i for i, (n, t) in enumerate(texts) if "drop-unsynced" in t]
    assert len(kills) == len(drops) == len(nodes) and max(kills) < min(drops), "killed first"
    assert all('"torn": true' in texts[i][1] for i in drops)


def test_packages_declare_what_the_campaign_validator_and_the_node_need():
    assert set(PACKAGES) >= {"partition", "kill", "power-loss", "pause", "clock", "packet-loss",
                             "corrupt", "strand-replica", "depose-leader"}
    for name, cls in PACKAGES.items():
        assert cls.name == name
        assert issubclass(cls, (NodeFault, Scenario)) or name == "partition", name
        assert check_options(name, {"weight": 1}) is None
        assert check_options(name, {"weight": -1})[0] == "weight"
        assert check_options(name, {"nope": 1})[0] == "nope"
        if cls.targeted:
            assert check_options(name, {"targets": ["nowhere"]})[0] == "targets"
    cfg = RunConfig(workload="queue", nemesis=["power-loss", "clock", "strand-replica"])
    props = node_config(cfg)
    assert "chaoskraft.power.loss.enable" not in props and needs_faultfs(cfg), \
        "power loss through faultfs by default"
    assert props["replica.lag.time.max.ms"] == "3000"
    cfg.nemesis_options = {"power-loss": {"via": "process"}}
    assert node_config(cfg)["chaoskraft.power.loss.enable"] == "true"
    assert not needs_faultfs(cfg)
    assert needs_faketime(cfg) and not needs_faketime(RunConfig(nemesis=["kill"]))
    with pytest.raises(ValueError, match="aims at a partition of the queue workload's topic"):
        plan(1, ["strand-replica"], 60, 5, workload="register")


def test_every_package_is_drawn_by_a_plan_with_its_modes():
    steps = plan(3, list(PACKAGES), 3000, 5, workload="queue",
                 duration_s=(1.0, 2.0), combine="concurrent")
    kinds = {s.kind for s in steps}
    assert kinds == set(PACKAGES)
    for s in steps:
        cls = PACKAGES[s.kind]
        assert (s.mode in cls.modes) if cls.modes else s.mode == ""
        if cls.length_s is not None:
            assert s.duration_s == cls.length_s


# ------------------------------------------------- the executor in virtual time (MockClock)

class ClientProgress(dict):
    """The history's counts, with clients that complete ``OK_PER_S`` operations ok each
    virtual second (what a scenario waiting for acknowledged writes sees)."""
    OK_PER_S = 10

    def __init__(self, clock, counts) -> None:
        super().__init__(counts)
        self.clock = clock

    def __getitem__(self, key):
        if key == "ok":
            return int(self.clock.monotonic() * self.OK_PER_S)
        return super().__getitem__(key)


class ClockedHistory(HistoryWriter):
    """The history, with each row's virtual time beside it: (t, type, f)."""

    def __init__(self, path, clock) -> None:
        super().__init__(path)
        self.clock = clock
        self.counts = ClientProgress(clock, self.counts)
        self.timed: list[tuple[float, str, str]] = []

    def record(self, process, type_, f, *args, **kw):
        if process == "nemesis":
            self.timed.append((self.clock.monotonic(), type_, f))
        return super().record(process, type_, f, *args, **kw)


def clocked_campaign(tmp_path, packages, combine="sequential"):
    clock = MockClock()
    history = ClockedHistory(tmp_path / "history.jsonl", clock)
    cfg = RunConfig(seed=7, workload="queue", nemesis=list(packages), nemesis_combine=combine)
    return RecordingCampaign(cfg, RecordingBackend(), history, lambda m: None, clock=clock), clock


def opened_and_closed(history) -> dict[float, set[str]]:
    """Virtual time -> the packages whose fault opened ('+name') or closed ('-name') then."""
    out: dict[float, set[str]] = {}
    for t, type_, f in history.timed:
        if type_ != "info":
            continue
        for name in ([OPENS[f]] if f in OPENS else []):
            out.setdefault(round(t, 6), set()).add("+" + name)
        for name in CLOSES.get(f, ()):
            out.setdefault(round(t, 6), set()).add("-" + name)
    return out


@pytest.mark.parametrize("combine", ["sequential", "concurrent"])
def test_the_nemesis_runs_a_plan_on_time_in_virtual_time(tmp_path, combine):
    """A seed's whole plan (five minutes of faults) runs against the recording backend in
    virtual time: each step starts at its time and is undone when its duration is up."""
    packages = ["kill", "pause", "packet-loss"]
    camp, clock = clocked_campaign(tmp_path, packages, combine)
    steps = plan(11, packages, 300.0, 10.0, duration_s=(3.0, 6.0), combine=combine)
    assert len(steps) > 10
    clock.run(camp.nemesis(steps, clock.monotonic()))
    camp.history.close()
    seen = opened_and_closed(camp.history)
    for step in steps:
        assert camp.fault_outcomes[step.index]["status"] == "happened", step
        assert "+" + step.kind in seen.get(round(step.at_s, 6), set()), (step, seen)
        end = round(step.at_s + step.duration_s, 6)
        assert "-" + step.kind in seen.get(end, set()), (step, seen)
    assert clock.monotonic() == pytest.approx(max(s.at_s + s.duration_s for s in steps))
    if combine == "concurrent":  # some faults of different packages overlap
        spans = [(s.at_s, s.at_s + s.duration_s) for s in steps]
        assert any(a0 < b1 and b0 < a1 for i, (a0, a1) in enumerate(spans)
                   for b0, b1 in spans[i + 1:])


# The clients' 20 operations after the refusal take 2 s at ClientProgress's rate, within
# REFUSE_S; a leader never named ends the scenario PATIENCE_S after the cut's CUT_S, healed at once.
NEVER = 7.0 + depose_leader.CUT_S + Scenario.PATIENCE_S


@pytest.mark.parametrize("elected_after_s, refused_at, healed_at", [
    (0.0, 7.0 + depose_leader.CUT_S, 32.0),
    (3.0, 7.0 + depose_leader.CUT_S + 3.0, 32.0),
    (None, None, NEVER)])
def test_a_scenario_plays_its_phases_on_time(tmp_path, elected_after_s, refused_at, healed_at):
    """depose-leader: the cut at its start, the clients refused CUT_S later once the other
    nodes name a new leader (waited for up to PATIENCE_S), everything healed when the step's
    duration is up; the step outlasting the scenario waits out the rest. A leader never named
    is the scenario's state not reached: no client is refused, the cut is healed at once, the
    step says why, and the plan is late by as much as the wait overran the step."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    cut_ends = 7.0 + depose_leader.CUT_S

    def infos():
        elected = elected_after_s is not None and clock.monotonic() >= cut_ends + elected_after_s
        return [(0, 4 if elected else 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "depose-leader", "partition", 25.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    timed = [(t, f) for t, type_, f in camp.history.timed if type_ == "info"]
    if refused_at is None:
        assert timed == [(7.0, "start-partition"), (healed_at, "stop-partition")], timed
        outcome = camp.fault_outcomes[0]
        assert outcome["status"] == "not-reached", outcome
        assert "no new leader of partition 0 was named" in outcome["why"], outcome
        assert camp.late_s == pytest.approx(NEVER - 32.0)
        return
    assert timed == [(7.0, "start-partition"), (refused_at, "refuse-clients"),
                     (healed_at, "stop-partition")], timed
    refused = [json.loads(line)["value"] for line in (tmp_path / "history.jsonl").read_text()
               .splitlines() if '"refuse-clients"' in line and '"info"' in line][0]
    assert refused["new_leader"] == 4, refused
    assert camp.fault_outcomes[0]["status"] == "happened" and camp.late_s == 0.0


def test_a_scenario_whose_state_turned_unreachable_heals_and_aims_again(tmp_path):
    """depose-leader cuts off n3, but its followers had already left the ISR: the partition
    is leaderless with only n3 in its ISR, an election that cannot come. The scenario heals
    at once and aims again when the ISR is whole; the second time a new leader is named and
    the clients are refused. Each attempt is in the history and the harness log."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    logged = []
    camp.log = logged.append
    second_cut = []

    def infos():
        now = clock.monotonic()
        cuts = [t for t, type_, f in camp.history.timed if f == "start-partition" and
                type_ == "info"]
        if len(cuts) == 1 and camp.partitioned:  # the first cut: no other replica may lead
            return [(0, -1, [3, 4, 5], [3])] if now >= cuts[0] + 1 else [(0, 3, [3, 4, 5], [3, 4, 5])]
        if len(cuts) == 2:
            second_cut.append(cuts[1])
            if now >= cuts[1] + depose_leader.CUT_S:
                return [(0, 4, [3, 4, 5], [4, 5])]
        return [(0, 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "depose-leader", "partition", 25.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    fs = [f for _, type_, f in camp.history.timed if type_ == "info"]
    assert fs == ["start-partition", "stop-partition", "start-partition", "refuse-clients",
                  "stop-partition"], fs
    assert camp.fault_outcomes[0]["status"] == "happened", camp.fault_outcomes[0]
    said = [line for line in logged if "aiming again" in line]
    assert len(said) == 1 and "only n3, cut off, in its ISR [3]" in said[0], logged
    # healed as soon as the partition was seen leaderless, not after the 90 s patience
    assert second_cut[0] - 7.0 < depose_leader.CUT_S + 2.0


def test_a_scenario_that_cannot_reach_its_state_gives_up_after_its_attempts(tmp_path):
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])

    def infos():
        return [(0, -1, [3, 4, 5], [3])] if camp.partitioned else [(0, 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    clock.run(camp.nemesis([FaultStep(0, 7.0, "depose-leader", "partition", 25.0)],
                           clock.monotonic()))
    camp.history.close()
    cuts = [f for _, type_, f in camp.history.timed if type_ == "info" and f == "start-partition"]
    assert len(cuts) == Scenario.ATTEMPTS
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached"
    assert f"(attempt {Scenario.ATTEMPTS} of {Scenario.ATTEMPTS})" in outcome["why"], outcome


def test_a_scenario_waits_for_a_partition_that_fits_then_says_it_was_not_reached(tmp_path):
    """Nothing fits: the scenario asks again every 0.5 s for WAIT_S, then is not reached."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    asked = []
    camp.partition_infos = lambda: asked.append(clock.monotonic()) or [(0, -1, [3, 4, 5], [])]
    clock.run(camp.start_fault(FaultStep(0, 0.0, "depose-leader", "partition", 1.0)))
    assert asked[0] == 0.0 and asked[-1] > Scenario.WAIT_S
    assert all(b - a == pytest.approx(0.5) for a, b in zip(asked, asked[1:]))
    assert camp.fault_outcomes[0]["status"] == "not-reached"


def test_a_late_phase_shifts_the_rest_of_the_plan_and_stretches_the_workload(tmp_path):
    """On a slow machine depose-leader's new leader comes 40 s after the cut's CUT_S: the
    scenario ends 40 s late, the next step starts 40 s after its planned time instead of
    being cut off, and the workload's deadline is 40 s later, up to max_stretch x the limit."""
    from workloads.workload import Deadline
    camp, clock = clocked_campaign(tmp_path, ["depose-leader", "kill"])
    cut_ends = 7.0 + depose_leader.CUT_S

    def infos():
        elected = clock.monotonic() >= cut_ends + 40.0
        return [(0, 4 if elected else 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    steps = [FaultStep(0, 7.0, "depose-leader", "partition", 18.0),
             FaultStep(1, 30.0, "kill", "one", 5.0)]
    deadline = Deadline(60.0, 60.0 * camp.cfg.max_stretch, camp.lateness, clock.monotonic)
    seen = []

    async def watch():
        while True:
            seen.append((clock.monotonic(), deadline.at()))
            await clock.sleep(1.0)

    async def go():
        w = asyncio.ensure_future(watch())
        await camp.nemesis(steps, clock.monotonic())
        w.cancel()
    clock.run(go())
    camp.history.close()
    # the refusal at cut_ends + 40, the clients' 20 operations 5 s later (REFUSE_S), healed
    ended = cut_ends + 40.0 + depose_leader.REFUSE_S
    late = ended - (7.0 + 18.0)
    assert camp.late_s == pytest.approx(late)
    kills = [t for t, type_, f in camp.history.timed if f == "kill" and type_ == "info"]
    assert kills == [pytest.approx(30.0 + late)], camp.history.timed
    assert [camp.fault_outcomes[i]["status"] for i in (0, 1)] == ["happened", "happened"]
    # while the scenario overran, the deadline moved with it, second by second
    during = [(t, at) for t, at in seen if 25.0 < t < ended]
    assert during and all(at == pytest.approx(60.0 + t - 25.0) for t, at in during), during
    assert deadline.at() == pytest.approx(60.0 + late)
    camp.late_s = 1000.0
    assert deadline.at() == 60.0 * camp.cfg.max_stretch  # never past the cap


def test_the_mock_clock_stands_still_while_a_thread_works():
    clock = MockClock()

    async def go():
        started = clock.monotonic()
        await asyncio.gather(clock.sleep(5), asyncio.to_thread(sum, range(10**6)))
        during = clock.monotonic()
        await asyncio.to_thread(sum, range(10**6))
        return started, during, clock.monotonic()
    assert clock.run(go()) == (0.0, 5.0, 5.0)


def test_clock_bumps_go_the_directions_the_campaign_allows():
    import random

    from nemesis.packages.clock import bump_offsets
    rng = random.Random(5)
    back = [o for _ in range(50) for o in bump_offsets([1, 2, 3], 60, rng, ["back"]).values()]
    assert all(-60 <= o <= -6 for o in back)
    both = [o for _ in range(50) for o in bump_offsets([1, 2, 3], 60, rng).values()]
    assert min(both) < 0 < max(both)


def test_strand_replica_kills_once_the_stranded_replica_is_out_of_the_isr(tmp_path):
    """The ISR members die only once the freshest metadata shows the stranded replica out of
    the ISR (the shrink took 2 s longer than CUT_S here); before, they would take with them
    nothing the stranded one lacks."""
    camp, clock = clocked_campaign(tmp_path, ["strand-replica"])
    cut_ends = 7.0 + strand_replica.CUT_S

    def infos():
        shrunk = clock.monotonic() >= cut_ends + 2.0
        return [(0, 3, [3, 4, 5], [3] if shrunk else [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "strand-replica", "partition", 30.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    timed = [(t, f) for t, type_, f in camp.history.timed if type_ == "info"]
    # then AFTER_SHRINK_S, during which the clients completed more than PROGRESS_OPS
    assert timed[:2] == [(7.0, "start-partition"),
                         (cut_ends + 2.0 + strand_replica.AFTER_SHRINK_S, "kill")], timed
    kill = [json.loads(line)["value"] for line in (tmp_path / "history.jsonl").read_text()
            .splitlines() if '"kill"' in line and '"info"' in line][0]
    assert kill["isr"] == [3] and kill["waited_s"] == 2.0, kill


def test_a_power_loss_waits_for_acknowledged_writes_before_it_strikes(tmp_path):
    """A power loss destroys what was acknowledged and not yet synced: it waits until the
    clients have had writes acknowledged since the previous fault (here the first sends are
    acknowledged 12 s in, as after a machine that stalled), and makes the plan late by the wait."""
    camp, clock = clocked_campaign(tmp_path, ["power-loss"])
    acked = lambda: 0 if clock.monotonic() < 12.0 else int((clock.monotonic() - 12.0) * 10)
    camp._acked_writes = acked
    step = FaultStep(0, 2.0, "power-loss", "one", 4.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    struck = [t for t, type_, f in camp.history.timed if f == "power-loss" and type_ == "invoke"]
    # 10 writes at 10 a second: 1 s after the first one
    assert struck == [pytest.approx(13.0, abs=0.5)], camp.history.timed
    assert camp.fault_outcomes[0]["status"] == "happened"
    assert camp.late_s == pytest.approx(13.0 - 2.0, abs=0.5)


def test_a_power_loss_starts_anyway_when_no_write_is_acknowledged_in_time(tmp_path):
    from harness.campaign import ACKED_WRITES_S
    camp, clock = clocked_campaign(tmp_path, ["power-loss"])
    camp._acked_writes = lambda: 0
    clock.run(camp.nemesis([FaultStep(0, 2.0, "power-loss", "one", 4.0)], clock.monotonic()))
    camp.history.close()
    struck = [t for t, type_, f in camp.history.timed if f == "power-loss" and type_ == "invoke"]
    assert struck == [pytest.approx(2.0 + ACKED_WRITES_S, abs=0.6)], camp.history.timed

