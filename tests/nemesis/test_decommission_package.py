"""decommission: its choice of broker and moves, and its phases against a recording backend
(moves off, a clean stop, UnregisterBroker, the wait until no broker lists it, a new machine
under a new node id (or, without one to add, the emptied disk and the start under the old
id), the wait until every broker lists it, a partition moved onto it)."""
import asyncio
import dataclasses
import random

import pytest

from nemesis.packages import decommission as package
from nemesis.packages.decommission import lists_all, lists_none, move_onto, moves_off
from nemesis.schedule import FaultStep
from recording import INFOS, campaign, rows


def test_every_partition_on_the_broker_moves_to_one_that_lacks_it():
    rng = random.Random(1)
    for _ in range(20):
        moves = moves_off(INFOS, 4, [1, 2, 3, 4, 5], rng)
        assert set(moves) == {0, 1}
        assert moves[0] in ([3, 1, 5], [3, 2, 5]) and moves[1] in ([2, 5, 1], [3, 5, 1])
    assert moves_off(INFOS, 2, [1, 2, 3, 4, 5], rng) == {}, "it holds nothing: no move"
    assert moves_off(INFOS, 4, [3, 4, 5], rng) is None, "nowhere to go"
    assert moves_off([(0, -1, [3, 4, 5], [])], 4, [1, 2, 3, 4, 5], rng) is None, "no leader"


def test_the_new_broker_takes_a_followers_place_in_a_partition_with_a_full_isr():
    rng = random.Random(2)
    for _ in range(20):
        assert move_onto(INFOS, 1, rng) in ((0, [3, 1, 5]), (0, [3, 4, 1]))
    assert move_onto(INFOS, 3, rng) is None, "partition 1's ISR is short; 0 holds n3"
    assert lists_none({1: (1, 2), 2: None}, 4) and not lists_none({1: (1, 4)}, 4)
    assert not lists_none({1: None}, 4), "no broker answered: not known"
    assert lists_all({1: (1, 4), 4: (1, 4)}, 4) and not lists_all({1: (1, 4)}, 4)
    assert not lists_all({1: (1, 4), 4: None}, 4)


# Kafka's internal topics as the recording cluster has them: a transaction log partition
# whose ISR is n4 alone, one with a replica on n5; no consumer offsets topic made yet
INTERNAL = {"__transaction_state": [(0, 4, [4, 1, 2], [4]), (1, 1, [1, 5, 3], [1, 5, 3])],
            "__consumer_offsets": []}


def _cluster(camp, moved, asked, unregistered, refuse=None, internal=INTERNAL):
    """The recording campaign's answers: moves take effect at once (``moved``: partition,
    or (topic, partition) of an internal topic -> replicas), a running broker is
    registered (it registers as it starts), UnregisterBroker takes it out."""
    registered = {1, 2, 3, 4, 5}
    answers = ["NotControllerError"]  # the first move finds no quorum leader: asked again

    def reassign(moves, topic=None):  # one request a topic
        requests.append((topic, sorted(moves)))
        out = {}
        for partition, replicas in moves.items():
            key = partition if topic is None else (topic, partition)
            asked.append((key, list(replicas)))
            if answers:
                out[partition] = answers.pop(0)
            else:
                moved[key] = list(replicas)
                out[partition] = None
        return out

    def partition_infos(topic=None):
        if topic is None:
            return [(p, leader, moved.get(p, r), moved.get(p, i)) for p, leader, r, i in INFOS]
        return [(p, leader, moved.get((topic, p), r), moved.get((topic, p), i))
                for p, leader, r, i in internal[topic]]

    async def broker_lists():
        up = [n for n in camp.ids if n not in camp.killed]
        registered.update(up)
        return {n: tuple(sorted(registered)) for n in up}

    async def unregister_broker(broker, patience_s):
        if refuse:
            return refuse
        assert broker in camp.killed, "unregistered while running: it would register again"
        unregistered.append(broker)
        registered.discard(broker)
        return None
    requests = camp.requests = []  # (topic, partitions) of each request
    camp.reassign = reassign
    camp.partition_infos = partition_infos
    camp.broker_lists = broker_lists
    camp.unregister_broker = unregister_broker


