"""The decommission package in the simulator: brokers moved off, unregistered, and new
machines registered in their place under new node ids (or, with ``replacement: same-id``,
the old machines on new disks under their ids) while crashes, partitions and clock steps go
on; the correct node keeps every safety and data invariant and serves after the faults."""
import pytest

from harness.simulate import run_seed

DECOMMISSION = {"extra_faults": {"decommission": 15000}}


@pytest.mark.parametrize("seed", [3, *(pytest.param(s, marks=pytest.mark.nightly) for s in (6, 11))])
def test_the_correct_node_stays_valid_while_brokers_leave_and_new_ones_join(seed):
    o = run_seed(seed, 5, 150, frozenset(), dict(DECOMMISSION), "queue")
    assert o.ok, (o.invariant, o.detail)
    r = o.result
    steps = [s for s in r.plan if s.kind == "decommission"]
    assert any(s.status == "happened" for s in steps), r.plan
    assert r.coverage.get("broker-unregistered", 0) >= 1, r.coverage
    assert r.coverage.get("reassignment-completed", 0) >= 1, r.coverage
    assert r.stats["nodes_added"] >= 1 and r.stats["wipes"] == 0, r.stats


def test_a_new_broker_takes_the_place_under_a_new_id_and_the_old_one_stays_out():
    """The new machine gets the next unused node id and a partition moves onto it; the
    old one is never started again, also not when the faults end."""
    from harness.simulate import _options
    from simulator.cluster import Simulation
    options, queue_options = _options(3, dict(DECOMMISSION))
    sim = Simulation(3, nodes=5, duration_s=150, options=options, workload="queue",
                     queue_options=queue_options)
    result = sim.run()
    assert result.ok, (result.invariant, result.detail)
    added = sorted(set(sim.nodes) - set(range(1, 5 + sim.options.observers + 1)))
    assert added and sim.retired and not set(added) & sim.retired, (added, sim.retired)
    assert all(sim.nodes[n].node is None for n in sim.retired), "never started again"
    assert all(sim.nodes[n].node is not None for n in added)
    listed = sim.plan.broker_lists()
    assert all(set(added) <= set(ids) and not sim.retired & set(ids)
               for ids in listed.values()), listed


def test_same_id_brings_the_old_machine_back_on_a_new_disk(monkeypatch):
    from nemesis.packages.decommission import Decommission
    monkeypatch.setattr(Decommission, "defaults", {"replacement": "same-id"})
    o = run_seed(3, 5, 150, frozenset(), dict(DECOMMISSION), "queue")
    assert o.ok, (o.invariant, o.detail)
    assert o.result.stats["wipes"] >= 1 and not o.result.stats.get("nodes_added"), o.result.stats


def test_with_no_replacement_the_cluster_shrinks(monkeypatch):
    from nemesis.packages.decommission import Decommission
    monkeypatch.setattr(Decommission, "defaults", {"replacement": "none"})
    o = run_seed(3, 5, 150, frozenset(), dict(DECOMMISSION), "queue")
    assert o.ok, (o.invariant, o.detail)
    r = o.result
    assert r.coverage.get("broker-unregistered", 0) >= 1, r.coverage
    assert not r.stats.get("nodes_added") and r.stats["wipes"] == 0, r.stats
    assert r.stats["nodes_retired"] >= 1, r.stats
    assert any(s.kind == "decommission" and s.status == "happened" for s in r.plan), r.plan


def test_a_broker_is_never_wiped_on_a_view_that_knows_no_partition():
    """Seed 193 reads no partition of the topic (every live node still catching up) when its
    second step fires; the package once took that for a broker holding nothing and wiped
    the only in-sync replica of partition 0 (durability, inconsistent-offsets). Now no
    partition known means nothing to choose from: the step is skipped."""
    o = run_seed(193, 5, 120, frozenset(), dict(DECOMMISSION), "queue")
    assert o.ok, (o.invariant, o.detail)


def test_the_internal_topics_move_off_the_broker_before_it_leaves():
    """Seed 99 with add-broker beside decommission: the broker taken out (n5) was, after
    earlier crashes, the only in-sync replica of three transaction log partitions. Once
    the scenario moved only the workload's topic, and n5 left with them: those partitions
    stayed offline, the transactional producers they coordinated never found a
    coordinator again, and the final reader never ran (FinalReadDone). Now its replicas of
    the internal topics move to brokers that stay before it stops (here the moves, onto
    brokers crashed meanwhile, are still being waited for when the faults end: n5 never
    stops, and nothing is offline)."""
    from harness.simulate import _options
    from simulator.cluster import Simulation
    options, queue_options = _options(99, {"extra_faults": {"add-broker": 20000,
                                                            "decommission": 15000}})
    sim = Simulation(99, nodes=5, duration_s=120, options=options, workload="queue",
                     queue_options=queue_options)
    result = sim.run()
    assert result.ok, (result.invariant, result.detail)
    infos = sim.plan.partition_infos("__transaction_state")
    assert infos and all(5 not in replicas and leader >= 0 for _, leader, replicas, _ in infos), \
        infos


def test_a_machine_not_yet_registered_is_no_target_in_the_simulator_either(monkeypatch):
    """As in Docker (brokers.yaml seed 5): a node add-broker has just started but no broker
    lists yet is neither decommissioned nor a target of the moves off."""
    import random

    from nemesis.packages.decommission import Decommission

    class View:  # the simulated cluster as the package reads it: n6 runs, unregistered
        ids, killed, controllers = [1, 2, 3, 4, 5, 6], set(), {1, 2, 3}

        def broker_lists(self):
            return {n: (1, 2, 3, 4, 5) for n in self.ids}

        def partition_infos(self, topic=None):
            return [(0, 4, [4, 1, 2], [4, 1, 2]), (1, 1, [1, 5, 3], [1, 5, 3])]

        def active_controller(self):
            return 1
    chosen = []
    monkeypatch.setattr(Decommission, "sim_act", lambda self, sim, choice, rng:
                        chosen.append(choice))
    for seed in range(30):
        Decommission().simulate(View(), None, {}, random.Random(seed), 1, None)
    assert {broker for broker, _ in chosen} == {4, 5}, chosen
    assert all(6 not in t for _, moves in chosen for t in moves.values()), chosen
