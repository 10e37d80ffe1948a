"""voter-split against a recording backend and a modelled quorum leader: the two cuts in
order (two removals asked of the leader cut off with one voter; a voter removed, paused,
asked back and the quorum cut again), the asks going to the leader chosen before the cut,
the paused voter resumed once cut off, and the voter set whole again after each cut."""
import asyncio
import dataclasses
import random

import pytest

from nemesis.packages import voter_split as package
from nemesis.packages import voters
from nemesis.packages.voter_split import cut_off_add, halves, two_removals
from nemesis.schedule import FaultStep
from recording import campaign, rows


def test_the_cuts_leave_the_leader_with_one_voter_against_three():
    rng = random.Random(4)
    for _ in range(50):
        partner, removed = two_removals([1, 2, 3, 4, 5], 2, rng)
        assert partner != 2 and len(set(removed)) == 2
        assert not {2, partner} & set(removed)
        assert cut_off_add([1, 2, 3, 4, 5], 2, rng) in (1, 3, 4, 5)
    g = halves({1, 2}, [1, 2, 3, 4, 5])
    assert g == {1: {3, 4, 5}, 2: {3, 4, 5}, 3: {1, 2}, 4: {1, 2}, 5: {1, 2}}


class Leader:
    """A correct quorum leader (n1) as the package meets it: a change asked while it is cut
    off from the majority is appended and never committed (no answer), a second refused;
    a paused voter is not caught up; otherwise a change is made at once."""

    def __init__(self, camp, backend):
        self.camp, self.backend = camp, backend
        self.voters = {1, 2, 3, 4, 5}
        self.asked: list = []

    def paused(self) -> set[int]:
        state: dict = {}
        for n, cmd in self.backend.calls:
            if cmd in ("ck-ctl pause", "ck-ctl resume"):
                state[n] = cmd == "ck-ctl pause"
        return {n for n, p in state.items() if p}

    async def quorum_view(self):
        return 1, sorted(self.voters), [], {n: f"dir-{n}" for n in range(1, 6)}

    async def change_voter(self, kind, node, directory, leader=None):
        self.asked.append((kind, node, directory, leader, self.camp.partitioned,
                           sorted(self.paused())))
        if self.camp.partitioned:
            return "REQUEST_TIMED_OUT", "not committed"
        if kind == "add" and node in self.paused():
            return "REQUEST_TIMED_OUT", f"{node} has not caught up with the leader"
        (self.voters.add if kind == "add" else self.voters.discard)(node)
        return None, None


def _five_controllers(backend):
    backend.nodes = [dataclasses.replace(n, roles=("controller", "broker"))
                     for n in backend.nodes]


def test_two_cuts_each_around_a_voter_change_and_the_voter_set_made_whole(tmp_path,
                                                                        monkeypatch):
    for name in ("HOLD_S", "STALE_S", "SETTLE_S", "POLL_S"):
        monkeypatch.setattr(package, name, 0.01)
    monkeypatch.setattr(voters, "RETRY_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["voter-split"], workload="register")
    _five_controllers(backend)
    leader = Leader(camp, backend)
    camp.quorum_view, camp.change_voter = leader.quorum_view, leader.change_voter
    recorded, refused = backend.exec, []

    def exec_(node_id, cmd, check=True):  # the first pause finds the node restarting
        if cmd == ["ck-ctl", "pause"] and not refused:
            refused.append(node_id)
            return 1, "node is not running"
        return recorded(node_id, cmd, check)
    backend.exec = exec_

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "voter-split", "partition", 1.0))
        await stop()
    asyncio.run(go())
    assert camp.fault_outcomes[0]["status"] == "happened", camp.fault_outcomes
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis"]
    splits = [r["value"] for r in out if r["f"] == "voter-split"]
    first, second = [v for v in splits if "answers" not in v]
    assert first["cut"] == "two-removals" and first["leader"] == 1
    assert second["cut"] == "cut-off-add" and second["leader"] == 1
    # the first cut: both removals asked of n1, while it is cut off, of two far voters
    removals = [a for a in leader.asked if a[0] == "remove" and a[4]]
    assert sorted(a[1] for a in removals) == first["remove"]
    assert not set(first["remove"]) & set(first["near"]) and 1 in first["near"]
    assert all(a[3] == 1 and a[2] == f"dir-{a[1]}" for a in removals), removals
    # then the voter removed in the ordinary way, paused, asked back (refused: it does not
    # fetch), resumed once the second cut is in place
    added = second["add"]
    assert ("remove", added, f"dir-{added}", None, False, []) in leader.asked
    ask = next(a for a in leader.asked if a[:2] == ("add", added) and a[5])
    assert ask[3] == 1 and ask[5] == [added] and not ask[4], ask
    mine = [cmd for n, cmd in backend.calls if n == added and cmd.startswith("ck-ctl")]
    assert mine == ["ck-ctl pause", "ck-ctl resume"] and refused == [added], (mine, refused)
    healed = [r["value"] for r in out if r["f"] == "voter-split-healed"]
    assert [h["cut"] for h in healed] == ["two-removals", "cut-off-add"]
    assert healed[1]["answers"][0][2] == "REQUEST_TIMED_OUT"
    # each cut drops the far side on the near one, and was healed; the voter set is whole
    fs = [r["f"] for r in out]
    assert fs.count("start-partition") == 4 and fs.count("stop-partition") >= 2, fs
    drops = [(n, cmd) for n, cmd in backend.calls if "DROP" in cmd]
    assert any(n == 1 and all(f"10.9.0.{f} " in cmd + " " for f in first["remove"])
               for n, cmd in drops), drops
    assert leader.voters == {1, 2, 3, 4, 5} and not camp.partitioned


def test_a_cluster_without_five_controllers_is_skipped(tmp_path):
    camp, backend, history = campaign(tmp_path, ["voter-split"], workload="register")
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "voter-split", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "skipped" and "needs 5 controllers" in outcome["why"], outcome
    assert backend.calls == []


@pytest.mark.parametrize("view", [None, "four"])
def test_a_voter_set_never_whole_is_not_reached_and_nothing_stays_cut(tmp_path, monkeypatch,
                                                                      view):
    monkeypatch.setattr(package, "PATIENCE_S", 0.05)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    monkeypatch.setattr(voters, "PATIENCE_S", 0.05)
    monkeypatch.setattr(voters, "RETRY_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["voter-split"], workload="register")
    _five_controllers(backend)

    async def quorum_view():
        return None if view is None else (1, [1, 2, 3, 4], [], {5: "dir-5"})

    async def change_voter(kind, node, directory, leader=None):
        return "REQUEST_TIMED_OUT", "not caught up"
    camp.quorum_view, camp.change_voter = quorum_view, change_voter
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "voter-split", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached", outcome
    assert not camp.partitioned and not any("DROP" in c for _, c in backend.calls)
