"""The group coordinator's core, driven without I/O: Kafka's classic group protocol on a real
replica manager whose ``__consumer_offsets`` partition lives on a simulated disk."""
import random

import pytest

from node_image import messages as m
from node_image import metadata_records as mr
from node_image import replication_control as rc
from node_image.broker import group_metadata as gm
from node_image.broker.group_coordinator import GroupCoordinator
from node_image.broker.group_state import COMPLETING, EMPTY, PREPARING, STABLE, GroupStateError
from node_image.broker.replica_manager import ReplicaManager
from node_image.config import BrokerConfig
from node_image.metadata_image import MetadataDelta, MetadataImage
from node_image.outbox import Outbox
from simulator.disk import SimDisk

SESSION = 10_000
OPTIONS = BrokerConfig(offsets_topic_partitions=1, group_initial_rebalance_delay_ms=0)


def image(leader=1, epoch=0, topics=((gm.OFFSETS_TOPIC, 1), ("t", 4)), isr=None):
    """Brokers 1 and 2; ``topics`` (name, partitions) each led by ``leader`` in ``epoch``,
    with the leader alone in the ISR unless ``isr`` says."""
    delta = MetadataDelta(MetadataImage())
    for b in (1, 2):
        delta.replay(mr.RegisterBrokerRecord(b, f"inc{b}", 10 + b, (("PLAINTEXT", f"h{b}", 9092),),
                                             None, False, False))
    img = delta.apply(2)
    for name, parts in topics:
        recs, results = rc.create_topics(img, [(name, parts, 1, ())], salt=len(name))
        assert [r.error for r in results] == [m.NONE]
        delta = MetadataDelta(img)
        for r in recs:
            if isinstance(r, mr.PartitionRecord):
                r = mr.PartitionRecord(r.partition_id, r.topic_id, (1, 2), isr or (leader,),
                                       leader, epoch, epoch)
            delta.replay(r)
        img = delta.apply(len(recs))
    return img


class Coordinator:
    """A coordinator on node 1 and what its callbacks received."""

    def __init__(self, disk=None, options=OPTIONS, img=None, now=0):
        self.disk = disk or SimDisk()
        self.events = []
        corr = iter(range(1, 10**6))
        self.rm = ReplicaManager(1, "/data", self.disk, options, Outbox(), lambda: next(corr),
                                 self.events.append)
        self.rm.apply_image(img or image(), None, 0)
        self.gc = GroupCoordinator(self.rm, options, self.events.append, lambda: 1_000,
                                   random.Random(7))
        self.gc.poll(now, True)  # loads what it leads, at ``now``
        self.answers = {}

    def join(self, name, member="", now=0, v4=True, protocols=(("range", b"sub"),)):
        def respond(r):
            self.answers[("join", name)] = r
        self.answers.pop(("join", name), None)
        self.gc.join("g", member, name, "/h", SESSION, 60_000, "consumer",
                     tuple((p, meta + name.encode()) for p, meta in protocols), v4, now, respond)
        return self.answers.get(("join", name))

    def sync(self, name, member, generation, assignments=None, now=0):
        def respond(error, assignment):
            self.answers[("sync", name)] = (error, assignment)
        self.answers.pop(("sync", name), None)
        self.gc.sync("g", generation, member, assignments or {}, now, respond)
        return self.answers.get(("sync", name))

    def commit(self, member, generation, offsets, now=0):
        out = []
        self.gc.commit_offsets("g", member, generation, offsets, now, out.append)
        [errors] = out
        return errors

    def state(self):
        return self.gc.groups["g"].state


