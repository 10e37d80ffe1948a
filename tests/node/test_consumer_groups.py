"""KIP-848's consumer protocol in the group coordinator, driven without I/O (the harness of
``test_group_coordinator``): the member epochs, the revoke-before-assign handshake, fencing,
offsets under member epochs, timeouts, and a coordinator taking over from the log; then
clients modelled as Kafka's consumer behaves, under random heartbeats, departures, lost
answers and failovers, never owning one partition twice at once."""
import random

import pytest

from node_image import messages as m
from node_image.broker import group_metadata as gm
from node_image.broker.consumer_coordinator import Heartbeat
from node_image.broker.consumer_group import (STABLE, UNRELEASED, UNREVOKED, ConsumerGroup,
                                              MemberAssignment, assign, reconcile)
from test_group_coordinator import Coordinator, image


def tid(c, name="t"):
    return c.rm.image.topics[name].topic_id


def hb(c, member, epoch, owned=None, now=0, subscribed=None, full=False, **kw):
    """One heartbeat's answer (None while its write is not committed); ``full``: every field
    sent, as a client does after a request went unanswered."""
    out = []
    full = full or epoch == 0
    c.gc.consumer_heartbeat(Heartbeat(
        "g", member, epoch, rebalance_timeout_ms=kw.pop("rebalance", 60_000 if full else -1),
        subscribed=subscribed if subscribed is not None else (("t",) if full else None),
        owned={} if full and owned is None else owned, **kw), now, out.append)
    return out[0] if out else None


def parts(c, *ps, topic="t"):
    return {tid(c, topic): frozenset(ps)} if ps else {}


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them():
    c = Coordinator()
    a = hb(c, "A", 0)
    assert (a.error, a.member_epoch, a.assignment) == (m.NONE, 1, parts(c, 0, 1, 2, 3))
    assert c.gc.groups["g"].protocol_type == "consumer"
    b = hb(c, "B", 0)
    assert (b.error, b.member_epoch, b.assignment) == (m.NONE, 2, {}), \
        "B's target is held by A: B is at the new epoch with nothing yet"
    assert c.gc.groups["g"].consumer.members["B"].current.state == UNRELEASED
    a = hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3))
    assert (a.member_epoch, a.assignment) == (1, parts(c, 0, 1)), \
        "A must first give up two partitions, in its old epoch"
    assert c.gc.groups["g"].consumer.members["A"].current.state == UNREVOKED
    b = hb(c, "B", 2, owned={})
    assert b.assignment is None, "nothing released yet"
    a = hb(c, "A", 1, owned=parts(c, 0, 1))
    assert (a.member_epoch, a.assignment) == (2, None), "revoked: A moves to epoch 2"
    b = hb(c, "B", 2, owned={})
    assert (b.member_epoch, b.assignment) == (2, parts(c, 2, 3))
    cg = c.gc.groups["g"].consumer
    assert cg.state() == "Stable" and cg.group_epoch == cg.assignment_epoch == 2


def test_epochs_out_of_step_are_fenced_and_a_lost_answer_is_forgiven():
    c = Coordinator()
    hb(c, "A", 0)
    assert hb(c, "A", 2).error == m.FENCED_MEMBER_EPOCH, "ahead of the coordinator"
    hb(c, "B", 0)
    hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3))
    a = hb(c, "A", 1, owned=parts(c, 0, 1))
    assert a.member_epoch == 2
    again = hb(c, "A", 1, owned=parts(c, 0, 1))
    assert (again.error, again.member_epoch) == (m.NONE, 2), \
        "the previous epoch owning no more than its assignment: the answer was lost"
    assert hb(c, "A", 1, owned=parts(c, 0, 1, 2)).error == m.FENCED_MEMBER_EPOCH
    assert hb(c, "Z", 1).error == m.UNKNOWN_MEMBER_ID
    rejoin = hb(c, "A", 0)
    assert (rejoin.error, rejoin.member_epoch, rejoin.assignment) == (m.NONE, 2,
                                                                      parts(c, 0, 1)), \
        "a fenced member rejoins with epoch 0 and gets its target again"