def test_without_a_machine_to_add_the_broker_comes_back_under_its_id_on_an_empty_disk(
        tmp_path, monkeypatch):
    """The recording backend cannot add nodes (as an SSH hosts file without spare hosts):
    the old machine's disk is emptied and it starts again under its id."""
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    moved, asked, unregistered = {}, [], []
    _cluster(camp, moved, asked, unregistered)

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0))
        await stop()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis"]
    fs = [(r["type"], r["f"]) for r in out]
    order = [("invoke", "decommission"), ("info", "decommission"),
             ("info", "decommission-internal"), ("invoke", "stop"),
             ("info", "stop"), ("info", "decommissioned"), ("invoke", "recommission"),
             ("invoke", "start"), ("info", "start"), ("info", "recommissioned")]
    assert [x for x in fs if x in order] == order, fs
    broker = next(r["value"]["node"] for r in out if r["f"] == "decommission")
    assert broker in (4, 5) and unregistered == [broker], "a broker-only node, once"
    moves = next(r["value"]["moves"] for r in out if r["f"] == "decommission")
    assert {int(p) for p in moves} == {p for p, _, r, _ in INFOS if broker in r}
    for p, target in moves.items():
        assert broker not in target and len(target) == 3
    # then the internal topics' replicas on it, before it stops: the transaction log
    # partition whose only in-sync replica it is (n4), or the one it follows (n5)
    internal = next(r["value"]["moves"] for r in out if r["f"] == "decommission-internal")
    ours = {p for p, _, r, _ in INTERNAL["__transaction_state"] if broker in r}
    assert set(internal) == {"__transaction_state"} and len(ours) == 1
    assert {int(p) for p in internal["__transaction_state"]} == ours, internal
    for p in ours:
        target = moved[("__transaction_state", p)]
        assert broker not in target and len(target) == 3, target
    # one request a topic; asked again: only the partition no controller took
    off = sorted(int(p) for p in moves)
    assert camp.requests[:2] == [(None, off), (None, off[:1])], camp.requests
    assert [r for r in camp.requests if r[0]] == [("__transaction_state", sorted(ours))]
    done = next(r["value"] for r in out if r["f"] == "recommissioned")
    assert broker in done["replicas"] and moved[done["partition"]] == done["replicas"]
    # on the broker: a clean stop, its data directory emptied while down, then a start
    mine = [cmd.split()[:2] for n, cmd in backend.calls if n == broker]
    assert mine == [["ck-ctl", "stop"], ["python3", "-c"], ["ck-ctl", "start"]], mine
    assert any(n == broker and camp.data_dir in cmd for n, cmd in backend.calls)
    assert camp.fault_outcomes[0]["status"] == "happened" and not camp.killed


@pytest.mark.parametrize("refuse", ["BROKER_ID_NOT_REGISTERED", "CLUSTER_AUTHORIZATION_FAILED"])
def test_a_refused_unregistration_is_not_reached_and_the_broker_starts_again(
        tmp_path, monkeypatch, refuse):
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    _cluster(camp, {}, [], [], refuse=refuse)

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0))
        assert camp.killed, "stopped, not yet started again"
        await stop()
    asyncio.run(go())
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached" and refuse in outcome["why"], outcome
    assert not camp.killed and [c for _, c in backend.calls if "python3" in c] == [], \
        "started again with its data: nothing emptied"


def test_a_cluster_of_controllers_only_has_no_broker_to_decommission(tmp_path):
    camp, backend, history = campaign(tmp_path, ["decommission"])
    backend.nodes = [dataclasses.replace(n, roles=("controller", "broker"))
                     for n in backend.nodes]
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "skipped" and "no broker-only node" in outcome["why"], outcome
    assert backend.calls == []