def two_members(c):
    """a and b in generation 1, a the leader, both with their assignments."""
    r = c.join("a")
    assert r.error == m.MEMBER_ID_REQUIRED and r.member_id.startswith("a-")
    a = r.member_id
    assert c.join("a", a).generation == 1, "alone: the join completes at once"
    b = c.join("b").member_id
    assert c.join("b", b) is None, "b waits for a to rejoin"
    assert c.state() == PREPARING
    assert c.gc.heartbeat("g", 1, a, 0) == m.REBALANCE_IN_PROGRESS
    ra = c.join("a", a)
    rb = c.answers[("join", "b")]
    assert ra.generation == rb.generation == 2 and ra.leader == a == rb.leader
    assert sorted(ra.members) == sorted([(a, b"suba"), (b, b"subb")]), "the leader sees all"
    assert rb.members == ()
    assert c.state() == COMPLETING
    assert c.sync("b", b, 2) is None, "a follower waits for the leader's assignment"
    assert c.sync("a", a, 2, {a: b"A", b: b"B"}) == (m.NONE, b"A")
    assert c.answers[("sync", "b")] == (m.NONE, b"B")
    assert c.state() == STABLE
    return a, b


def test_two_members_join_sync_and_heartbeat():
    c = Coordinator()
    a, b = two_members(c)
    assert c.gc.heartbeat("g", 2, a, 10) == m.NONE
    assert c.gc.heartbeat("g", 1, a, 10) == m.ILLEGAL_GENERATION
    assert c.gc.heartbeat("g", 2, "nobody", 10) == m.UNKNOWN_MEMBER_ID
    assert c.sync("b", b, 2) == (m.NONE, b"B"), "a sync in Stable gets the stored assignment"
    assert c.join("b", b).generation == 2, "a follower rejoining unchanged is told again"


def test_a_silent_member_is_removed_and_the_group_rebalances_without_it():
    c = Coordinator()
    a, b = two_members(c)
    c.gc.heartbeat("g", 2, a, SESSION - 1)
    c.gc.poll(SESSION, False)
    assert b not in c.gc.groups["g"].members and c.state() == PREPARING
    r = c.join("a", a, now=SESSION + 1)
    assert (r.generation, r.leader, [x for x, _ in r.members]) == (3, a, [a])
    assert c.commit(b, 2, {("t", 0): (5, 0, "")}) == {("t", 0): m.UNKNOWN_MEMBER_ID}


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout():
    c = Coordinator()
    a, b = two_members(c)
    assert c.gc.leave("g", "nobody", 0) == m.UNKNOWN_MEMBER_ID
    c3 = c.join("c")
    assert c.join("c", c3.member_id, now=5) is None
    c.join("a", a, now=6)
    for t in (7, 8):  # b heartbeats (it is alive) but never rejoins
        c.gc.heartbeat("g", 2, b, t)
    c.gc.poll(5 + 60_000, False)
    r = c.answers[("join", "c")]
    assert r.generation == 3 and sorted(x for x, _ in c.answers[("join", "a")].members) == \
        sorted([a, c3.member_id])
    assert c.gc.heartbeat("g", 2, b, 60_010) == m.UNKNOWN_MEMBER_ID


def test_commits_follow_the_generation_and_fetches_see_committed_offsets():
    c = Coordinator()
    a, b = two_members(c)
    assert c.commit(a, 1, {("t", 0): (5, 0, "")}) == {("t", 0): m.ILLEGAL_GENERATION}
    assert c.commit(a, 2, {("t", 0): (5, 0, "m"), ("t", 9): (1, 0, ""),
                           ("t", 1): (7, 0, "x" * 5000)}) == {
        ("t", 0): m.NONE, ("t", 9): m.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 1): m.OFFSET_METADATA_TOO_LARGE}
    error, found = c.gc.fetch_offsets("g", [("t", 0), ("t", 1)])
    assert error == m.NONE and found == [(("t", 0), gm.OffsetValue(5, 0, "m", 1_000), m.NONE),
                                         (("t", 1), None, m.NONE)]
    c.join("c")  # a new member: PreparingRebalance still takes commits of generation 2
    assert c.commit(b, 2, {("t", 1): (3, 0, "")}) == {("t", 1): m.NONE}
    assert c.commit(b, -1, {("t", 1): (3, 0, "")}) == {("t", 1): m.ILLEGAL_GENERATION}
    assert c.commit("", -1, {("t", 1): (3, 0, "")}) == {("t", 1): m.UNKNOWN_MEMBER_ID}


