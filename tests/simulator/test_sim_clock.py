"""A simulated node's clock: drift, steps and a rate (libfaketime's speed factor with the
monotonic clock left alone), and the seeded timelines no seed draws (``extra_faults``)."""
import pytest

from harness.simulate import run_seed
from simulator.clock import WALL_EPOCH_MS, NodeClock


def test_a_rate_changes_the_wall_clocks_pace_and_nothing_else():
    c = NodeClock(offset=5_000, ppm=0)
    assert c.wall(1_000) == WALL_EPOCH_MS + 6_000
    c.set_rate(1_000, 0.25)
    assert c.wall(1_000) == WALL_EPOCH_MS + 6_000, "setting a rate makes no jump"
    assert c.wall(9_000) == WALL_EPOCH_MS + 6_000 + 2_000, "a quarter of 8 s"
    assert c.local(9_000) == 14_000, "the node's own (monotonic) clock keeps its pace"
    c.set_rate(9_000, 3.0)
    assert c.wall(9_000) == WALL_EPOCH_MS + 8_000
    assert c.wall(10_000) == WALL_EPOCH_MS + 11_000
    c.set_rate(10_000, 1.0)
    assert c.wall(12_000) == WALL_EPOCH_MS + 13_000, "rate 1 again keeps what was added"
    c.step_ms = 4_000
    c.reset()
    assert c.wall(12_000) == WALL_EPOCH_MS + c.local(12_000), "reset: the node's own time"


@pytest.mark.parametrize("rate", [0.1, 0.37, 0.999, 1.5, 7.0])
def test_a_wall_clock_under_a_rate_never_goes_back(rate):
    c = NodeClock(offset=123, ppm=-30_000)
    c.set_rate(77, rate)
    readings = [c.wall(t) for t in range(77, 5_000)]
    assert all(b >= a for a, b in zip(readings, readings[1:]))
    own = c.local(4_999) - c.local(77)  # the node's own clock, 3 % slow
    assert readings[-1] - readings[0] == pytest.approx(rate * own, abs=1)


def test_a_timeline_no_seed_draws_is_asked_for_by_name():
    with pytest.raises(ValueError, match="extra_faults: 'no-such' is no fault package with a simulated form"):
        run_seed(1, 3, 1, frozenset(), {"extra_faults": {"no-such": 1000}})


def test_the_seeds_draw_no_extra_timeline():
    o = run_seed(1, 3, 5, frozenset())
    assert o.result.options.extra_faults == {}


# lease-read's sim_options: clock steps every second or so, with partitions beside them
CLOCK_STEPS = {"clock_step_mean_ms": 1000, "extra_faults": {"partition": 1000}}


def test_a_clock_the_end_of_the_faults_sets_back_gets_that_long_to_recover():
    """The end of the faults sets every clock back to the node's own time; Kafka's Raft
    timers read the wall clock, so a voter whose clock was ahead starts no election until
    its clock has caught up. Seed 5 of these options: 26 s back, and the first operation
    after the faults 21.7 s after them (it failed Liveness when the check gave 20 s). The
    recovery time grows by what the clocks went back (DESIGN section 9: liveness is judged
    against what the faults allow), and the clients go on that much longer."""
    o = run_seed(5, 5, 60, frozenset(), CLOCK_STEPS)
    assert o.ok, (o.invariant, o.detail)
    back = o.result.stats["clock_set_back_ms"]
    assert back > 20_000, o.result.stats
    served = [h["time"] for h in o.result.history if h["type"] == "ok" and h["time"] > 60_000]
    assert 80_000 < min(served) < 60_000 + 20_000 + back, min(served)
    assert max(served) > 80_000, "the clients went on past the usual recovery time"


def test_a_run_whose_clocks_end_behind_or_unstepped_keeps_its_recovery_time():
    o = run_seed(3, 5, 60, frozenset())
    assert o.result.stats["clock_steps"] == 0 and "clock_set_back_ms" not in o.result.stats
    assert o.result.history[-1]["time"] <= 60_000 + 20_000