@pytest.mark.parametrize("view, why", [
    ([(0, 3, [3, 4, 5], [3, 4, 5]), (1, 5, [5, 1, 2], [5, 1])], "again: its disk is kept"),
    ([], "no metadata of the topic came within 1 s")])
def test_a_broker_named_a_replica_again_or_unknown_keeps_its_disk(tmp_path, monkeypatch, view,
                                                                  why):
    """The metadata is read once more before the disk is emptied: a broker that a partition
    names again (a stale view when the scenario chose, or another move), or one no metadata
    shows holding nothing, is started again with its data, and the step is not reached."""
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    moved = {}
    _cluster(camp, moved, [], [])
    after_moves = camp.partition_infos
    camp.partition_infos = lambda topic=None: (view if camp.killed and topic is None
                                               else after_moves(topic))
    monkeypatch.setattr(package.Decommission, "PATIENCE_S", 1.0)

    async def go():
        stop = await camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0))
        await stop()
    asyncio.run(go())
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached" and why in outcome["why"], outcome
    assert not [c for _, c in backend.calls if "python3" in c] and not camp.killed


def test_an_internal_partition_on_the_broker_without_a_leader_keeps_it_running(
        tmp_path, monkeypatch):
    """A transaction log partition on the broker with no leader cannot move (nothing to
    catch up from): the scenario waits for one, and without it the broker is never stopped
    and the step is not reached, naming the partition's state."""
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    monkeypatch.setattr(package.Decommission, "PATIENCE_S", 0.5)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    offline = {"__transaction_state": [(0, -1, [4, 1, 2], [4]), (1, -1, [1, 5, 3], [1])],
               "__consumer_offsets": []}
    _cluster(camp, {}, [], [], internal=offline)
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached", outcome
    assert "internal topic's partition" in outcome["why"] and "no leader" in outcome["why"]
    assert not any("stop" in c for _, c in backend.calls), backend.calls


def test_internal_moves_that_never_finish_keep_the_broker_running(tmp_path, monkeypatch):
    """The internal topics' moves are asked in one request and waited for in one loop; a
    move accepted that never completes (its new replica never catches up) ends the step as
    not reached, naming the first partition and how many more had not moved, and the
    broker is never stopped."""
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    monkeypatch.setattr(package.Decommission, "PATIENCE_S", 0.5)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    # n4 and n5 both hold two partitions of each internal topic, whichever is chosen
    both = [(p, 1, [1, 4, 5], [1, 4, 5]) for p in range(2)]
    moved = {}
    _cluster(camp, moved, [], [], internal={"__transaction_state": both,
                                            "__consumer_offsets": both})
    taken = camp.reassign

    def never_done(moves, topic=None):  # accepted, but the replicas stay as they were
        answers = taken(moves, topic)
        for p in moves if topic is not None else ():
            moved.pop((topic, p), None)
        return answers
    camp.reassign = never_done
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0)))
    outcome = camp.fault_outcomes[0]
    assert outcome["status"] == "not-reached", outcome
    assert "__consumer_offsets-0 had not left" in outcome["why"], outcome
    assert "(1 more had not)" in outcome["why"], outcome
    assert not camp.killed and not [c for _, c in backend.calls if "python3" in c]
    assert sorted(t for t, _ in camp.requests if t) == ["__consumer_offsets",
                                                        "__transaction_state"]