def test_a_group_without_members_commits_with_generation_minus_one():
    c = Coordinator()
    assert c.commit("", -1, {("t", 2): (9, -1, None)}) == {("t", 2): m.NONE}
    assert c.gc.fetch_offsets("g", None) == (m.NONE, [(("t", 2), gm.OffsetValue(9, -1, "", 1_000), m.NONE)])
    assert c.state() == EMPTY
    assert c.gc.fetch_offsets("other", None) == (m.NONE, [])


def test_a_new_coordinator_rebuilds_groups_and_offsets_from_the_log():
    c = Coordinator()
    a, b = two_members(c)
    c.commit(a, 2, {("t", 0): (11, 0, "meta")})
    c.commit(b, 2, {("t", 0): (12, 0, "")})  # the newest record wins
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk)  # the partition's next leader reads the same log
    g = again.gc.groups["g"]
    assert (g.state, g.generation, g.leader, g.protocol) == (STABLE, 2, a, "range")
    assert {x: mb.assignment for x, mb in g.members.items()} == {a: b"A", b: b"B"}
    assert again.gc.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), gm.OffsetValue(12, 0, "", 1_000), m.NONE)]
    assert again.gc.heartbeat("g", 2, b, 5) == m.NONE, "members carry on with the new coordinator"
    assert any("loaded 1 group(s)" in e for e in again.events)


def test_losing_leadership_unloads_groups_and_answers_not_coordinator():
    c = Coordinator()
    a, _ = two_members(c)
    parked = c.join("c")
    assert parked.error == m.MEMBER_ID_REQUIRED
    c.join("c", parked.member_id)
    assert ("join", "c") not in c.answers
    moved = image(leader=2, epoch=1)
    c.rm.apply_image(moved, None, 10)
    c.gc.poll(10, True)
    assert c.answers[("join", "c")].error == m.NOT_COORDINATOR
    assert c.gc.heartbeat("g", 2, a, 11) == m.NOT_COORDINATOR
    assert c.gc.fetch_offsets("g", None) == (m.NOT_COORDINATOR, [])
    assert c.commit(a, 2, {("t", 0): (1, 0, "")}) == {("t", 0): m.NOT_COORDINATOR}


def test_join_refusals():
    c = Coordinator()
    c.gc.join("g", "", "x", "", 10, 10, "consumer", (("range", b""),), True, 0,
              lambda r: c.answers.__setitem__("short", r))
    assert c.answers["short"].error == m.INVALID_SESSION_TIMEOUT
    assert c.join("a", "unknown-id").error == m.UNKNOWN_MEMBER_ID
    a = c.join("a").member_id
    c.join("a", a)
    c.gc.join("g", "", "x", "", SESSION, SESSION, "consumer", (("roundrobin", b""),), False, 0,
              lambda r: c.answers.__setitem__("other", r))
    assert c.answers["other"].error == m.INCONSISTENT_GROUP_PROTOCOL
    c.gc.join("", "", "x", "", SESSION, SESSION, "consumer", (("range", b""),), False, 0,
              lambda r: c.answers.__setitem__("empty", r))
    assert c.answers["empty"].error == m.INVALID_GROUP_ID


def test_the_state_table_refuses_what_kafka_refuses():
    c = Coordinator()
    two_members(c)
    g = c.gc.groups["g"]
    with pytest.raises(GroupStateError, match="Stable -> Empty"):
        g.transition(EMPTY)
    with pytest.raises(GroupStateError, match="Stable -> Stable"):
        g.transition(STABLE)


