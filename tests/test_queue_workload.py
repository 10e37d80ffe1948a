"""The queue workload's pure parts: generator, configuration, fault plans, client outcomes."""
import itertools

import pytest

from harness.config import CampaignError, resolve
from harness.runner import node_config
from nemesis.faults import grudge, node_targets
from nemesis.schedule import plan
from workloads.queue import QueueGenerator


def test_generator_is_a_function_of_seed_and_process_with_unique_values():
    a = list(itertools.islice(QueueGenerator(7, 4).ops(3), 200))
    b = list(itertools.islice(QueueGenerator(7, 4).ops(3), 200))
    assert a == b
    assert a != list(itertools.islice(QueueGenerator(8, 4).ops(3), 200))
    sends = [op for op in a if op.f == "send"]
    assert len({op.value for op in sends}) == len(sends) and 60 < len(sends) < 140
    assert {op.key for op in sends} == {"k0", "k1", "k2", "k3"}
    other = {op.value for op in itertools.islice(QueueGenerator(7, 4).ops(4), 200)
             if op.f == "send"}
    assert not other & {op.value for op in sends}, "values are unique across processes"


def test_queue_defaults_and_power_loss_node_config():
    cfg = resolve({"workload": "queue"}, {})
    assert cfg.test == "queue" and cfg.nemesis == ["partition", "kill", "power-loss"]
    assert cfg.flush_messages == 1, "queue campaigns fsync every batch unless told otherwise"
    assert node_config(cfg)["chaoskraft.power.loss.enable"] == "true"
    never = resolve({"workload": "queue", "flush_messages": None, "nemesis": ["kill"]}, {})
    assert never.flush_messages is None and "chaoskraft.power.loss.enable" not in node_config(never)
    assert resolve({}, {}).nemesis == ["partition", "kill"], "the register default is unchanged"


@pytest.mark.parametrize("fields, words", [
    ({"min_insync_replicas": 4}, "more than the replication factor"),
    ({"replication_factor": 6}, "more than the 5 nodes"),
    ({"allowed_anomalies": ["lost-writes"]}, "unknown anomaly 'lost-writes'"),
    ({"power_loss_targets": ["most"]}, "'most' is not one of"),
    ({"client": "sarama"}, "is not one of"),
    ({"idempotent": "yes"}, "wrong type"),
    ({"partitions": 0}, "must be positive"),
])
def test_bad_queue_fields_name_the_field(fields, words):
    with pytest.raises(CampaignError) as e:
        resolve({"workload": "queue", **fields}, {})
    assert words in str(e.value)


def test_queue_plans_aim_at_partition_leaders_and_register_plans_do_not():
    q = plan(3, ["partition", "kill", "power-loss"], 300, 5, workload="queue",
             power_loss_targets=("all",))
    first = {}
    for s in q:
        first.setdefault(s.kind, s.spec)
    assert first == {"partition": "isolate-partition-leader", "kill": "partition-leader",
                     "power-loss": "all"}
    r = plan(3, ["partition", "kill"], 300, 5)
    assert not {s.spec for s in r} & {"isolate-partition-leader", "partition-leader", "all"}
    assert r == plan(3, ["partition", "kill"], 300, 5), "plans are a function of the seed"


def test_leader_targets_resolve_to_the_leader():
    import random
    assert node_targets("partition-leader", [1, 2, 3, 4, 5], random.Random(1), leader=4) == [4]
    assert node_targets("all", [3, 1, 2], random.Random(1)) == [1, 2, 3]
    g = grudge("isolate-partition-leader", [1, 2, 3], random.Random(1), leader=2)
    assert g[2] == {1, 3} and g[1] == {2}


def test_scenarios_pick_a_partition_the_scenario_can_act_on():
    import random
    from nemesis.faults import depose_choice, strand_choice
    controllers = {1, 2, 3}
    # partition 0 lives on three controllers: killing two of them would end the quorum;
    # partition 1's ISR is not full; partition 2 fits, stranding one of its followers
    infos = [(0, 1, [1, 2, 3], [1, 2, 3]), (1, 4, [4, 5, 1], [4, 5]), (2, 4, [4, 5, 2], [4, 5, 2])]
    seen = set()
    for seed in range(20):
        partition, stranded, others = strand_choice(infos, controllers, random.Random(seed))
        assert partition == 2 and others == sorted({4, 5, 2} - {stranded})
        seen.add(stranded)
    assert seen == {2, 5}, "the leader is never the stranded replica"
    assert strand_choice(infos[:2], controllers, random.Random(0)) is None
    # a partition led by its preferred replica is deposed (it is the one that leads again)
    infos = [(0, 2, [1, 2, 3], [1, 2, 3]), (1, 4, [4, 5, 1], [4, 5, 1]), (2, -1, [2, 3, 4], [2])]
    assert {depose_choice(infos, random.Random(s)) for s in range(20)} == {(1, 4)}
    assert depose_choice([(2, -1, [2, 3, 4], [2])], random.Random(0)) is None


def test_scenario_packages_are_for_the_queue_and_set_what_they_need():
    with pytest.raises(CampaignError) as e:
        resolve({"nemesis": ["kill", "strand-replica"]}, {})
    assert "'strand-replica' aims at a partition" in str(e.value)
    with pytest.raises(ValueError):
        plan(1, ["depose-leader"], 60, 5, workload="register")
    cfg = resolve({"workload": "queue", "nemesis": ["strand-replica", "depose-leader"]}, {})
    props = node_config(cfg)
    assert props["replica.lag.time.max.ms"] == "3000"
    assert props["leader.imbalance.check.interval.seconds"] == "3"
    steps = plan(4, cfg.nemesis, 120, 5, workload="queue")
    assert {s.kind for s in steps} == {"strand-replica", "depose-leader"}
    assert {(s.kind, s.duration_s) for s in steps} <= {("strand-replica", 24.0),
                                                         ("depose-leader", 13.0)}
    assert steps[-1].at_s + steps[-1].duration_s <= 120


def test_the_active_controller_is_never_stranded():
    import random
    from nemesis.faults import strand_choice
    infos = [(2, 4, [4, 5, 1], [4, 5, 1])]
    for seed in range(20):
        _, stranded, _ = strand_choice(infos, {1, 2, 3}, random.Random(seed), avoid={1})
        assert stranded == 5
    assert strand_choice([(0, 4, [4, 1], [4, 1])], {1, 2, 3}, random.Random(0), avoid={1}) is None
