"""The decommission package in the simulator: brokers moved off, unregistered, their disks
replaced and registered again under their ids while crashes, partitions and clock steps go
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
    assert r.stats["wipes"] >= 1, r.stats


def test_a_broker_is_never_wiped_on_a_view_that_knows_no_partition():
    """Seed 193 reads no partition of the topic (every live node still catching up) when its
    second step fires; the package once took that for a broker holding nothing and wiped
    the only in-sync replica of partition 0 (durability, inconsistent-offsets). Now no
    partition known means nothing to choose from: the step is skipped."""
    o = run_seed(193, 5, 120, frozenset(), dict(DECOMMISSION), "queue")
    assert o.ok, (o.invariant, o.detail)