def test_requests_the_coordinator_refuses_say_what_is_wrong():
    c = Coordinator()
    r = hb(c, "A", 0, owned=parts(c, 1))
    assert (r.error, r.message) == (m.INVALID_REQUEST,
                                    "TopicPartitions must be empty when (re-)joining.")
    assert hb(c, "", 0).error == m.INVALID_REQUEST, "v1: the client names itself"
    bad = hb(c, "A", 0, regex="t(")
    assert bad.error == m.INVALID_REGULAR_EXPRESSION and "`t(`" in bad.message
    for rx, why in (("(t+)+", "repetition inside a repetition"), ("(tt|t)*", "alternatives"),
                    ("t(?!u)", "lookarounds"), (r"(t)\1", "backreferences")):
        r = hb(c, "A", 0, regex=rx)  # RE2 refuses it, or re could backtrack for minutes
        assert r.error == m.INVALID_REGULAR_EXPRESSION and why in r.message, (rx, r.message)
    assert hb(c, "A", 0, assignor="sticky").error == m.UNSUPPORTED_ASSIGNOR
    assert hb(c, "A", 0, instance_id="").message == "InstanceId can't be empty."
    assert hb(c, "A", -2).message == "InstanceId can't be null."
    assert hb(c, "A", 0, subscribed=()).message == ("SubscribedTopicNames or "
                                                    "SubscribedTopicRegex must be set in "
                                                    "first request.")
    assert hb(c, "A", -3).error == m.INVALID_REQUEST
    assert hb(c, "A", 3).error == m.GROUP_ID_NOT_FOUND
    v0 = []
    c.gc.consumer_heartbeat(Heartbeat("g", "", 0, version=0, rebalance_timeout_ms=1000,
                                      subscribed=("t",), owned={}), 0, v0.append)
    assert v0[0].error == m.NONE and len(v0[0].member_id) == 36, "v0: the coordinator names it"


def test_offsets_are_committed_under_the_member_epoch():
    c = Coordinator()
    hb(c, "A", 0)
    commit = {("t", 0): (5, 0, "")}
    errors = []
    c.gc.commit_offsets("g", "A", 1, commit, 0, errors.append, version=9)
    c.gc.commit_offsets("g", "A", 0, commit, 0, errors.append, version=9)
    c.gc.commit_offsets("g", "A", 1, commit, 0, errors.append, version=8)
    c.gc.commit_offsets("g", "Z", 1, commit, 0, errors.append, version=9)
    c.gc.commit_offsets("g", "", -1, commit, 0, errors.append, version=9)
    assert [e[("t", 0)] for e in errors] == [m.NONE, m.STALE_MEMBER_EPOCH, m.UNSUPPORTED_VERSION,
                                            m.UNKNOWN_MEMBER_ID, m.UNKNOWN_MEMBER_ID]
    assert c.gc.fetch_offsets("g", [("t", 0)], member=("A", 0))[0] == m.STALE_MEMBER_EPOCH
    error, found = c.gc.fetch_offsets("g", [("t", 0)], member=("A", 1))
    assert error == m.NONE and found[0][1].offset == 5
    assert c.gc.fetch_offsets("g", [("t", 0)], member=(None, -1))[0] == m.NONE, "an admin read"


