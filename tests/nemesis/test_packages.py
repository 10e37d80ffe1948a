"""Every fault package against a recording backend, without Docker: what it runs on which
node, the history rows it writes (those its report metadata says open and close it), and
that its undo and the campaign's final heal leave nothing in force."""
import asyncio
import json

import pytest

from harness.config import RunConfig, needs_faketime, needs_faultfs, node_config
from nemesis.package import NodeFault, Scenario
from nemesis.packages import PACKAGES, report_kinds
from nemesis.packages import depose_leader, strand_replica
from nemesis.schedule import FaultStep, check_options, plan
from recording import CONTROLLER, INFOS, campaign, rows


OPENS, CLOSES, _ = report_kinds()


NODE_FAULTS = [(name, spec, mode) for name, spec, mode in [
    ("kill", "one", ""), ("power-loss", "minority", ""), ("pause", "active-controller", ""),
    ("clock", "all", "bump"), ("clock", "one", "strobe"), ("packet-loss", "one", ""),
    ("corrupt", "one", "bitflip"), ("one-way", "active-controller", "deaf"),
    ("bandwidth", "minority", ""), ("delay", "partition-leader", ""),
    ("disk-error", "one", ""), ("disk-full", "minority", ""),
    ("slow-fsync", "partition-leader", ""), ("clock-rate", "active-controller", "")]]


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
        assert issubclass(cls, (NodeFault, Scenario)) or name in (
            "partition", "voters", "voter-split", "features"), name
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


def test_a_reassignment_replaces_one_replica_and_waits_for_the_move(tmp_path, monkeypatch):
    """reassign: partition 1's replica outside the ISR (n4) is the one replaced, by a broker
    that holds none; the scenario asks the workload to move it and waits until the
    metadata shows the target; a move the cluster refuses, or one never done within the
    patience, is not reached."""
    import random

    from nemesis.packages.reassign import reassign_choice
    rng = random.Random(3)
    assert reassign_choice([INFOS[1]], [1, 2, 3, 4, 5], rng) in (
        (1, [2, 5, 1]), (1, [3, 5, 1]))
    assert reassign_choice([(0, 3, [3, 4, 5], [3])], [1, 2, 3, 4, 5], rng) is None, \
        "two replicas outside the ISR: the move could not complete"
    assert reassign_choice([(0, -1, [3, 4, 5], [3, 4, 5])], [1, 2, 3, 4, 5], rng) is None
    assert reassign_choice(INFOS[:1], [3, 4, 5], rng) is None, "no broker to move to"
    for _ in range(20):  # full ISR: mostly the leader (the new broker then comes first)
        _, target = reassign_choice(INFOS[:1], [1, 2, 3, 4, 5], rng)
        assert len(target) == 3 and len(set(target) & {3, 4, 5}) == 2
        assert 3 not in target or target[0] == 3
    from nemesis.packages import reassign as package
    monkeypatch.setattr(package, "RETRY_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["reassign"])
    moved = {}
    answers = [RuntimeError("Failed to find active controller id!"), "NotControllerError"]

    def reassign(moves, topic=None):  # no quorum leader at first: asked again
        if answers:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return {p: answer for p in moves}
        moved.update({p: list(r) for p, r in moves.items()})
        return {p: None for p in moves}
    camp.reassign = reassign
    camp.partition_infos = lambda topic=None: [(p, l, moved.get(p, r), i) for p, l, r, i
                                               in (INFOS if topic is None else [])]

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "reassign", "partition", 1.0))
        await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis" and r["type"] == "info"]
    asked = next(r["value"] for r in out if r["f"] == "reassign")
    done = next(r["value"] for r in out if r["f"] == "reassigned")
    assert asked["error"] is None and moved == {asked["partition"]: asked["replicas"]}
    assert (done["partition"], done["replicas"]) == (asked["partition"], asked["replicas"])
    assert camp.fault_outcomes[0]["status"] == "happened"
    (tmp_path / "refused").mkdir()
    camp2, _, _ = campaign(tmp_path / "refused", ["reassign"])
    camp2.reassign = lambda moves, topic=None: {p: "InvalidReplicaAssignmentError"
                                                for p in moves}
    asyncio.run(camp2.start_fault(FaultStep(0, 0.0, "reassign", "partition", 1.0)))
    assert camp2.fault_outcomes[0]["status"] == "not-reached"
    assert "InvalidReplicaAssignmentError" in camp2.fault_outcomes[0]["why"]