def test_records_are_kafkas_and_groups_map_to_partitions_as_in_java():
    assert gm.partition_for("hello", 50) == 99162322 % 50  # "hello".hashCode()
    assert gm.partition_for("polygenelubricants", 50) == 0  # hashCode() == Integer.MIN_VALUE
    assert gm.partition_for("", 50) == 0
    key = gm.offset_key("g", "t", 3)
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert gm.read_key(key) == gm.OffsetKey("g", "t", 3)
    v = gm.OffsetValue(42, 7, "meta", 123)
    assert gm.read_offset_value(gm.offset_value(v)) == v
    member = gm.MemberValue("m1", None, "c", "/h", 1, 2, b"sub", b"asg")
    gv = gm.GroupValue("consumer", 3, "range", "m1", 99, (member,))
    assert gm.read_key(gm.group_key("g")) == gm.GroupKey("g")
    assert gm.read_group_value(gm.group_value(gv)) == gv
    with pytest.raises(gm.GroupRecordError, match="unknown version 15"):
        gm.read_key(b"\x00\x0f")
    with pytest.raises(gm.GroupRecordError, match="field 'topic' runs past the end"):
        gm.read_key(b"\x00\x01\x00\x01g\x00\x05t")


def test_a_group_that_emptied_keeps_its_protocol_type_and_a_new_first_member_sets_it():
    """Kafka keeps an emptied group's protocol type: clients tell a consumer group whose
    members all left from a simple one (offsets only, type "") by it. Also after a reload."""
    c = Coordinator()
    a, b = two_members(c)
    assert c.gc.leave("g", a, 1) == m.NONE and c.gc.leave("g", b, 1) == m.NONE
    c.gc.poll(2, False)
    g = c.gc.groups["g"]
    assert c.state() == EMPTY and g.protocol is None and g.protocol_type == "consumer"
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk)
    assert again.gc.groups["g"].state == EMPTY
    assert again.gc.groups["g"].protocol_type == "consumer", "the stored group keeps it"
    # a member of another type may join the empty group, and the group takes its type
    again.gc.join("g", "", "x", "", SESSION, SESSION, "connect", (("v1", b""),), False, 10,
                  lambda r: again.answers.__setitem__("x", r))
    assert again.answers["x"].error == m.NONE, again.answers["x"]
    assert again.gc.groups["g"].protocol_type == "connect"


def test_offsets_of_a_deleted_topic_are_removed_and_stay_removed_after_a_reload():
    """As Kafka's GroupMetadataManager on partitions deleted: the group forgets the committed
    offsets of a deleted topic's partitions (others kept), and tombstones in the log keep a
    coordinator that loads the group later from bringing them back."""
    c = Coordinator()
    assert c.commit("", -1, {("t", 0): (5, 0, ""), ("t", 1): (6, 0, "")}) == {
        ("t", 0): m.NONE, ("t", 1): m.NONE}
    c.gc.groups["g"].offsets[("u", 0)] = gm.OffsetValue(3, 0, "", 1_000)  # another topic's
    c.gc.partitions_deleted({("t", 0), ("t", 1), ("t", 2), ("t", 3)}, 0)
    assert c.gc.fetch_offsets("g", None) == (m.NONE, [(("u", 0), gm.OffsetValue(3, 0, "", 1_000), m.NONE)])
    assert any("offsets of 2 deleted partition(s) removed" in e for e in c.events)
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk)  # loads the same log: the commits, then the tombstones
    assert again.gc.fetch_offsets("g", [("t", 0), ("t", 1)])[1] == [(("t", 0), None, m.NONE),
                                                                    (("t", 1), None, m.NONE)]


