"""The features package (feature levels raised while clients write, KIP-584): its choice of
change, and the correct node valid in the simulator while metadata.version is raised step by
step, eligible leader replicas are turned on and off and a static quorum is made dynamic,
every running node reporting each new level."""
import random

import pytest

from harness.simulate import run_seed
from nemesis.packages.features import (OLDEST_METADATA_VERSION, behind, candidates,
                                       feature_change, freshest)
from node_image.features import MIN_METADATA_VERSION, SUPPORTED

FEATURES = {"extra_faults": {"features": 8000}}
MV, ELR, KRAFT = "metadata.version", "eligible.leader.replicas.version", "kraft.version"


def test_each_change_fits_the_levels_it_was_drawn_from():
    rng = random.Random(1)
    top = SUPPORTED[MV][1]
    for _ in range(200):
        mv = rng.randint(7, top)
        levels = {MV: mv, ELR: rng.randint(0, 1), KRAFT: rng.randint(0, 1)}
        updates = feature_change(levels, top, rng)
        assert 1 <= len(updates) <= 2 and len({u[0] for u in updates}) == len(updates)
        for name, level, kind in updates:
            if name == MV:  # raised, never past what the nodes support, never downgraded
                assert mv < level <= min(top, mv + 4) and kind == 1
            elif name == ELR:  # toggled: a downgrade is asked as a safe one
                assert level == 1 - levels[ELR] and kind == (1 if level else 2)
            else:  # made dynamic only at the newest metadata.version, and only once
                assert (name, level, kind) == (KRAFT, 1, 1) and mv == top and levels[KRAFT] == 0
    # at the top with a dynamic quorum, only ELR is left to change
    assert [u[0] for u in candidates({MV: top, KRAFT: 1, ELR: 1}, top, rng)] == [ELR]
    drawn = {u[0] for _ in range(100) for u in feature_change({MV: top}, top, rng)}
    assert drawn == {ELR, KRAFT}
    assert OLDEST_METADATA_VERSION == MIN_METADATA_VERSION  # what the campaign formats at


def test_the_view_is_the_freshest_broker_that_has_read_the_metadata():
    answers = {1: (40, {MV: 9}, 21), 2: (55, {MV: 11, ELR: 1}, 21), 3: None, 4: (90, {}, 21)}
    assert freshest(answers) == ({MV: 11, ELR: 1}, 21)  # 4 has read nothing yet
    assert freshest({1: None, 2: (0, {}, 21)}) is None
    assert behind(answers, [(MV, 11, 1), (ELR, 1, 1)]) == [1, 4]
    assert behind(answers, [(ELR, 0, 2)]) == [2]  # a level turned off is reported as none


@pytest.mark.parametrize("workload", ["register", "queue"])
@pytest.mark.parametrize("seed", [3, pytest.param(4, marks=pytest.mark.nightly)])
def test_the_correct_node_stays_valid_while_feature_levels_change(seed, workload):
    o = run_seed(seed, 5, 120, frozenset(), dict(FEATURES), workload=workload)
    assert o.ok, (o.invariant, o.detail)
    r = o.result
    steps = [s for s in r.plan if s.kind == "features"]
    assert not [s for s in steps if s.status == "not-reached"], steps
    happened = [s for s in steps if s.status == "happened"]
    assert len(happened) >= 3 and r.coverage.get("feature-level-changed", 0) >= 3, steps
    assert any(MV in s.label for s in happened) and any(ELR in s.label for s in happened)


def test_beside_voters_the_cluster_is_formatted_at_the_newest_level_and_elr_changes():
    """A dynamic quorum needs metadata.version 21: with voters drawn too, the cluster is
    formatted there (a campaign says so with features' metadata_version), and features
    only turns eligible leader replicas on and off while the voter set changes."""
    o = run_seed(1, 5, 60, frozenset(), {"extra_faults": {"features": 4000, "voters": 4000}})
    assert o.ok, (o.invariant, o.detail)
    happened = [s for s in o.result.plan if s.kind == "features" and s.status == "happened"]
    assert happened and all(ELR in s.label and MV not in s.label for s in happened), happened
    cov = o.result.coverage
    assert cov.get("feature-level-changed") and cov.get("raft-voters-changed"), cov


def test_the_upgrade_bug_is_caught_with_the_package_and_missed_without_it():
    """upgrade-elects-outside-isr acts only when metadata.version is raised: seed 1 of the
    queue workload catches it with the package drawn (its sim_options), the same seed
    without the package is valid, and so is the correct node with it."""
    from node_image.bugs import BUGS
    bug = frozenset({"upgrade-elects-outside-isr"})
    options = dict(BUGS["upgrade-elects-outside-isr"].sim_options)
    with_it = run_seed(1, 5, 60, bug, dict(options), workload="queue")
    assert not with_it.ok and with_it.invariant in BUGS[
        "upgrade-elects-outside-isr"].expected + ("QueueAnomaly", "AckedRecordsKept"), (
        with_it.invariant, with_it.detail)
    without = run_seed(1, 5, 60, bug, workload="queue")
    assert without.ok, (without.invariant, without.detail)
    correct = run_seed(1, 5, 60, frozenset(), dict(options), workload="queue")
    assert correct.ok, (correct.invariant, correct.detail)