def test_internal_moves_leave_out_topics_not_made_and_need_a_leader():
    from nemesis.packages.decommission import internal_moves_off
    rng = random.Random(3)
    moves = internal_moves_off(INTERNAL, 4, [1, 2, 3, 4, 5], rng)
    assert list(moves) == ["__transaction_state"] and moves["__transaction_state"] in (
        {0: [3, 1, 2]}, {0: [5, 1, 2]})
    assert internal_moves_off(INTERNAL, 2, [1, 2, 3, 4, 5], rng)["__transaction_state"] in (
        {0: [4, 1, 3]}, {0: [4, 1, 5]}), "a follower's replica moves too"
    assert internal_moves_off({"__consumer_offsets": []}, 4, [1, 2, 3, 4, 5], rng) == {}
    # three brokers, each a replica: one replica fewer (its data is on the other two)
    assert internal_moves_off({"__consumer_offsets": [(0, 2, [1, 2, 4], [1, 2, 4])]}, 4,
                              [1, 2, 4], rng) == {"__consumer_offsets": {0: [1, 2]}}
    assert internal_moves_off({"__consumer_offsets": [(0, 4, [4], [4])]}, 4, [4], rng) is None
    assert internal_moves_off({"__transaction_state": [(0, -1, [4, 1, 2], [4])]}, 4,
                              [1, 2, 3, 4, 5], rng) is None


def test_no_metadata_is_not_a_broker_that_holds_nothing():
    assert moves_off([], 4, [1, 2, 3, 4, 5], random.Random(1)) is None


def test_a_new_machine_under_a_new_node_id_takes_the_place_and_the_old_one_stays_out(
        tmp_path, monkeypatch):
    """With a backend that adds machines (Docker, SSH with a spare host) the replacement is
    a new broker n6: every broker lists it, a partition moves onto it; the old broker stays
    down for good (no restart, out of ``ids``, so no fault and no heal starts it), and its
    disk is not touched. A second step takes another broker out (n6 or the other original
    one, never the first again) and n7 comes in."""
    from harness.backends import NodeInfo
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    moved, unregistered = {}, []
    _cluster(camp, moved, [], unregistered)

    def add_node():
        i = max(n.node_id for n in backend.nodes) + 1
        info = NodeInfo(i, f"n{i}", f"10.9.0.{i}", ("broker",))
        backend.nodes.append(info)
        backend.calls.append((i, "added"))
        return info
    backend.add_node = add_node

    async def go():
        for index in (0, 1):  # a second step chooses among the cluster's nodes only
            stop = await camp.start_fault(FaultStep(index, 0.0, "decommission", "partition",
                                                    1.0))
            await stop()
        await camp.stop_faults()
    asyncio.run(go())
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis"]
    first, second = [r["value"]["node"] for r in out if r["f"] == "decommission"
                     and r["type"] == "invoke"]
    done = [r["value"] for r in out if r["f"] == "recommissioned"]
    assert [(d["node"], d["replaced"]) for d in done] == [(6, first), (7, second)], done
    assert second != first, "a machine out of the cluster is not decommissioned again"
    chosen_from = camp.packages["decommission"]  # what the second step chose among
    assert first not in chosen_from.up + chosen_from.brokers, (chosen_from.up, first)
    assert 6 in done[0]["replicas"] and 7 in done[1]["replicas"]
    assert camp.ids == sorted({1, 2, 3, 4, 5, 6, 7} - {first, second})
    assert camp.retired == {first, second} and not camp.killed
    assert [o["status"] for o in camp.fault_outcomes.values()] == ["happened"] * 2
    mine = [cmd.split()[:2] for n, cmd in backend.calls if n == first]
    assert mine == [["ck-ctl", "stop"]], "stopped once, never emptied nor started again"
    assert not any(first in r["value"]["nodes"] for r in out if r["f"] == "start")


def test_same_id_is_asked_for_by_the_option_and_a_bad_value_names_it():
    checks = package.Decommission.option_checks()
    assert checks["replacement"]("same-id") is None
    assert checks["replacement"]("none") is None
    assert "unknown value 'other' (known: new-id, same-id, none)" == \
        checks["replacement"]("other")