def test_share_state_of_a_deleted_topic_is_removed_and_stays_removed_after_a_reload():
    """As Kafka's share coordinator deletes a deleted topic's share-group state: once the
    image no longer has the topic (deleted, or made again under its name: a new id), the
    state of its partitions is forgotten and tombstoned (another topic's kept), so a
    coordinator that loads the log later does not read it back."""
    c = Coordinator(img=image(topics=((gm.OFFSETS_TOPIC, 1), ("t", 2), ("u", 1))))
    ids = {n: c.rm.image.topics[n].topic_id for n in ("t", "u")}
    written = []
    for topic, partition in (("t", 0), ("t", 1), ("u", 0)):
        c.gc.share_state_write(m.ShareStateWriteRequest(
            7, "sg", ids[topic], partition, 0, 10 + partition, ((10, 12, 0, 1),)), 0,
            written.append)
    assert [w.error for w in written] == [m.NONE] * 3
    c.rm.apply_image(image(topics=((gm.OFFSETS_TOPIC, 1), ("u", 1))), None, 0)
    assert c.rm.topic_ids_deleted == {ids["t"]}
    c.gc.share_topics_deleted(c.rm.topic_ids_deleted, 0)
    assert sorted(c.gc.share_states) == [("sg", ids["u"], 0)]
    assert any("share state of 2 partition(s) of deleted topics removed" in e for e in c.events)

    def read(coordinator, topic, partition):
        return coordinator.gc.share_state_read(
            m.ShareStateReadRequest(8, "sg", ids[topic], partition)).start_offset
    assert read(c, "t", 0) == -1 and read(c, "u", 0) == 10
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk, img=image(topics=((gm.OFFSETS_TOPIC, 1), ("u", 1))))
    assert sorted(again.gc.share_states) == [("sg", ids["u"], 0)]
    assert read(again, "t", 1) == -1 and read(again, "u", 0) == 10


def test_sync_group_v5_checks_the_protocol_type_and_name_it_is_given():
    """SyncGroup v5+ (KIP-559) names the protocol type and name the member expects; one that
    is not the group's is INCONSISTENT_GROUP_PROTOCOL, as Kafka's validateSyncGroup."""
    c = Coordinator()
    r = c.join("a")
    r = c.join("a", r.member_id)
    a, gen = r.member_id, r.generation

    def sync(ptype, pname):
        out = []
        c.gc.sync("g", gen, a, {a: b"A"}, 0, lambda e, asg: out.append((e, asg)), ptype, pname)
        return out[0]
    assert sync("connect", None)[0] == m.INCONSISTENT_GROUP_PROTOCOL
    assert sync(None, "roundrobin")[0] == m.INCONSISTENT_GROUP_PROTOCOL
    assert c.state() == COMPLETING, "a refused sync changes nothing"
    assert sync("consumer", "range") == (m.NONE, b"A")
    assert c.state() == STABLE
    assert sync(None, None) == (m.NONE, b"A"), "older versions name neither"


def test_transactional_commits_check_member_and_generation_when_given():
    """TxnOffsetCommit v3+ (KIP-447) carries the member and generation, checked as an
    OffsetCommit's (Kafka's validateOffsetCommit); older versions send none and commit while
    the group rebalances. A missing group with a generation is ILLEGAL_GENERATION."""
    c = Coordinator()
    a, b = two_members(c)

    def txn(member, generation, group="g", instance=None):
        out = []
        c.gc.commit_offsets(group, member, generation, {("t", 0): (4, 0, "")}, 0, out.append,
                            producer=(77, 0), instance_id=instance)
        return out[0][("t", 0)]
    assert txn("nobody", 2) == m.UNKNOWN_MEMBER_ID
    assert txn(a, 1) == m.ILLEGAL_GENERATION
    assert txn(a, 2, instance="static-1") == m.UNKNOWN_MEMBER_ID, "no static members here"
    assert txn(a, 2) == m.NONE
    assert txn("", -1) == m.NONE, "before v3: no member, no generation, any group state"
    assert txn(a, 2, group="other") == m.ILLEGAL_GENERATION
    assert txn("", -1, group="other") == m.NONE
    c.join("c")  # a rebalance: plain commits of generation 2 still go, so do transactional ones
    assert txn(b, 2) == m.NONE