def test_a_coordinator_that_takes_over_reads_the_group_back_from_the_log():
    c = Coordinator()
    hb(c, "A", 0)
    hb(c, "B", 0)
    hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3))  # A revoking 2 and 3
    again = Coordinator(disk=c.disk)
    cg, before = again.gc.groups["g"].consumer, c.gc.groups["g"].consumer
    assert (cg.group_epoch, cg.assignment_epoch, cg.target, cg.subscription) == (
        before.group_epoch, before.assignment_epoch, before.target, before.subscription)
    assert {k: (v.current, v.subscribed, v.rebalance_timeout_ms) for k, v in
            cg.members.items()} == {k: (v.current, v.subscribed, v.rebalance_timeout_ms)
                                    for k, v in before.members.items()}
    assert cg.members["A"].current.state == UNREVOKED
    a = hb(again, "A", 1, owned=parts(again, 0, 1))
    assert (a.error, a.member_epoch) == (m.NONE, 2), "the handshake goes on at the new one"
    assert hb(again, "B", 2, owned={}).assignment == parts(again, 2, 3)


def test_silent_members_and_members_that_keep_what_they_must_revoke_are_removed():
    c = Coordinator()
    hb(c, "A", 0)
    hb(c, "B", 0, rebalance=5_000)
    hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3), now=1)
    session = c.gc.options.group_consumer_session_timeout_ms
    hb(c, "B", 2, owned={}, now=4_000)
    c.gc.poll(4_000, False)
    assert set(c.gc.groups["g"].consumer.members) == {"A", "B"}
    hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3), now=44_000)
    hb(c, "B", 2, owned={}, now=44_000)
    c.gc.poll(60_001, False)  # A kept 2 and 3 past its rebalance timeout of 60 s
    assert set(c.gc.groups["g"].consumer.members) == {"B"}
    b = hb(c, "B", 2, owned={}, now=60_002)
    assert (b.member_epoch, b.assignment) == (3, parts(c, 0, 1, 2, 3))
    c.gc.poll(60_002 + session, False)
    assert not c.gc.groups["g"].consumer.members and c.gc.groups["g"].consumer.state() == "Empty"
    assert any("session timed out" in str(e) for e in c.events)


def test_leaving_frees_the_partitions_and_an_empty_group_can_be_deleted():
    c = Coordinator()
    hb(c, "A", 0)
    b = hb(c, "B", 0)
    assert hb(c, "B", -1).member_epoch == -1
    assert hb(c, "B", -1).error == m.UNKNOWN_MEMBER_ID
    assert hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3)).member_epoch == 3
    assert b.member_epoch == 2
    out = []
    c.gc.delete_groups(["g"], 0, out.append)
    assert out == [{"g": m.NON_EMPTY_GROUP}]
    hb(c, "A", -1)
    c.gc.delete_groups(["g"], 0, out.append)
    assert out[1] == {"g": m.NONE}
    assert "g" not in Coordinator(disk=c.disk).gc.groups, "tombstoned in the log"


def test_an_empty_consumer_group_turns_classic_at_a_join():
    d = Coordinator()
    hb(d, "A", 0)
    hb(d, "A", -1)
    assert d.join("x").error == m.MEMBER_ID_REQUIRED, "an empty consumer group turns classic"
    assert "g" not in Coordinator(disk=d.disk).gc.groups, "its consumer records tombstoned"


def test_a_topic_created_after_subscribing_raises_the_group_epoch():
    img = image(topics=((gm.OFFSETS_TOPIC, 1), ("t", 4), ("u", 2)))
    c = Coordinator(img=image())
    a = hb(c, "A", 0, subscribed=("t", "u"))
    assert a.assignment == parts(c, 0, 1, 2, 3)
    c.rm.apply_image(img, None, 10)
    a = hb(c, "A", 1, owned=a.assignment)
    assert a.member_epoch == 2 and a.assignment == {**parts(c, 0, 1, 2, 3),
                                                    **parts(c, 0, 1, topic="u")}


