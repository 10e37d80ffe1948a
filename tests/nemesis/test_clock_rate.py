"""The clock-rate package: its options, its rates, and its simulated form, which alone
shows the planted bug lease-read-step-proof (a lease on a Raft clock proof against steps
but not against a slow wall clock). Its Docker and SSH forms: test_faults_docker.py and
tests/harness/test_ssh_hosts.py."""
import math
import re
import random

import pytest

from harness.config import CampaignError, resolve
from harness.simulate import run_seed
from nemesis.packages.clock_rate import draw_rates, rate_script
from nemesis.schedule import FaultStep
from simulator.cluster import Simulation
from simulator.options import SimOptions


@pytest.mark.parametrize("rate, words", [
    ([0.5], "is not [low, high]"), ([2, 1], "out of range"), ([0, 1], "out of range"),
    ("fast", "is not [low, high]"), ([0.5, True], "is not [low, high]")])
def test_a_bad_rate_is_refused_naming_the_field(rate, words):
    with pytest.raises(CampaignError, match=re.escape(words)) as e:
        resolve({"nemesis": ["clock-rate"], "nemesis_options": {"clock-rate": {"rate": rate}}},
                {})
    assert "nemesis_options.clock-rate.rate" in str(e.value)


def test_rates_are_log_uniform_between_low_and_high():
    rates = list(draw_rates(list(range(4000)), 0.25, 4.0, random.Random(1)).values())
    assert min(rates) >= 0.25 and max(rates) <= 4.0
    slow = sum(r < 1 for r in rates) / len(rates)
    assert 0.45 < slow < 0.55, "as often slow as fast"
    assert abs(sum(math.log(r) for r in rates) / len(rates)) < 0.05


def test_the_script_keeps_the_clock_continuous_from_the_node_process_age():
    cmd = rate_script(0.25)[2]
    assert "/run/chaoskraft/node.pid" in cmd and "/proc/$pid/stat" in cmd
    assert "(1 - r) * e" in cmd and "-v r=0.25" in cmd and "x%.6f" in cmd
    assert '[ -n "$st" ]' in cmd, "a node that is down fails the step instead of a wrong offset"


QUIET = dict(partition_mean_ms=None, crash_mean_ms=None, clock_step_mean_ms=None,
             drop_rate=0.0, duplicate_rate=0.0, max_delay_ms=5, election_crash_prob=0.0,
             clock_drift_ppm=0, observers=0, clients=3, keys=1)


def cut_off_leader(bug: str | None, clock_step: dict, seed: int = 1):
    """A quiet register run in which, 10 s in, the active controller is cut off for 12 s while
    ``clock_step`` (a step of the clock-rate or the clock package) acts on it."""
    import dataclasses
    o = dataclasses.replace(SimOptions.draw(seed), **QUIET)
    sim = Simulation(seed, 5, 60, frozenset({bug} if bug else ()), options=o)
    sim.plan = sim.form.plan_faults(sim)
    kind = clock_step["kind"]
    sim.plan.options = {kind: clock_step.get("options", {})}
    sim.plan.steps += [FaultStep(0, 10.0, kind, "active-controller", 15.0,
                                 clock_step.get("mode", "")),
                       FaultStep(1, 10.0, "partition", "isolate-controller", 12.0)]
    result = sim.run()
    assert result.ok, result.detail
    assert [s.status for s in result.plan] == ["happened", "happened"], result.plan
    return result, result.check_history()


SLOW = {"kind": "clock-rate", "options": {"rate": [0.2, 0.2]}}
BACK = {"kind": "clock", "mode": "bump",
        "options": {"max_skew_s": 30, "directions": ["back"]}}


def test_a_slow_clock_on_a_cut_off_leader_shows_the_step_proof_lease():
    result, verdict = cut_off_leader("lease-read-step-proof", SLOW)
    assert "clock-rate active-controller" in result.plan[0].label
    assert verdict is not None and verdict[0] == "Linearizability", verdict


def test_the_correct_node_holds_the_same_fault():
    assert cut_off_leader(None, SLOW)[1] is None


def test_a_clock_stepped_back_does_not_show_the_step_proof_lease_but_shows_the_plain_one():
    assert cut_off_leader("lease-read-step-proof", BACK)[1] is None
    verdict = cut_off_leader("lease-read", BACK)[1]
    assert verdict is not None and verdict[0] == "Linearizability", verdict


def test_the_seeded_simulator_draws_it_when_asked_by_name():
    o = run_seed(3, 5, 30, frozenset(), {"extra_faults": {"clock-rate": 2000}})
    steps = [s for s in o.result.plan if s.kind == "clock-rate"]
    assert o.ok and steps and all(s.status == "happened" for s in steps), o.result.plan
    assert o.result.stats["steps"] == len(o.result.plan)
    assert run_seed(3, 5, 30, frozenset()).result.plan is None, "not drawn unless asked"


def test_the_bugs_sim_options_aim_the_steps_and_only_the_slow_clock_shows_it():
    """lease-read-step-proof's sim_options give the simulator's clock-rate and partition
    steps the options a campaign would (``extra_options``): the active controller's clock
    at a quarter of true time, cuts that isolate it. Seed 109 (the first of held-out seeds
    101-200 to catch it at 60 s) shows the bug; without the clock-rate steps it does not,
    and the correct node holds with both."""
    from node_image.bugs import BUGS
    opts = dict(BUGS["lease-read-step-proof"].sim_options)
    o = run_seed(109, 5, 60, frozenset({"lease-read-step-proof"}), dict(opts), "register")
    assert not o.ok and o.invariant == "Linearizability", (o.invariant, o.detail)
    specs = {(s.kind, s.spec) for s in o.result.plan}
    assert specs == {("clock-rate", "active-controller"), ("partition", "isolate-controller")}
    without = {**opts, "extra_faults": {"partition": 1000}}
    assert run_seed(109, 5, 60, frozenset({"lease-read-step-proof"}), without, "register").ok
    assert run_seed(109, 5, 60, frozenset(), dict(opts), "register").ok


@pytest.mark.parametrize("extra, words", [
    ({"nope": {}}, "'nope': unknown package 'nope'"),
    ({"clock-rate": {"rate": [2, 1]}}, "'clock-rate': field 'rate'"),
    ({"partition": ["isolate-controller"]}, "is not a mapping of option: value")])
def test_bad_extra_options_are_refused_naming_the_package_and_field(extra, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        run_seed(1, 5, 5, frozenset(), {"extra_faults": {"clock-rate": 1000},
                                        "extra_options": extra}, "register")
