"""The voters package (controller membership changes, KIP-853) in the simulator: its choice
of change, and the correct node valid under it with every invariant of a dynamic quorum
(AtMostOneUncommittedVoterSet, MajorityReachedHighWatermark over the voter sets) while
voters are removed (the leader among them) and added back."""
import random

import pytest

from harness.simulate import run_seed
from nemesis.packages.voters import MIN_VOTERS, voter_change

VOTERS = {"extra_faults": {"voters": 8000}}


def test_the_choice_keeps_the_quorum_and_adds_back_what_it_removed():
    rng = random.Random(1)
    seen = {voter_change([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 1, rng) for _ in range(200)}
    assert {k for k, _ in seen} == {"remove"} and ("remove", 1) in seen  # the leader too
    assert voter_change([1, 2, 3], [1, 2, 3, 4, 5], 1, rng)[0] == "add"  # at the minimum
    assert len([1, 2, 3]) == MIN_VOTERS and voter_change([1, 2, 3], [1, 2, 3], 1, rng) is None
    both = {voter_change([1, 2, 3, 4], [1, 2, 3, 4, 5], 1, rng)[0] for _ in range(100)}
    assert both == {"add", "remove"}
    assert all(voter_change([1, 2, 3, 4], [1, 2, 3, 4, 5], 1, rng) != ("add", 1)
               for _ in range(50))


@pytest.mark.parametrize("seed", [*(pytest.param(s, marks=pytest.mark.nightly) for s in (1, 2)), 3])
def test_the_correct_node_stays_valid_while_the_voter_set_changes(seed):
    o = run_seed(seed, 5, 240, frozenset(), dict(VOTERS))
    assert o.ok, (o.invariant, o.detail)
    r = o.result
    happened = [s for s in r.plan if s.status == "happened"]
    assert happened and r.coverage.get("raft-voters-changed", 0) >= 2, (r.plan, r.coverage)
