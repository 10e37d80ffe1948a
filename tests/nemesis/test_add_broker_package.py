"""add-broker: a new machine under the next node id joins, every broker lists it, and a
partition moves onto it; against a recording backend, and on the simulated cluster beside
decommission (the cluster grows and shrinks while the correct node keeps every invariant)."""
import asyncio

from harness.backends import NodeInfo
from nemesis.packages import decommission
from nemesis.schedule import FaultStep
from recording import INFOS, campaign, rows
from test_decommission_package import _cluster


def adding(backend):
    """The recording backend's ``add_node``: a broker under the next node id."""
    def add_node():
        i = max(n.node_id for n in backend.nodes) + 1
        info = NodeInfo(i, f"n{i}", f"10.9.0.{i}", ("broker",))
        backend.nodes.append(info)
        return info
    return add_node


def test_a_new_broker_joins_and_a_partition_moves_onto_it(tmp_path, monkeypatch):
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(decommission, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["add-broker"])
    moved = {}
    _cluster(camp, moved, [], [])

    backend.add_node = adding(backend)

    async def go():
        for index in (0, 1):
            stop = await camp.start_fault(FaultStep(index, 0.0, "add-broker", "partition", 1.0))
            await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis"]
    added = [r["value"] for r in out if r["f"] == "broker-added"]
    assert [a["node"] for a in added] == [6, 7], added
    for a in added:
        assert a["node"] in a["replicas"] and len(a["replicas"]) == 3
    assert moved[added[-1]["partition"]] == added[-1]["replicas"]  # the last move stands
    assert camp.ids == [1, 2, 3, 4, 5, 6, 7] and not camp.retired and not camp.killed
    assert [o["status"] for o in camp.fault_outcomes.values()] == ["happened"] * 2


def test_max_nodes_bounds_the_growth_and_a_bad_bound_names_the_field(tmp_path, monkeypatch):
    from nemesis.packages import reassign
    from nemesis.schedule import check_options
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(decommission, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["add-broker"])
    camp.cfg.nemesis_options = {"add-broker": {"max_nodes": 6}}
    _cluster(camp, {}, [], [])

    backend.add_node = adding(backend)

    async def go():
        for index in (0, 1):
            stop = await camp.start_fault(FaultStep(index, 0.0, "add-broker", "partition", 1.0))
            if stop is not None:
                await stop()
    asyncio.run(go())
    assert camp.ids == [1, 2, 3, 4, 5, 6]
    outcomes = [camp.fault_outcomes[i] for i in (0, 1)]
    assert outcomes[0]["status"] == "happened" and outcomes[1]["status"] == "skipped"
    assert "6 nodes already (max_nodes 6)" in outcomes[1]["why"], outcomes[1]
    assert check_options("add-broker", {"max_nodes": 0})[0] == "max_nodes"


def test_without_a_machine_to_add_the_step_is_not_reached_and_says_why(tmp_path):
    camp, backend, history = campaign(tmp_path, ["add-broker"])
    said = []
    camp.log = said.append
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "add-broker", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached" and "no machine to add" in outcome["why"]
    assert any("cannot add nodes" in line for line in said), said
    assert camp.ids == [1, 2, 3, 4, 5]


def test_the_cluster_grows_and_shrinks_in_the_simulator_and_the_correct_node_holds():
    from harness.simulate import run_seed
    o = run_seed(3, 5, 120, frozenset(),
                 {"extra_faults": {"add-broker": 20000, "decommission": 15000}}, "queue")
    assert o.ok, (o.invariant, o.detail)
    plan = o.result.plan
    grown = [s for s in plan if s.kind == "add-broker" and s.status == "happened"]
    assert len(grown) >= 2 and o.result.stats["nodes_added"] >= 3, (plan, o.result.stats)
    assert o.result.coverage.get("reassignment-completed", 0) >= 2, o.result.coverage


def test_a_partition_another_step_is_moving_is_left_alone_until_it_is_released(
        tmp_path, monkeypatch):
    """Two scenarios side by side (add-broker, decommission) must not move one partition at
    once: the later move replaces the earlier one's target, whose wait never ends (a run of
    campaigns/brokers.yaml was unknown so). ``moving`` holds the partitions a step moves;
    add-broker waits until partition 0, the only one it may move, is released."""
    from nemesis.packages import reassign
    from nemesis.packages.decommission import move_onto
    import random
    assert move_onto(INFOS, 1, random.Random(1), busy={0}) is None
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(decommission, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["add-broker"])
    moved = {}
    _cluster(camp, moved, [], [])
    backend.add_node = lambda: backend.nodes.append(
        NodeInfo(6, "n6", "10.9.0.6", ("broker",))) or backend.nodes[-1]
    camp.moving.add(0)
    waited = []

    async def go():
        async def release():
            while 6 not in camp.ids:  # the new broker is there: add-broker looks for a move
                await asyncio.sleep(0.01)
            for _ in range(20):
                waited.append(0 not in moved)
                await asyncio.sleep(0.01)
            camp.moving.discard(0)
        task = asyncio.create_task(release())
        stop = await camp.start_fault(FaultStep(0, 0.0, "add-broker", "partition", 1.0))
        await stop()
        await task
    asyncio.run(go())
    assert waited and all(waited), "partition 0 not moved while another step held it"
    added = [r["value"] for r in rows(history, tmp_path) if r["f"] == "broker-added"]
    assert added and added[0]["partition"] == 0 and moved[0] == added[0]["replicas"], added
    assert camp.moving == set(), "released once it is done"
