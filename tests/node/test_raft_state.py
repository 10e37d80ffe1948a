"""The table of KRaft epoch-state transitions (node_image.raft.state.TRANSITIONS), checked in
one place: every move the client makes goes through it, and a move outside it is a
SafetyViolation, not a repair."""
import pytest

from node_image.raft.client import SafetyViolation
from node_image.raft.state import (TRANSITIONS, CandidateState, FollowerState, LeaderState,
                                   ProspectiveState, ResignedState, UnattachedState, illegal)


def states(epoch):
    return {"Unattached": UnattachedState(epoch, None, 0),
            "Prospective": ProspectiveState(epoch, None, None, 0),
            "Candidate": CandidateState(epoch, 0),
            "Leader": LeaderState(epoch, 0, {}, {}, 0),
            "Follower": FollowerState(epoch, 2, None, 0),
            "Resigned": ResignedState(epoch, 0, (), set())}


def test_every_listed_move_is_legal_with_its_epoch_rule():
    for (a, b), rule in TRANSITIONS.items():
        step = {"same": 0, "next": 1, "higher": 2, "same-or-higher": 0}[rule]
        assert illegal(states(3)[a], states(3 + step)[b]) is None, (a, b, rule)


@pytest.mark.parametrize("old, new, epochs, why", [
    ("Leader", "Candidate", (3, 4), "is not a transition of KRaft"),
    ("Follower", "Leader", (3, 3), "is not a transition of KRaft"),
    ("Prospective", "Candidate", (3, 5), "must keep the epoch next"),
    ("Candidate", "Leader", (3, 4), "must keep the epoch same"),
    ("Leader", "Follower", (3, 3), "must keep the epoch higher"),
    ("Unattached", "Follower", (3, 2), "must keep the epoch same or higher"),
])
def test_a_move_outside_the_table_says_why(old, new, epochs, why):
    assert why in illegal(states(epochs[0])[old], states(epochs[1])[new])


def test_two_leaders_in_one_epoch_is_refused():
    a, b = FollowerState(4, 1, None, 0), FollowerState(4, 2, None, 0)
    assert "Follower -> Follower must keep the epoch higher, went from 4 to 4" in illegal(a, b)
    assert illegal(a, FollowerState(5, 2, None, 0)) is None


def test_the_client_raises_on_an_illegal_move():
    from raft_scenarios import Net
    net = Net()
    net.run("add-nodes 3")
    client = net.nodes[1]
    with pytest.raises(SafetyViolation) as e:
        client._become(LeaderState(client.epoch, 0, {}, {}, 0))
    assert e.value.invariant == "StateTransition"
    assert "node 1: Unattached -> Leader is not a transition of KRaft" in str(e.value)
    assert client.state.name == "Unattached"