def test_a_static_member_that_leaves_keeps_its_partitions_for_the_one_taking_its_place():
    """KIP-848 static membership: leaving with epoch -2 keeps the member and its assignment;
    a member joining with the instance id takes both over without a new group epoch."""
    c = Coordinator()
    hb(c, "A", 0, instance_id="i1")
    hb(c, "B", 0)
    hb(c, "A", 1, owned=parts(c, 0, 1, 2, 3), instance_id="i1")
    hb(c, "A", 1, owned=parts(c, 0, 1), instance_id="i1")
    assert hb(c, "B", 2, owned={}).assignment == parts(c, 2, 3)
    cg = c.gc.groups["g"].consumer
    assert hb(c, "A2", 0, instance_id="i1").error == m.UNRELEASED_INSTANCE_ID, \
        "the instance id is held by A, which has not left"
    assert (hb(c, "A", 2, owned=parts(c, 0, 1), instance_id="i9").error
            == m.UNKNOWN_MEMBER_ID)
    left = hb(c, "A", -2, instance_id="i1")
    assert (left.error, left.member_epoch) == (m.NONE, -2)
    assert cg.members["A"].current.assigned == parts(c, 0, 1), "kept for the instance"
    assert hb(c, "B", 2, owned=parts(c, 2, 3)).assignment is None, "B gets nothing of A's"
    back = hb(c, "A2", 0, instance_id="i1")
    assert (back.error, back.member_epoch, back.assignment) == (m.NONE, 2, parts(c, 0, 1)), \
        "A2 takes A's partitions at once, at the same epoch"
    assert (cg.group_epoch, set(cg.members)) == (2, {"A2", "B"})
    assert hb(c, "A", 2, owned=parts(c, 0, 1), instance_id="i1").error == m.FENCED_INSTANCE_ID
    again = Coordinator(disk=c.disk).gc.groups["g"].consumer
    assert {k: (v.instance_id, v.current) for k, v in again.members.items()} == {
        k: (v.instance_id, v.current) for k, v in cg.members.items()}
    assert again.target == cg.target and "A" not in again.target
    hb(c, "A2", -2, instance_id="i1", now=1)  # gone for longer than its session
    hb(c, "B", 2, owned=parts(c, 2, 3), now=c.gc.options.group_consumer_session_timeout_ms)
    c.gc.poll(c.gc.options.group_consumer_session_timeout_ms + 1, False)
    assert set(cg.members) == {"B"}
    b = hb(c, "B", 2, owned=parts(c, 2, 3), now=c.gc.options.group_consumer_session_timeout_ms)
    assert (b.member_epoch, b.assignment) == (3, parts(c, 0, 1, 2, 3))


def test_a_regex_subscription_takes_every_matching_topic_and_those_created_later():
    img = image(topics=((gm.OFFSETS_TOPIC, 1), ("t", 4), ("u", 2), ("w", 3)))
    c = Coordinator(img=image(topics=((gm.OFFSETS_TOPIC, 1), ("t", 4), ("w", 3))))
    a = hb(c, "A", 0, subscribed=(), regex="[tu]")
    assert (a.error, a.member_epoch, a.assignment) == (m.NONE, 1, parts(c, 0, 1, 2, 3))
    every = hb(c, "E", 0, subscribed=(), regex=".*")
    cg = c.gc.groups["g"].consumer
    assert set(cg.subscription) == {"t", "w"}, "internal topics are never matched"
    assert every.member_epoch == 2
    c.rm.apply_image(img, None, 10)
    a = hb(c, "A", 1, owned=a.assignment)
    assert cg.group_epoch == 3 and "u" in cg.subscription, "u matches: a new group epoch"
    target = cg.target
    assert target["A"].get(tid(c, "u")) or target["E"].get(tid(c, "u"))
    assert not target["A"].get(tid(c, "w")), "w matches E's regex only"
    assert len(target["E"].get(tid(c, "w"), ())) == 3
    described = Coordinator(disk=c.disk).gc.groups["g"].consumer.members
    assert {k: v.regex for k, v in described.items()} == {"A": "[tu]", "E": ".*"}
    hb(c, "E", -1)
    hb(c, "A", 3, owned=a.assignment or {}, regex="u", subscribed=("w",))
    assert cg.members["A"].subscribed == ("w",) and cg.members["A"].regex == "u"
    assert set(cg.target["A"]) == {tid(c, "u"), tid(c, "w")}, "names and regex together"