def test_with_no_replacement_the_broker_leaves_and_nothing_takes_its_place(tmp_path,
                                                                          monkeypatch):
    """``replacement: none``: the moves off, the stop and the unregistration as before, then
    the broker stays down and out of the cluster for good (no fault or heal starts it);
    no machine is added and no disk emptied."""
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    monkeypatch.setattr(package.Decommission, "defaults", {"replacement": "none"})
    camp, backend, history = campaign(tmp_path, ["decommission"])
    unregistered = []
    _cluster(camp, {}, [], unregistered)

    async def go(index):
        stop = await camp.start_fault(FaultStep(index, 0.0, "decommission", "partition", 1.0))
        await stop()
        await camp.stop_faults()
    asyncio.run(go(0))
    broker = unregistered[0]
    assert camp.fault_outcomes[0]["status"] == "happened", camp.fault_outcomes
    assert broker not in camp.ids and broker in camp.retired and not camp.killed
    assert not [c for _, c in backend.calls if "python3" in c], "no disk emptied"
    # the other broker-only node leaves too; then the three left are the topic's
    # replication factor: the step is skipped, saying why (not a state that never came)
    asyncio.run(go(1))
    asyncio.run(go(2))
    out = [r for r in rows(history, tmp_path) if r["process"] == "nemesis"]
    fs = [(r["type"], r["f"]) for r in out]
    order = [("invoke", "decommission"), ("info", "decommission"),
             ("info", "decommission-internal"), ("invoke", "stop"), ("info", "stop"),
             ("info", "decommissioned"), ("info", "retired")]
    first = fs[:fs.index(("info", "retired")) + 1]
    assert [x for x in first if x in order] == order, fs
    assert not [x for x in fs if x[1] in ("recommission", "start")], fs
    assert [camp.fault_outcomes[i]["status"] for i in range(3)] == ["happened", "happened",
                                                                  "skipped"], camp.fault_outcomes
    assert sorted(unregistered) == [4, 5] and camp.ids == [1, 2, 3], camp.ids
    assert "no broker-only node" in camp.fault_outcomes[2]["why"], camp.fault_outcomes


def test_a_cluster_of_as_many_brokers_as_replicas_has_none_that_can_leave():
    from nemesis.packages.decommission import too_few
    assert too_few(INFOS, [1, 2, 3, 4, 5]) is None
    assert "3 brokers, no more than the topic's replication factor (3)" in too_few(
        INFOS, [1, 4, 5])
    assert too_few([], [1]) is None, "no metadata: not known to be too few"
    moving = [(0, 1, [1, 4, 5, 2], [1, 4, 5]), (1, 4, [4, 1, 5], [4, 1, 5])]
    assert too_few(moving, [1, 2, 4, 5]) is None, "a move in progress: n2 can still leave"


def test_a_machine_not_yet_registered_is_no_target(tmp_path, monkeypatch):
    """brokers.yaml seed 5: add-broker's n6 had a container but no registration yet when
    decommission aimed, and a move onto it was refused (InvalidReplicationAssignment): the
    run was unknown. Only brokers that every running broker lists are chosen from."""
    from harness.backends import NodeInfo
    from nemesis.packages import reassign
    monkeypatch.setattr(reassign, "RETRY_S", 0.01)
    monkeypatch.setattr(package, "POLL_S", 0.01)
    camp, backend, history = campaign(tmp_path, ["decommission"])
    moved, asked = {}, []
    _cluster(camp, moved, asked, [])
    backend.nodes.append(NodeInfo(6, "n6", "10.9.0.6", ("broker",)))
    camp.ids.append(6)
    listed = camp.broker_lists

    async def not_yet():  # n6 runs but no broker lists it
        return {n: tuple(i for i in ids if i != 6) for n, ids in (await listed()).items()}
    camp.broker_lists = not_yet
    asyncio.run(camp.start_fault(FaultStep(0, 0.0, "decommission", "partition", 1.0)))
    assert asked and all(6 not in target for _, target in asked), asked
    assert 6 not in camp.packages["decommission"].up
