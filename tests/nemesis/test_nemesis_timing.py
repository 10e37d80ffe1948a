"""The nemesis in virtual time (a mock clock, without Docker): a plan run on time, a
scenario's phases and what it does when its state is out of reach, a late phase shifting
the rest, and packages that wait for their moment (a stranded replica out of the ISR, a
power loss after acknowledged writes)."""
import asyncio
import json

import pytest

from harness.clock import MockClock
from harness.config import RunConfig
from harness.history import HistoryWriter
from nemesis.package import Scenario
from nemesis.packages import depose_leader, report_kinds, strand_replica
from nemesis.schedule import FaultStep, plan
from recording import RecordingBackend, RecordingCampaign

OPENS, CLOSES, _ = report_kinds()  # row -> package, row -> packages


class ClientProgress(dict):
    """The history's counts, with clients that complete ``OK_PER_S`` operations ok each
    virtual second (what a scenario waiting for acknowledged writes sees)."""
    OK_PER_S = 10

    def __init__(self, clock, counts) -> None:
        super().__init__(counts)
        self.clock = clock

    def __getitem__(self, key):
        if key == "ok":
            return int(self.clock.monotonic() * self.OK_PER_S)
        return super().__getitem__(key)


class ClockedHistory(HistoryWriter):
    """The history, with each row's virtual time beside it: (t, type, f)."""

    def __init__(self, path, clock) -> None:
        super().__init__(path)
        self.clock = clock
        self.counts = ClientProgress(clock, self.counts)
        self.timed: list[tuple[float, str, str]] = []

    def record(self, process, type_, f, *args, **kw):
        if process == "nemesis":
            self.timed.append((self.clock.monotonic(), type_, f))
        return super().record(process, type_, f, *args, **kw)


def clocked_campaign(tmp_path, packages, combine="sequential"):
    clock = MockClock()
    history = ClockedHistory(tmp_path / "history.jsonl", clock)
    cfg = RunConfig(seed=7, workload="queue", nemesis=list(packages), nemesis_combine=combine)
    return RecordingCampaign(cfg, RecordingBackend(), history, lambda m: None, clock=clock), clock


def opened_and_closed(history) -> dict[float, set[str]]:
    """Virtual time -> the packages whose fault opened ('+name') or closed ('-name') then."""
    out: dict[float, set[str]] = {}
    for t, type_, f in history.timed:
        if type_ != "info":
            continue
        for name in ([OPENS[f]] if f in OPENS else []):
            out.setdefault(round(t, 6), set()).add("+" + name)
        for name in CLOSES.get(f, ()):
            out.setdefault(round(t, 6), set()).add("-" + name)
    return out


@pytest.mark.parametrize("combine", ["sequential", "concurrent"])
def test_the_nemesis_runs_a_plan_on_time_in_virtual_time(tmp_path, combine):
    """A seed's whole plan (five minutes of faults) runs against the recording backend in
    virtual time: each step starts at its time and is undone when its duration is up."""
    packages = ["kill", "pause", "packet-loss"]
    camp, clock = clocked_campaign(tmp_path, packages, combine)
    steps = plan(11, packages, 300.0, 10.0, duration_s=(3.0, 6.0), combine=combine)
    assert len(steps) > 10
    clock.run(camp.nemesis(steps, clock.monotonic()))
    camp.history.close()
    seen = opened_and_closed(camp.history)
    for step in steps:
        assert camp.fault_outcomes[step.index]["status"] == "happened", step
        assert "+" + step.kind in seen.get(round(step.at_s, 6), set()), (step, seen)
        end = round(step.at_s + step.duration_s, 6)
        assert "-" + step.kind in seen.get(end, set()), (step, seen)
    assert clock.monotonic() == pytest.approx(max(s.at_s + s.duration_s for s in steps))
    if combine == "concurrent":  # some faults of different packages overlap
        spans = [(s.at_s, s.at_s + s.duration_s) for s in steps]
        assert any(a0 < b1 and b0 < a1 for i, (a0, a1) in enumerate(spans)
                   for b0, b1 in spans[i + 1:])