# ---------------------------------------------------------------- the core alone

def test_reconcile_follows_kafkas_steps():
    held = {}

    def owner(t, p):
        return held.get((t, p), -1)
    start = MemberAssignment(3, 2, STABLE, {"x": frozenset({0, 1})})
    assert reconcile(start, 3, {"x": frozenset({0})}, owner, None) is start, "already there"
    step = reconcile(start, 4, {"x": frozenset({0, 2})}, owner, {"x": frozenset({0, 1})})
    assert step == MemberAssignment(3, 2, UNREVOKED, {"x": frozenset({0})},
                                    {"x": frozenset({1})})
    assert reconcile(step, 4, {"x": frozenset({0, 2})}, owner, None) is step, \
        "owned not sent: it may still hold what it must give up"
    held[("x", 2)] = 4
    step = reconcile(step, 4, {"x": frozenset({0, 2})}, owner, {"x": frozenset({0})})
    assert step == MemberAssignment(4, 3, UNRELEASED, {"x": frozenset({0})}, {})
    del held[("x", 2)]
    assert reconcile(step, 4, {"x": frozenset({0, 2})}, owner, None) == MemberAssignment(
        4, 3, STABLE, {"x": frozenset({0, 2})}, {})


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_assignors_give_each_partition_to_one_subscriber_and_balance(name):
    rng = random.Random(name)
    for _ in range(300):
        topics = {f"t{i}": (f"id{i}", rng.randint(1, 9)) for i in range(rng.randint(1, 4))}
        members = {f"m{i}": tuple(t for t in topics if rng.random() < 0.8) or ("t0",)
                   for i in range(rng.randint(1, 6))}
        previous = assign(name, {k: v for k, v in members.items() if rng.random() < 0.7},
                          topics, {})
        out = assign(name, members, topics, previous)
        seen = {}
        for mid, ps in out.items():
            for t, p_set in ps.items():
                name_of = next(n for n, (i, _) in topics.items() if i == t)
                assert name_of in members[mid], "only to a subscriber"
                for p in p_set:
                    assert (t, p) not in seen, "once"
                    seen[(t, p)] = mid
        assert len(seen) == sum(n for tn, (_, n) in topics.items()
                                if any(tn in s for s in members.values()))
        if name == "uniform" and len({s for s in members.values()}) == 1:
            loads = [sum(len(p) for p in out[mid].values()) for mid in members]
            assert max(loads) - min(loads) <= 1, "same subscriptions: balanced"
    assert assign("uniform", {"a": ("t",), "b": ("t",)}, {"t": ("i", 4)},
                  {"a": {"i": frozenset({0, 1, 2, 3})}})["a"] == {"i": frozenset({0, 1})}, \
        "sticky: a keeps what it can"


# ---------------------------------------------------------------- clients under chaos

class Client:
    """A consumer as Kafka's behaves: it owns what its last answer assigned, gives up the
    rest before it says so, and after FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID, or a session
    timeout without a successful heartbeat, gives up everything and joins again."""

    def __init__(self, name):
        self.name, self.epoch, self.owned, self.joined, self.ok_at = name, 0, {}, False, 0
        self.full = False  # its last request went unanswered: the next one says everything