def test_require_stable_holds_back_partitions_with_a_transaction_open():
    """OffsetFetch v7+ with require_stable (KIP-447): a partition with a transactional
    commit not yet ended is UNSTABLE_OFFSET_COMMIT (the client asks again); the others, and
    the same fetch without require_stable, get the committed offsets."""
    c = Coordinator()
    assert c.commit("", -1, {("t", 0): (5, 0, ""), ("t", 1): (6, 0, "")}) == {
        ("t", 0): m.NONE, ("t", 1): m.NONE}
    out = []
    c.gc.commit_offsets("g", "", -1, {("t", 0): (9, 0, "")}, 0, out.append, producer=(77, 0))
    assert out == [{("t", 0): m.NONE}]
    wanted = [("t", 0), ("t", 1)]
    v0, v1 = gm.OffsetValue(5, 0, "", 1_000), gm.OffsetValue(6, 0, "", 1_000)
    assert c.gc.fetch_offsets("g", wanted, True) == (m.NONE, [
        (("t", 0), v0, m.UNSTABLE_OFFSET_COMMIT), (("t", 1), v1, m.NONE)])
    assert c.gc.fetch_offsets("g", wanted) == (m.NONE, [(("t", 0), v0, m.NONE),
                                                        (("t", 1), v1, m.NONE)])
    c.gc.complete_txn(c.gc.partition_of("g"), 77, True)
    assert c.gc.fetch_offsets("g", wanted, True) == (m.NONE, [
        (("t", 0), gm.OffsetValue(9, 0, "", 1_000), m.NONE), (("t", 1), v1, m.NONE)])


def subscription(*topics):
    """A ConsumerProtocolSubscription v0: version, topics, user data."""
    import struct
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def delete_groups(c, *group_ids):
    out = []
    c.gc.delete_groups(list(group_ids), 5, out.append)
    [results] = out
    return results


def test_delete_groups_removes_only_empty_groups_and_they_stay_gone_after_a_reload():
    """Kafka's DeleteGroups: a group with members is NON_EMPTY_GROUP, an unknown one
    GROUP_ID_NOT_FOUND; an Empty group's offsets and metadata are tombstoned, so a
    coordinator loading the log later does not find it either."""
    c = Coordinator()
    a, b = two_members(c)
    assert c.commit(a, 2, {("t", 0): (5, 0, "")}) == {("t", 0): m.NONE}
    assert delete_groups(c, "g", "nobody", "") == {
        "g": m.NON_EMPTY_GROUP, "nobody": m.GROUP_ID_NOT_FOUND, "": m.INVALID_GROUP_ID}
    assert c.state() == STABLE and c.gc.fetch_offsets("g", None)[1]
    assert c.gc.leave("g", a, 1) == m.NONE and c.gc.leave("g", b, 1) == m.NONE
    assert c.state() == EMPTY
    assert delete_groups(c, "g") == {"g": m.NONE}
    assert "g" not in c.gc.groups and c.gc.fetch_offsets("g", None) == (m.NONE, [])
    assert delete_groups(c, "g") == {"g": m.GROUP_ID_NOT_FOUND}
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk)
    assert "g" not in again.gc.groups
    assert again.gc.fetch_offsets("g", [("t", 0)])[1] == [(("t", 0), None, m.NONE)]


