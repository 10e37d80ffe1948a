"""Static members of classic groups (KIP-345), driven without I/O (the harness of
``test_group_coordinator``): a restarted static member takes its place back without a
rebalance, the old member id is fenced everywhere, the instance survives a coordinator
failover, and a member joining while the group assigns forces a new rebalance."""
from node_image import messages as m
from node_image.broker.group_state import COMPLETING, PREPARING, STABLE
from test_group_coordinator import SESSION, Coordinator


def join(c, instance, member="", now=0, v9=False, protocols=(("range", b"sub"),)):
    """A JoinGroup with ``instance`` as group.instance.id; its answer, or None while parked."""
    out = []
    c.gc.join("g", member, f"client-{instance}", "/h", SESSION, 60_000, "consumer", protocols,
              False, now, out.append, instance, v9)
    return out[0] if out else None


def static_pair(c):
    """Static members of instances ia and ib, Stable in generation 1 with assignments."""
    out = []
    c.gc.join("g", "", "client-ia", "/h", SESSION, 60_000, "consumer", (("range", b"sub"),),
              False, 0, out.append, "ia", False)
    c.gc.join("g", "", "client-ib", "/h", SESSION, 60_000, "consumer", (("range", b"sub"),),
              False, 0, out.append, "ib", False)
    assert [r.error for r in out] == [m.NONE], "ia's join completed at once, ib's waits"
    first = out[0].member_id
    assert first.startswith("ia-"), "a static member's id starts with its instance id"
    again = join(c, "ia", first)
    rb = out[1] if len(out) > 1 else None
    assert rb is not None and again.generation == rb.generation == 2
    a, b = again.member_id, rb.member_id
    assert c.sync("a", a, 2, {a: b"A", b: b"B"}) == (m.NONE, b"A")
    assert c.sync("b", b, 2) == (m.NONE, b"B")
    assert c.state() == STABLE
    return a, b


def test_a_restarted_static_member_takes_its_place_back_without_a_rebalance():
    c = Coordinator()
    a, b = static_pair(c)
    back = join(c, "ia")  # ia restarted: no member id, its instance id
    assert back.error == m.NONE and back.member_id != a and back.member_id.startswith("ia-")
    assert (back.generation, back.leader, back.members) == (2, a, ()), \
        "the old leader id: the rejoined leader must not assign again"
    assert c.state() == STABLE and c.gc.groups["g"].generation == 2
    assert c.sync("a2", back.member_id, 2) == (m.NONE, b"A"), "its assignment kept"
    assert c.gc.heartbeat("g", 2, a, 1, "ia") == m.FENCED_INSTANCE_ID
    assert c.gc.heartbeat("g", 2, back.member_id, 1, "ia") == m.NONE
    assert c.gc.heartbeat("g", 2, b, 1, "ib") == m.NONE, "ib goes on, untouched"
    assert c.commit(a, 2, {("t", 0): (5, 0, "")}) == {("t", 0): m.UNKNOWN_MEMBER_ID}
    stale = []
    c.gc.commit_offsets("g", a, 2, {("t", 0): (5, 0, "")}, 1, stale.append, instance_id="ia")
    assert stale == [{("t", 0): m.FENCED_INSTANCE_ID}]
    assert join(c, "ia", a).error == m.FENCED_INSTANCE_ID, "the old incarnation is told to stop"
    assert join(c, "iz", b).error == m.UNKNOWN_MEMBER_ID, "an instance the group does not know"


def test_a_rejoined_static_leader_skips_the_assignment_from_joingroup_v9():
    c = Coordinator()
    a, b = static_pair(c)
    back = join(c, "ia", v9=True)
    assert back.skip_assignment and back.leader == back.member_id
    assert sorted(mid for mid, _ in back.members) == sorted([back.member_id, b]), \
        "the leader still sees the members' subscriptions"
    follower = join(c, "ib", v9=True)
    assert not follower.skip_assignment and follower.members == ()
    assert c.state() == STABLE and c.gc.groups["g"].generation == 2


def test_static_members_survive_a_coordinator_failover_and_leave_by_instance_id():
    c = Coordinator()
    a, b = static_pair(c)
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk)
    g = again.gc.groups["g"]
    assert {mid: mb.instance_id for mid, mb in g.members.items()} == {a: "ia", b: "ib"}
    back = join(again, "ib")
    assert back.error == m.NONE and again.state() == STABLE, "no rebalance after a failover"
    assert again.gc.leave("g", "", 2, "ia") == m.NONE, "the admin client names only the instance"
    assert again.state() == PREPARING
    assert again.gc.leave("g", "", 2, "ia") == m.UNKNOWN_MEMBER_ID
    assert again.gc.leave("g", b, 2, "ib") == m.FENCED_INSTANCE_ID


def test_a_static_member_rejoining_while_the_group_assigns_forces_a_rebalance():
    c = Coordinator()
    a, b = static_pair(c)
    assert join(c, "ia", a, protocols=(("range", b"other"),)) is None  # new metadata: rebalance
    assert join(c, "ib", b) is not None
    assert c.state() == COMPLETING
    waiting = []
    c.gc.sync("g", 3, b, {}, 0, lambda error, assignment: waiting.append(error))
    back = join(c, "ib")  # ib restarted while the leader assigns
    assert waiting == [m.FENCED_INSTANCE_ID], "the old id's parked SyncGroup is fenced"
    assert back is None and c.state() == PREPARING, "a new rebalance, joined by the new id"