@pytest.mark.parametrize("seed", range(40))
def test_no_partition_is_ever_owned_by_two_clients_under_random_schedules(seed):
    rng = random.Random(seed)
    c = Coordinator()
    clients = {n: Client(n) for n in "ABCD"}
    now = 0

    def check():
        seen = {}
        for cl in clients.values():
            for t, ps in cl.owned.items():
                for p in ps:
                    assert (t, p) not in seen, f"seed {seed}: {t}-{p} owned by {seen[(t, p)]} " \
                        f"and {cl.name} at {now}"
                    seen[(t, p)] = cl.name
    session = c.gc.options.group_consumer_session_timeout_ms

    def lose_expired():  # no answer for a session: it knows it may have been replaced
        for x in clients.values():
            if x.joined and now - x.ok_at >= session:
                x.epoch, x.owned, x.joined = 0, {}, False
    for _ in range(250):
        now += rng.randint(1, 3_000)
        lose_expired()
        cl = rng.choice(list(clients.values()))
        action = rng.random()
        if action < 0.03:  # the coordinator moves: the next one loads the log
            c = Coordinator(disk=c.disk, now=now)
            continue
        if action < 0.08 and cl.joined:
            hb(c, cl.name, -1, now=now)
            cl.epoch, cl.owned, cl.joined = 0, {}, False
            continue
        if action < 0.1:  # it loses everything (a crash) and stays away a while
            cl.owned, cl.joined, cl.epoch = {}, False, 0
            now += rng.choice([0, 50_000])
            c.gc.poll(now, False)
            check()
            continue
        c.gc.poll(now, False)
        r = hb(c, cl.name, cl.epoch, owned=cl.owned if cl.joined else {}, now=now,
               full=cl.full)
        if r is None:
            continue
        if r.error in (m.FENCED_MEMBER_EPOCH, m.UNKNOWN_MEMBER_ID, m.GROUP_ID_NOT_FOUND):
            cl.epoch, cl.owned, cl.joined = 0, {}, False
            continue
        assert r.error == m.NONE, (seed, m.ERROR_NAMES.get(r.error), r.message)
        if rng.random() < 0.1:
            cl.full = True
            continue  # the answer is lost on the way
        cl.epoch, cl.joined, cl.ok_at, cl.full = r.member_epoch, True, now, False
        if r.assignment is not None:
            cl.owned = {t: ps for t, ps in r.assignment.items()}
        check()
    for _ in range(12):  # then everyone stays and heartbeats: the group settles
        now += 1_000
        lose_expired()
        for cl in clients.values():
            if not cl.joined:
                cl.epoch, cl.owned = 0, {}
            r = hb(c, cl.name, cl.epoch, owned=cl.owned if cl.joined else {}, now=now,
                   full=cl.full)
            if r.error != m.NONE:
                cl.epoch, cl.owned, cl.joined = 0, {}, False
                continue
            cl.epoch, cl.joined, cl.ok_at, cl.full = r.member_epoch, True, now, False
            if r.assignment is not None:
                cl.owned = r.assignment
            check()
    cg = c.gc.groups["g"].consumer
    assert cg.state() == "Stable", seed
    owned = sorted((t, p) for cl in clients.values() for t, ps in cl.owned.items() for p in ps)
    assert owned == [(tid(c), p) for p in range(4)], "every partition consumed, once"


def test_records_are_in_kafkas_format():
    """Keys and values byte for byte as Kafka's coordinator writes them: a key is its type
    (the key version) and strings; a value its version and a flexible struct."""
    from node_image.broker import consumer_records as cr
    topic = "00010203-0405-0607-0809-0a0b0c0d0e0f"
    key, value = cr.current("g", "m", MemberAssignment(5, 4, UNREVOKED, {topic: frozenset({1})},
                                                        {topic: frozenset({0, 2})}))
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    tps = lambda *ps: b"\x02" + bytes(range(16)) + bytes([len(ps) + 1]) + b"".join(  # noqa
        p.to_bytes(4, "big") for p in ps) + b"\x00"
    assert value == (b"\x00\x00" + (5).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"\x01"
                     + tps(1) + tps(0, 2) + b"\x00")
    assert cr.group_epoch("g", 7) == (b"\x00\x03\x00\x01g", b"\x00\x00\x00\x00\x00\x07\x00")
    assert gm.read_key(key) == gm.ConsumerKey(gm.CURRENT, "g", "m")
    with pytest.raises(gm.GroupRecordError, match="member's current assignment of group 'g' "
                                                  "member m: cannot read"):
        cr.fold(ConsumerGroup(), gm.ConsumerKey(gm.CURRENT, "g", "m"), value[:9])