# The clients' 20 operations after the refusal take 2 s at ClientProgress's rate, within
# REFUSE_S; a leader never named ends the scenario PATIENCE_S after the cut's CUT_S, healed at once.
NEVER = 7.0 + depose_leader.CUT_S + Scenario.PATIENCE_S


@pytest.mark.parametrize("elected_after_s, refused_at, healed_at", [
    (0.0, 7.0 + depose_leader.CUT_S, 32.0),
    (3.0, 7.0 + depose_leader.CUT_S + 3.0, 32.0),
    (None, None, NEVER)])
def test_a_scenario_plays_its_phases_on_time(tmp_path, elected_after_s, refused_at, healed_at):
    """depose-leader: the cut at its start, the clients refused CUT_S later once the other
    nodes name a new leader (waited for up to PATIENCE_S), everything healed when the step's
    duration is up; the step outlasting the scenario waits out the rest. A leader never named
    is the scenario's state not reached: no client is refused, the cut is healed at once, the
    step says why, and the plan is late by as much as the wait overran the step."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    cut_ends = 7.0 + depose_leader.CUT_S

    def infos():
        elected = elected_after_s is not None and clock.monotonic() >= cut_ends + elected_after_s
        return [(0, 4 if elected else 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "depose-leader", "partition", 25.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    timed = [(t, f) for t, type_, f in camp.history.timed if type_ == "info"]
    if refused_at is None:
        assert timed == [(7.0, "start-partition"), (healed_at, "stop-partition")], timed
        outcome = camp.fault_outcomes[0]
        assert outcome["status"] == "not-reached", outcome
        assert "no new leader of partition 0 was named" in outcome["why"], outcome
        assert camp.late_s == pytest.approx(NEVER - 32.0)
        return
    assert timed == [(7.0, "start-partition"), (refused_at, "refuse-clients"),
                     (healed_at, "stop-partition")], timed
    refused = [json.loads(line)["value"] for line in (tmp_path / "history.jsonl").read_text()
               .splitlines() if '"refuse-clients"' in line and '"info"' in line][0]
    assert refused["new_leader"] == 4, refused
    assert camp.fault_outcomes[0]["status"] == "happened" and camp.late_s == 0.0


def test_a_scenario_whose_state_turned_unreachable_heals_and_aims_again(tmp_path):
    """depose-leader cuts off n3, but its followers had already left the ISR: the partition
    is leaderless with only n3 in its ISR, an election that cannot come. The scenario heals
    at once and aims again when the ISR is whole; the second time a new leader is named and
    the clients are refused. Each attempt is in the history and the harness log."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    logged = []
    camp.log = logged.append
    second_cut = []

    def infos():
        now = clock.monotonic()
        cuts = [t for t, type_, f in camp.history.timed if f == "start-partition" and
                type_ == "info"]
        if len(cuts) == 1 and camp.partitioned:  # the first cut: no other replica may lead
            return [(0, -1, [3, 4, 5], [3])] if now >= cuts[0] + 1 else [(0, 3, [3, 4, 5], [3, 4, 5])]
        if len(cuts) == 2:
            second_cut.append(cuts[1])
            if now >= cuts[1] + depose_leader.CUT_S:
                return [(0, 4, [3, 4, 5], [4, 5])]
        return [(0, 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "depose-leader", "partition", 25.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    fs = [f for _, type_, f in camp.history.timed if type_ == "info"]
    assert fs == ["start-partition", "stop-partition", "start-partition", "refuse-clients",
                  "stop-partition"], fs
    assert camp.fault_outcomes[0]["status"] == "happened", camp.fault_outcomes[0]
    said = [line for line in logged if "aiming again" in line]
    assert len(said) == 1 and "only n3, cut off, in its ISR [3]" in said[0], logged
    # healed as soon as the partition was seen leaderless, not after the 90 s patience
    assert second_cut[0] - 7.0 < depose_leader.CUT_S + 2.0


def test_a_scenario_that_cannot_reach_its_state_gives_up_after_its_attempts(tmp_path):
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])

    def infos():
        return [(0, -1, [3, 4, 5], [3])] if camp.partitioned else [(0, 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    clock.run(camp.nemesis([FaultStep(0, 7.0, "depose-leader", "partition", 25.0)],
                           clock.monotonic()))
    camp.history.close()
    cuts = [f for _, type_, f in camp.history.timed if type_ == "info" and f == "start-partition"]
    assert len(cuts) == Scenario.ATTEMPTS
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached"
    assert f"(attempt {Scenario.ATTEMPTS} of {Scenario.ATTEMPTS})" in outcome["why"], outcome


def test_a_scenario_waits_for_a_partition_that_fits_then_says_it_was_not_reached(tmp_path):
    """Nothing fits: the scenario asks again every 0.5 s for WAIT_S, then is not reached."""
    camp, clock = clocked_campaign(tmp_path, ["depose-leader"])
    asked = []
    camp.partition_infos = lambda: asked.append(clock.monotonic()) or [(0, -1, [3, 4, 5], [])]
    clock.run(camp.start_fault(FaultStep(0, 0.0, "depose-leader", "partition", 1.0)))
    assert asked[0] == 0.0 and asked[-1] > Scenario.WAIT_S
    assert all(b - a == pytest.approx(0.5) for a, b in zip(asked, asked[1:]))
    assert camp.fault_outcomes[0]["status"] == "not-reached"


def test_a_late_phase_shifts_the_rest_of_the_plan_and_stretches_the_workload(tmp_path):
    """On a slow machine depose-leader's new leader comes 40 s after the cut's CUT_S: the
    scenario ends 40 s late, the next step starts 40 s after its planned time instead of
    being cut off, and the workload's deadline is 40 s later, up to max_stretch x the limit."""
    from workloads.workload import Deadline
    camp, clock = clocked_campaign(tmp_path, ["depose-leader", "kill"])
    cut_ends = 7.0 + depose_leader.CUT_S

    def infos():
        elected = clock.monotonic() >= cut_ends + 40.0
        return [(0, 4 if elected else 3, [3, 4, 5], [3, 4, 5])]
    camp.partition_infos = infos
    steps = [FaultStep(0, 7.0, "depose-leader", "partition", 18.0),
             FaultStep(1, 30.0, "kill", "one", 5.0)]
    deadline = Deadline(60.0, 60.0 * camp.cfg.max_stretch, camp.lateness, clock.monotonic)
    seen = []

    async def watch():
        while True:
            seen.append((clock.monotonic(), deadline.at()))
            await clock.sleep(1.0)

    async def go():
        w = asyncio.ensure_future(watch())
        await camp.nemesis(steps, clock.monotonic())
        w.cancel()
    clock.run(go())
    camp.history.close()
    # the refusal at cut_ends + 40, the clients' 20 operations 5 s later (REFUSE_S), healed
    ended = cut_ends + 40.0 + depose_leader.REFUSE_S
    late = ended - (7.0 + 18.0)
    assert camp.late_s == pytest.approx(late)
    kills = [t for t, type_, f in camp.history.timed if f == "kill" and type_ == "info"]
    assert kills == [pytest.approx(30.0 + late)], camp.history.timed
    assert [camp.fault_outcomes[i]["status"] for i in (0, 1)] == ["happened", "happened"]
    # while the scenario overran, the deadline moved with it, second by second
    during = [(t, at) for t, at in seen if 25.0 < t < ended]
    assert during and all(at == pytest.approx(60.0 + t - 25.0) for t, at in during), during
    assert deadline.at() == pytest.approx(60.0 + late)
    camp.late_s = 1000.0
    assert deadline.at() == 60.0 * camp.cfg.max_stretch  # never past the cap


def test_the_mock_clock_stands_still_while_a_thread_works():
    clock = MockClock()

    async def go():
        started = clock.monotonic()
        await asyncio.gather(clock.sleep(5), asyncio.to_thread(sum, range(10**6)))
        during = clock.monotonic()
        await asyncio.to_thread(sum, range(10**6))
        return started, during, clock.monotonic()
    assert clock.run(go()) == (0.0, 5.0, 5.0)


def test_clock_bumps_go_the_directions_the_campaign_allows():
    import random

    from nemesis.packages.clock import bump_offsets
    rng = random.Random(5)
    back = [o for _ in range(50) for o in bump_offsets([1, 2, 3], 60, rng, ["back"]).values()]
    assert all(-60 <= o <= -6 for o in back)
    both = [o for _ in range(50) for o in bump_offsets([1, 2, 3], 60, rng).values()]
    assert min(both) < 0 < max(both)
    long = [o for _ in range(50) for o in bump_offsets([1, 2], 60, rng, ["back"], 30).values()]
    assert all(-60 <= o <= -30 for o in long) and min(long) < -45 < max(long)


def test_a_smallest_clock_step_above_the_largest_is_refused_naming_it():
    from nemesis.schedule import check_options
    assert check_options("clock", {"min_skew_s": 30, "max_skew_s": 60}) is None
    assert check_options("clock", {"min_skew_s": 30}) is None  # max_skew_s defaults to 120
    field, why = check_options("clock", {"min_skew_s": 61, "max_skew_s": 60})
    assert field == "min_skew_s" and "max_skew_s" in why and "61" in why
    assert check_options("clock", {"min_skew_s": 0})[0] == "min_skew_s"


def test_strand_replica_kills_once_the_stranded_replica_is_out_of_the_isr(tmp_path):
    """The ISR members die only once the freshest metadata shows the stranded replica out of
    the ISR (the shrink took 2 s longer than CUT_S here); before, they would take with them
    nothing the stranded one lacks."""
    camp, clock = clocked_campaign(tmp_path, ["strand-replica"])
    cut_ends = 7.0 + strand_replica.CUT_S

    def infos():
        shrunk = clock.monotonic() >= cut_ends + 2.0
        return [(0, 3, [3, 4, 5], [3] if shrunk else [3, 4, 5])]
    camp.partition_infos = infos
    step = FaultStep(0, 7.0, "strand-replica", "partition", 30.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    timed = [(t, f) for t, type_, f in camp.history.timed if type_ == "info"]
    # then AFTER_SHRINK_S, during which the clients completed more than PROGRESS_OPS
    assert timed[:2] == [(7.0, "start-partition"),
                         (cut_ends + 2.0 + strand_replica.AFTER_SHRINK_S, "kill")], timed
    kill = [json.loads(line)["value"] for line in (tmp_path / "history.jsonl").read_text()
            .splitlines() if '"kill"' in line and '"info"' in line][0]
    assert kill["isr"] == [3] and kill["waited_s"] == 2.0, kill


def test_a_power_loss_waits_for_acknowledged_writes_before_it_strikes(tmp_path):
    """A power loss destroys what was acknowledged and not yet synced: it waits until the
    clients have had writes acknowledged since the previous fault (here the first sends are
    acknowledged 12 s in, as after a machine that stalled), and makes the plan late by the wait."""
    camp, clock = clocked_campaign(tmp_path, ["power-loss"])
    acked = lambda: 0 if clock.monotonic() < 12.0 else int((clock.monotonic() - 12.0) * 10)
    camp._acked_writes = acked
    step = FaultStep(0, 2.0, "power-loss", "one", 4.0)
    clock.run(camp.nemesis([step], clock.monotonic()))
    camp.history.close()
    struck = [t for t, type_, f in camp.history.timed if f == "power-loss" and type_ == "invoke"]
    # 10 writes at 10 a second: 1 s after the first one
    assert struck == [pytest.approx(13.0, abs=0.5)], camp.history.timed
    assert camp.fault_outcomes[0]["status"] == "happened"
    assert camp.late_s == pytest.approx(13.0 - 2.0, abs=0.5)


def test_a_power_loss_starts_anyway_when_no_write_is_acknowledged_in_time(tmp_path):
    from harness.campaign import ACKED_WRITES_S
    camp, clock = clocked_campaign(tmp_path, ["power-loss"])
    camp._acked_writes = lambda: 0
    clock.run(camp.nemesis([FaultStep(0, 2.0, "power-loss", "one", 4.0)], clock.monotonic()))
    camp.history.close()
    struck = [t for t, type_, f in camp.history.timed if f == "power-loss" and type_ == "invoke"]
    assert struck == [pytest.approx(2.0 + ACKED_WRITES_S, abs=0.6)], camp.history.timed
