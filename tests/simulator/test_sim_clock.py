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