def test_offset_delete_spares_subscribed_topics_and_refuses_other_protocols_with_members():
    """Kafka's OffsetDelete: a consumer group with members keeps the offsets of topics its
    members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others'; a group with
    members of another protocol type is NON_EMPTY_GROUP; an Empty group loses any; an
    unknown partition is UNKNOWN_TOPIC_OR_PARTITION. Tombstones keep them gone on reload."""
    img = image(topics=((gm.OFFSETS_TOPIC, 1), ("t", 4), ("u", 2)))
    c = Coordinator(img=img)
    r = c.join("a", protocols=(("range", subscription("t")),))
    r = c.join("a", r.member_id, protocols=(("range", subscription("t")),))
    a = r.member_id
    assert c.sync("a", a, r.generation, {a: b"A"}) == (m.NONE, b"A")
    offsets = {("t", 0): (5, 0, ""), ("u", 0): (6, 0, ""), ("u", 1): (7, 0, "")}
    assert set(c.commit(a, r.generation, offsets).values()) == {m.NONE}

    def delete(group, keys):
        out = []
        c.gc.delete_offsets(group, keys, 5, lambda e, res: out.append((e, res)))
        [answer] = out
        return answer
    assert delete("g", [("t", 0), ("u", 0), ("x", 0), ("u", 5)]) == (m.NONE, {
        ("t", 0): m.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): m.NONE,
        ("x", 0): m.UNKNOWN_TOPIC_OR_PARTITION, ("u", 5): m.UNKNOWN_TOPIC_OR_PARTITION})
    assert [k for k, v, _ in c.gc.fetch_offsets("g", None)[1]] == [("t", 0), ("u", 1)]
    assert delete("nobody", [("u", 1)]) == (m.GROUP_ID_NOT_FOUND, {})
    c.gc.join("k", "", "x", "", SESSION, SESSION, "connect", (("v1", b""),), False, 0,
              lambda r: c.answers.__setitem__("k", r))
    assert c.answers["k"].error == m.NONE
    assert delete("k", [("u", 1)]) == (m.NON_EMPTY_GROUP, {})
    assert c.gc.leave("g", a, 1) == m.NONE
    assert delete("g", [("t", 0)]) == (m.NONE, {("t", 0): m.NONE}), "Empty: any topic"
    assert [k for k, v, _ in c.gc.fetch_offsets("g", None)[1]] == [("u", 1)]
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk, img=img)
    assert [k for k, v, _ in again.gc.fetch_offsets("g", None)[1]] == [("u", 1)]


def test_a_group_whose_deletion_was_not_written_is_back_only_where_it_is_still_coordinated():
    """Both replicas in the ISR, so a write waits for the follower. A deletion that times out
    puts the group back, Empty (the coordinator still owns the partition in the same epoch);
    one cut short by a lost leadership leaves it to the next coordinator, which loads it
    from the log."""
    c = Coordinator(img=image(isr=(1, 2)))
    committed = []
    c.gc.commit_offsets("g", "", -1, {("t", 0): (5, 0, "")}, 0, committed.append)
    c.gc.poll(OPTIONS.offsets_commit_timeout_ms, False)
    assert committed == [{("t", 0): m.REQUEST_TIMED_OUT}], "the follower never fetched"
    before = c.gc.groups["g"]  # (a simple group, made by the commit)
    out = []
    c.gc.delete_groups(["g"], 10, out.append)
    assert out == [] and "g" not in c.gc.groups, "gone at once, answered once written"
    c.gc.poll(10 + OPTIONS.offsets_commit_timeout_ms, False)
    assert out == [{"g": m.REQUEST_TIMED_OUT}]
    assert c.gc.groups["g"] is before and before.state == EMPTY, "back as it was"
    c.gc.delete_groups(["g"], 20_000, out.append)
    c.rm.apply_image(image(leader=2, epoch=1, isr=(1, 2)), None, 20_001)
    c.gc.poll(20_001, True)
    assert out[-1] == {"g": m.NOT_COORDINATOR}
    assert "g" not in c.gc.groups, "no longer ours: the next coordinator loads it"


def share_hb(c, member="", epoch=0, subscribed=("t",), now=0, group="sg"):
    from node_image.broker.share_coordinator import ShareHeartbeat
    out = []
    c.gc.share_heartbeat(ShareHeartbeat(group, member, epoch, None, subscribed, "cli", "/h"),
                         now, out.append)
    [a] = out  # the group's partition has one replica: a write commits at once
    return a


