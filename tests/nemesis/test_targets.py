"""Symbolic node targets (nemesis.faults): what each resolves to when its fault fires."""
import random

from nemesis.faults import aimed_at, check_target, node_targets

IDS = [1, 2, 3, 4, 5]


def test_one_minority_majority_and_all_take_that_many_nodes():
    rng = random.Random(1)
    assert len(node_targets("one", IDS, rng)) == 1
    assert len(node_targets("minority", IDS, rng)) == 2
    assert len(node_targets("majority", IDS, rng)) == 3
    assert node_targets("all", IDS, rng) == IDS


def test_an_aimed_target_takes_the_node_looked_up_or_a_random_one_when_none_is_known():
    rng = random.Random(1)
    assert node_targets("active-controller", IDS, rng, controller=4) == [4]
    assert node_targets("leader-of:2", IDS, rng, leader=3) == [3]
    assert node_targets("partition-leader", IDS, rng)[0] in IDS
    assert (aimed_at("active-controller"), aimed_at("leader-of:2"), aimed_at("node:3")) == \
        ("controller", "leader", None)


def test_a_node_target_names_one_node_of_the_cluster():
    assert check_target("node:3") is None
    assert "node takes a node id" in check_target("node:x")
    assert node_targets("node:3", IDS, random.Random(1)) == [3]
    assert node_targets("node:9", IDS, random.Random(1)) == []  # the step is skipped
    assert "unknown target" in check_target("nodes:3")
