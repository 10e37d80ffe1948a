"""The voter-split package in the simulator: the correct node holds every invariant of a
dynamic quorum while the quorum is cut with voter changes in flight (two removals asked of
a leader cut off with one voter; a paused voter asked back, then a cut), and the two planted
voter-change bugs break one."""
import pytest

from harness.simulate import run_seed

SPLIT = {"extra_faults": {"voter-split": 20000}}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_correct_node_holds_through_cuts_with_voter_changes_in_flight(seed):
    o = run_seed(seed, 5, 90, frozenset(), dict(SPLIT))
    assert o.ok, (o.invariant, o.detail)
    r = o.result
    happened = [s for s in r.plan if s.kind == "voter-split" and s.status == "happened"]
    assert happened, r.plan
    assert r.coverage.get("raft-voters-changed", 0) >= 2, r.coverage  # removed, added back


@pytest.mark.parametrize("bug, seed, invariant", [
    ("concurrent-voter-changes", 1, "AtMostOneUncommittedVoterSet"),
    ("voter-counted-before-catch-up", 3, "MajorityReachedHighWatermark")])
def test_a_voter_change_bug_is_caught_under_the_cuts(bug, seed, invariant):
    o = run_seed(seed, 5, 90, frozenset({bug}), dict(SPLIT))
    assert not o.ok and o.invariant == invariant, (o.invariant, o.detail)
    again = run_seed(seed, 5, 90, frozenset(), dict(SPLIT))
    assert again.ok, "the same seed on the correct node holds"