def test_a_preferred_election_is_asked_for_while_the_replica_is_back_but_cut_off(
        tmp_path, monkeypatch):
    """elect: the preferred replica (n3 of partition 0) shuts down; once the others lead
    and are the ISR it comes back cut off from them (they drop what it sends) and
    ElectLeaders is asked for every RETRY_S: refused, then healed after CUT_S, then
    elected; the scenario ends once n3 leads. A partition whose other replicas hold the
    active controller, or are a majority of the controllers, does not fit."""
    from nemesis.packages import elect as package
    assert package.elect_choice(INFOS, {1, 2, 3}, CONTROLLER) == (0, 3, [4, 5])
    assert package.elect_choice([(0, 3, [3, 1, 2], [3, 1, 2])], {1, 2, 3}, 1) is None
    assert package.elect_choice([(0, 3, [3, 4, 2], [3, 4, 2])], {1, 2, 3}, 2) is None
    assert package.elect_choice([(0, 3, [3, 4, 2], [3, 4, 2])], {1, 2, 3}, 1) == (
        0, 3, [4, 2])
    assert package.elect_choice([INFOS[1]], {1, 2, 3}, CONTROLLER) is None, "ISR short"
    for const, value in (("RETRY_S", 0.01), ("CUT_S", 0.05), ("LAG_OPS", 0)):
        monkeypatch.setattr(package, const, value)
    camp, backend, history = campaign(tmp_path, ["elect"])
    state = {"leader": 3, "isr": [3, 4, 5]}
    answers = ["PreferredLeaderNotAvailableError"] * 8

    def elect(partition):
        assert partition == 0
        if answers and camp.partitioned:  # refused while cut off, as a correct node does
            return answers.pop(0)
        state.update(leader=3, isr=[3, 4, 5])
        return None

    def stopped(f, targets, value, clean=False):
        state.update(leader=4, isr=[4, 5])
        return original(f, targets, value, clean)
    original = camp.kill
    camp.kill = stopped
    camp.elect = elect
    camp.partition_infos = lambda: [(0, state["leader"], [3, 4, 5], state["isr"])] + INFOS[1:]

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "elect", "partition", 1.0))
        await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis" and r["type"] == "info"]
    assert [r["f"] for r in out][:5] == ["stop", "start-partition", "start", "stop-partition",
                                        "elect"], "healed after CUT_S of refusals"
    cut = next(r["value"] for r in out if r["f"] == "start-partition")
    assert cut["grudge"] == {"4": [3], "5": [3]}
    asked = next(r["value"] for r in out if r["f"] == "elect")
    assert asked["error"] is None and asked["refused"] >= 1 and not asked["while_cut"]
    assert next(r["value"] for r in out if r["f"] == "elected")["leader"] == 3
    assert camp.fault_outcomes[0]["status"] == "happened"
    assert not camp.partitioned and not camp.killed


@pytest.mark.parametrize("directions, held", [(["forward"], True), (["back"], False)])
def test_a_clock_bump_undone_from_ahead_lengthens_the_liveness_bound(tmp_path, directions,
                                                                    held):
    """A clock bumped ahead and reset goes back to true time; its node's Raft timers read
    the wall clock and wait until it has caught up, so the liveness phase allows that long
    on top of liveness_s. A clock bumped back and reset moves forward: nothing to allow."""
    camp, _, history = campaign(tmp_path, ["clock"])
    camp.cfg.nemesis_options = {"clock": {"max_skew_s": 40.0, "directions": directions}}

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "clock", "all", 1.0, "bump"))
        await stop()
    asyncio.run(go())
    history.close()
    bump = next(json.loads(r) for r in (tmp_path / "history.jsonl").read_text().splitlines()
                if '"clock-bump"' in r)
    ahead = max(bump["value"]["offsets"].values())
    bound, extra = camp.liveness_bound()
    if held:
        assert 4.0 <= ahead <= 40.0 and ahead - 1.0 <= extra <= ahead + 0.05, (ahead, extra)
        assert bound == camp.cfg.liveness_s + extra
    else:
        assert ahead < 0 and (bound, extra) == (camp.cfg.liveness_s, 0.0)


def test_a_clock_that_ran_fast_and_is_reset_lengthens_the_liveness_bound(tmp_path):
    camp, _, history = campaign(tmp_path, ["clock-rate"])

    async def ahead(nodes):
        return {n: 12.0 for n in nodes}

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "clock-rate", "one", 1.0, ""))
        camp.measure_clocks = ahead  # the node's clock is now 12 s ahead of true time
        await stop()
    asyncio.run(go())
    history.close()
    bound, extra = camp.liveness_bound()
    assert 11.0 <= extra <= 12.0 and bound == camp.cfg.liveness_s + extra