def test_share_group_membership_is_written_and_a_coordinator_taking_over_keeps_the_epochs():
    """As Kafka's coordinator: a share group's epoch, members, targets and each member's
    current epoch go to ``__consumer_offsets`` under Kafka's record types 9-14; a coordinator
    loading the partition has the same group, so a member goes on with its epoch (no
    UNKNOWN_MEMBER_ID, no new group epoch), a member that left stays gone, and one the log
    never had is unknown."""
    c = Coordinator()
    kinds = set()
    write = c.gc.log.write

    def kept(pid, entries, now, done):
        kinds.update(gm.read_key(k).kind for k, _ in entries)
        write(pid, entries, now, done)
    c.gc.log.write = kept
    a = share_hb(c, "A")
    b = share_hb(c, "B")
    x = share_hb(c, "X")
    assert (a.error, b.error, x.error) == (m.NONE, m.NONE, m.NONE)
    a, b = share_hb(c, "A", a.member_epoch, None, 100), share_hb(c, "B", b.member_epoch, None, 100)
    assert share_hb(c, "X", -1, None, 200).member_epoch == -1
    a, b = share_hb(c, "A", a.member_epoch, None, 300), share_hb(c, "B", b.member_epoch, None, 300)
    group = c.gc.share_groups["sg"]
    assert a.member_epoch == b.member_epoch == group.epoch == 4
    assigned = {mid: mb.assignment for mid, mb in group.members.items()}
    assert sorted(assigned) == ["A", "B"]
    assert sorted(p for parts in assigned.values() for ps in parts.values() for p in ps) == \
        [0, 1, 2, 3]
    assert kinds == {9, 10, 11, 12, 13, 14}, kinds
    c.rm.checkpoint_hws()
    again = Coordinator(disk=c.disk, now=5_000)
    loaded = again.gc.share_groups["sg"]
    assert loaded.epoch == 4 and loaded.partitions == group.partitions
    assert {mid: (mb.epoch, mb.previous_epoch, mb.assignment, mb.subscribed, mb.client_id)
            for mid, mb in loaded.members.items()} == \
        {mid: (mb.epoch, mb.previous_epoch, mb.assignment, mb.subscribed, mb.client_id)
         for mid, mb in group.members.items()}
    kept = share_hb(again, "A", a.member_epoch, None, 6_000)
    assert (kept.error, kept.member_epoch, kept.assignment) == (m.NONE, 4, None)
    assert any("member A goes on in epoch 4" in str(e) for e in again.events)
    assert not any("joined" in str(e) for e in again.events)
    assert share_hb(again, "X", 3, None, 6_000).error == m.UNKNOWN_MEMBER_ID
    # the sessions started again at the load: B, silent since, is removed after one
    gone = share_hb(again, "A", 4, None, 5_000 + 45_001 + 1)
    assert gone.member_epoch == 5 and sorted(again.gc.share_groups["sg"].members) == ["A"]


def test_a_share_record_that_cannot_be_read_names_its_kind_group_and_member():
    from node_image.broker import share_records as sr
    from node_image.broker.share_coordinator import ShareGroup, ShareMember
    key = gm.read_key(gm.consumer_key(gm.SHARE_MEMBER, "sg", "M1"))
    assert key == gm.ShareKey(10, "sg", "M1")
    with pytest.raises(gm.GroupRecordError,
                       match="share member metadata of group 'sg' member M1: cannot read"):
        sr.fold(ShareGroup("sg"), key, b"\x00\x00\xff", ShareMember)
    # Kafka's bytes: the key is its record type and strings, the value its version and a
    # flexible struct (ShareGroupMetadataValue: epoch, metadata hash, no tagged fields)
    assert sr.group_epoch("g", 7) == (b"\x00\x0b\x00\x01g", b"\x00\x00" + (7).to_bytes(4, "big")
                                      + bytes(8) + b"\x00")
    assert sr.member_gone("g", "m")[0] == (b"\x00\x0e\x00\x01g\x00\x01m", None)
