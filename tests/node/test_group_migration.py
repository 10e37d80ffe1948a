"""Online migration between the classic protocol and KIP-848's, driven without I/O (the
harness of ``test_group_coordinator``): a classic group upgraded when a consumer-protocol
member joins, its classic members reconciled through JoinGroup / SyncGroup / Heartbeat
without a partition held twice, the group classic again when the last consumer-protocol
member leaves, each step read back from the log; the policy refusing either way; and the
consumer protocol's bytes read and written as Kafka's ConsumerProtocol does."""
import random
import struct
from dataclasses import replace

import pytest

from node_image import messages as m
from node_image.broker import consumer_protocol as cp
from node_image.broker.consumer_coordinator import Heartbeat
from node_image.broker.consumer_group import STABLE, UNREVOKED
from node_image.broker.group_state import PREPARING
from node_image.config import ConfigError, load_config
from test_group_coordinator import OPTIONS, SESSION, Coordinator


def subscription(*topics, owned=None, version=None):
    """A ConsumerProtocolSubscription: v0, or v1 with the partitions it still owns."""
    version = (0 if owned is None else 1) if version is None else version
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    out += struct.pack(">i", -1)
    if version >= 1:
        owned = owned or {}
        out += struct.pack(">i", len(owned))
        for t, ps in sorted(owned.items()):
            out += struct.pack(">h", len(t)) + t.encode() + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    if version >= 2:
        out += struct.pack(">i", -1)
    if version >= 3:
        out += struct.pack(">h", -1)
    return out


class Classic:
    """One classic member, as a consumer drives it (protocol ``range``, topic ``t``)."""

    def __init__(self, c, name, protocol="range"):
        self.c, self.name, self.protocol = c, name, protocol
        self.member_id, self.generation = "", -1

    def join(self, owned=None, now=0):
        out = []
        self.c.gc.join("g", self.member_id, self.name, "/h", SESSION, 60_000, "consumer",
                       ((self.protocol, subscription("t", owned=owned)),), True, now, out.append)
        if out and out[0].error == m.MEMBER_ID_REQUIRED:
            self.member_id = out[0].member_id
            return self.join(owned, now)
        if out and out[0].error == m.NONE:
            self.generation = out[0].generation
        return out[0] if out else None

    def sync(self, assignments=None, now=0, **kw):
        out = []
        self.c.gc.sync("g", self.generation, self.member_id, assignments or {}, now,
                       lambda e, a: out.append((e, a)), **kw)
        return out[0] if out else None

    def heartbeat(self, now=0):
        return self.c.gc.heartbeat("g", self.generation, self.member_id, now)


def hb(c, member, epoch, owned=None, now=0):
    out = []
    c.gc.consumer_heartbeat(Heartbeat(
        "g", member, epoch, rebalance_timeout_ms=60_000 if epoch == 0 else -1,
        subscribed=("t",) if epoch == 0 else None,
        owned={} if epoch == 0 else owned), now, out.append)
    return out[0] if out else None


def tid(c):
    return c.rm.image.topics["t"].topic_id


def classic_pair(c):
    """a (leader) and b in generation 2 of a classic group, with t-0,1 and t-2,3."""
    a, b = Classic(c, "a"), Classic(c, "b")
    assert a.join().generation == 1
    assert b.join() is None, "b waits for a"
    assert a.heartbeat() == m.REBALANCE_IN_PROGRESS
    ra = a.join()
    assert ra.generation == 2 and c.answers == {}
    b.generation = 2
    assert b.sync() is None
    assert a.sync({a.member_id: cp.encode_assignment({"t": {0, 1}}),
                   b.member_id: cp.encode_assignment({"t": {2, 3}})}) == (
        m.NONE, cp.encode_assignment({"t": {0, 1}}))
    return a, b


def holders(c):
    """partition -> the members holding it (assigned or still revoking)."""
    out = {}
    for mb in c.gc.groups["g"].consumer.members.values():
        for parts in (mb.current.assigned, mb.current.revoking):
            for p in parts.get(tid(c), ()):
                out.setdefault(p, []).append(mb.member_id)
    return out


def test_a_consumer_protocol_member_upgrades_a_classic_group_and_its_members_hand_over():
    c = Coordinator()
    a, b = classic_pair(c)
    x = hb(c, "X", 0)
    assert (x.error, x.member_epoch, x.assignment) == (m.NONE, 3, {}), \
        "upgraded at generation 2; X joins at epoch 3 with nothing free yet"
    g = c.gc.groups["g"]
    assert g.consumer is not None and g.protocol_type == "consumer" and not g.members
    cg = g.consumer
    assert cg.members[a.member_id].current.assigned == {tid(c): frozenset({0, 1})}
    assert cg.members[a.member_id].classic.session_timeout_ms == SESSION
    assert any("upgraded from the classic protocol at generation 2" in str(e) for e in c.events)

    assert a.heartbeat() == m.REBALANCE_IN_PROGRESS, "the group epoch is ahead of a's"
    assert a.sync() == (m.REBALANCE_IN_PROGRESS, b"")
    r = a.join()  # eager: it gave up everything before rejoining
    assert (r.error, r.generation, r.protocol, r.leader, r.members) == (m.NONE, 3, "range", "", ())
    error, data = a.sync(protocol_type="consumer", protocol_name="range")
    assert error == m.NONE
    kept_a = cp.decode_assignment(data)
    assert a.heartbeat() == m.NONE
    assert b.join().generation == 3
    kept_b = cp.decode_assignment(b.sync()[1])
    x = hb(c, "X", 3, owned={})
    got_x = {p for p in x.assignment.get(tid(c), ())}
    assert len(got_x) == 1 and len(kept_a["t"]) + len(kept_b["t"]) == 3
    assert set(kept_a["t"]) | set(kept_b["t"]) | got_x == {0, 1, 2, 3}
    assert all(len(v) == 1 for v in holders(c).values()), holders(c)
    assert cg.state() == "Stable"

    # a classic member commits with its member epoch as the generation
    assert set(c.commit(a.member_id, 3, {("t", 0): (5, -1, "")}).values()) == {m.NONE}
    assert set(c.commit(a.member_id, 2, {("t", 0): (5, -1, "")}).values()) == {
        m.ILLEGAL_GENERATION}

    reloaded = Coordinator(disk=c.disk).gc.groups["g"].consumer
    assert reloaded.members[a.member_id].classic == cg.members[a.member_id].classic
    assert {mid: mb.current for mid, mb in reloaded.members.items()} == {
        mid: mb.current for mid, mb in cg.members.items()}


def test_the_last_consumer_protocol_member_leaving_makes_the_group_classic_again():
    c = Coordinator()
    a, b = classic_pair(c)
    hb(c, "X", 0)
    for mb in (a, b):
        mb.join()
        mb.sync()
    x = hb(c, "X", 3, owned={})
    assert x.assignment
    left = hb(c, "X", -1)
    assert (left.error, left.member_epoch) == (m.NONE, -1)
    g = c.gc.groups["g"]
    assert g.consumer is None and g.state == PREPARING and g.generation == 3, \
        "classic again at the group epoch, rebalancing"
    assert any("downgraded to the classic protocol" in str(e) for e in c.events)
    assert a.heartbeat() == m.REBALANCE_IN_PROGRESS
    assert a.join() is None, "a waits for b to rejoin"
    assert b.join() is not None
    ra = c.gc.groups["g"]
    assert ra.generation == 4 and ra.leader in (a.member_id, b.member_id)
    assert Coordinator(disk=c.disk).gc.groups["g"].consumer is None, \
        "the consumer group's records are tombstoned and the classic group's written"
    assert Coordinator(disk=c.disk).gc.groups["g"].protocol_type == "consumer"


def test_a_classic_static_member_replacing_the_last_consumer_protocol_one_downgrades_the_group():
    """X (static, instance i) is the group's only consumer-protocol member; a classic consumer
    restarted with instance id i and no member id takes its place: the group becomes classic
    without X, and the newcomer joins it as a static member beside a and b."""
    c = Coordinator()
    a, b = classic_pair(c)
    out = []
    c.gc.consumer_heartbeat(Heartbeat("g", "X", 0, instance_id="i", rebalance_timeout_ms=60_000,
                                      subscribed=("t",), owned={}), 0, out.append)
    assert out[0].error == m.NONE
    for mb in (a, b):
        mb.join()
        mb.sync()
    got = []
    c.gc.join("g", "", "y", "/h", SESSION, 60_000, "consumer",
              (("range", subscription("t")),), True, 0, got.append, instance_id="i")
    g = c.gc.groups["g"]
    assert g.consumer is None and g.state == PREPARING, "classic again, rebalancing"
    assert any("downgraded to the classic protocol" in str(e) and "replaced by a classic "
               "static member (i)" in str(e) for e in c.events), c.events
    assert "X" not in g.members and len(g.members) == 3
    y = next(mb for mb in g.members.values() if mb.instance_id == "i")
    assert y.member_id.startswith("i-") and not got, "y waits in the rebalance"
    a.join(), b.join()
    assert got and got[0].error == m.NONE and got[0].member_id == y.member_id
    assert g.generation == 4 and not c.gc.groups["g"].consumer
    assert Coordinator(disk=c.disk).gc.groups["g"].consumer is None, "X's records tombstoned"
    # a consumer-protocol member's place taken while classic and consumer-protocol members
    # both remain: no downgrade, the newcomer is a classic member of the consumer group
    c = Coordinator()
    a, b = classic_pair(c)
    hb(c, "Z", 0)
    c.gc.consumer_heartbeat(Heartbeat("g", "X", 0, instance_id="i", rebalance_timeout_ms=60_000,
                                      subscribed=("t",), owned={}), 0, lambda r: None)
    got = []
    c.gc.join("g", "", "y", "/h", SESSION, 60_000, "consumer",
              (("range", subscription("t")),), True, 0, got.append, instance_id="i")
    g = c.gc.groups["g"]
    assert g.consumer is not None and "X" not in g.consumer.members
    assert got and got[0].error == m.NONE
    assert g.consumer.members[got[0].member_id].classic is not None


def test_a_cooperative_member_revokes_before_another_is_given_its_partition():
    c = Coordinator()
    a, b = classic_pair(c)
    hb(c, "X", 0)
    cg = c.gc.groups["g"].consumer
    held = {a: [0, 1], b: [2, 3]}
    loser = next(x for x in (a, b) if len(cg.target[x.member_id].get(tid(c), ())) < 2)
    r = loser.join(owned={"t": held[loser]})  # cooperative: still owns what it had
    assert r.generation == 2, "it must first revoke: its epoch stays"
    mb = cg.members[loser.member_id]
    assert mb.current.state == UNREVOKED and mb.current.revoking
    error, data = loser.sync()
    assert error == m.NONE
    kept = cp.decode_assignment(data)["t"]
    assert len(kept) == 1, "the assignment leaves out what it must revoke"
    x = hb(c, "X", 3, owned={})
    assert not (x.assignment or {}).get(tid(c)), "X waits: the partition is not revoked yet"
    assert loser.heartbeat() == m.REBALANCE_IN_PROGRESS, "it must rejoin once revoked"
    r = loser.join(owned={"t": sorted(kept)})
    assert r.generation == 3 and cg.members[loser.member_id].current.state == STABLE
    x = hb(c, "X", 3, owned={})
    assert len(x.assignment[tid(c)]) == 1, "released: X has it now"
    assert all(len(v) == 1 for v in holders(c).values()), holders(c)


def test_a_classic_member_that_does_not_rejoin_in_its_rebalance_timeout_is_removed():
    c = Coordinator()
    a, b = classic_pair(c)
    hb(c, "X", 0)
    b.join(now=500)
    b.sync(now=500)
    x_epoch = 3
    for now in range(1_000, 70_000, 5_000):  # a heartbeats but never rejoins
        assert a.heartbeat(now=now) == m.REBALANCE_IN_PROGRESS
        assert b.heartbeat(now=now) == m.NONE
        x = hb(c, "X", x_epoch, owned={}, now=now)
        x_epoch = x.member_epoch
        c.gc.poll(now + 1, False)
        if a.member_id not in c.gc.groups["g"].consumer.members:
            break
    assert now == 61_000, "removed at its rebalance timeout, not before"
    assert set(c.gc.groups["g"].consumer.members) == {b.member_id, "X"}
    assert any("did not rejoin or sync within its rebalance timeout" in str(e)
               for e in c.events)
    assert a.heartbeat(now=now) == m.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_a_policy_without_upgrade_refuses_the_consumer_protocol_member(policy):
    c = Coordinator(options=replace(OPTIONS, group_consumer_migration_policy=policy))
    classic_pair(c)
    x = hb(c, "X", 0)
    assert x.error == m.GROUP_ID_NOT_FOUND and "online upgrade is disabled" in x.message
    assert c.gc.groups["g"].consumer is None


def test_a_policy_without_downgrade_keeps_classic_members_in_the_consumer_group():
    c = Coordinator(options=replace(OPTIONS, group_consumer_migration_policy="upgrade"))
    a, b = classic_pair(c)
    hb(c, "X", 0)
    assert hb(c, "X", -1).error == m.NONE
    cg = c.gc.groups["g"].consumer
    assert cg is not None and set(cg.members) == {a.member_id, b.member_id}


def test_classic_members_refused_as_kafka_refuses_them():
    c = Coordinator()
    a, b = classic_pair(c)
    hb(c, "X", 0)
    other = Classic(c, "z", protocol="roundrobin")
    assert other.join().error == m.INCONSISTENT_GROUP_PROTOCOL, "no protocol all classic share"
    assert c.gc.heartbeat("g", 3, "X", 0) == m.UNKNOWN_MEMBER_ID, "X speaks the new protocol"
    assert c.gc.heartbeat("g", 9, a.member_id, 0) == m.ILLEGAL_GENERATION
    assert a.sync(protocol_name="roundrobin")[0] in (m.INCONSISTENT_GROUP_PROTOCOL,
                                                      m.REBALANCE_IN_PROGRESS)
    assert c.gc.leave("g", a.member_id, 0) == m.NONE
    assert a.member_id not in c.gc.groups["g"].consumer.members
    assert c.gc.leave("g", a.member_id, 0) == m.UNKNOWN_MEMBER_ID


def test_a_classic_group_with_unreadable_subscriptions_is_not_upgraded():
    c = Coordinator()
    c.join("a", c.join("a").member_id)  # the harness's members send b"suba" as metadata
    x = hb(c, "X", 0)
    assert x.error == m.GROUP_ID_NOT_FOUND and "malformed" in x.message
    assert c.gc.groups["g"].consumer is None


def test_consumer_protocol_bytes_as_kafka_writes_them():
    # v3 subscription: topics, user data, owned partitions, generation, rack
    data = (struct.pack(">hi", 3, 2) + b"\x00\x01a" + b"\x00\x01b" + struct.pack(">i", 2) + b"ud"
            + struct.pack(">i", 1) + b"\x00\x01a" + struct.pack(">iii", 2, 0, 3)
            + struct.pack(">i", 7) + b"\x00\x02r1")
    s = cp.decode_subscription(data)
    assert (s.version, s.topics, s.owned, s.rack_id) == (3, ("a", "b"), {"a": frozenset({0, 3})},
                                                         "r1")
    assert cp.decode_subscription(data + b"more fields of v4").topics == ("a", "b")
    for cut in range(2, len(data) - 1):
        if cut in (14, 16, 18, 20):  # ends where v0 or the user data ends: readable prefixes
            continue
        with pytest.raises(cp.ConsumerProtocolError, match="ConsumerProtocolSubscription"):
            cp.decode_subscription(data[:cut])
    blob = cp.encode_assignment({"b": {2, 1}, "a": {0}}, version=1)
    assert blob == (struct.pack(">hi", 1, 2) + b"\x00\x01a" + struct.pack(">ii", 1, 0)
                    + b"\x00\x01b" + struct.pack(">iii", 2, 1, 2) + struct.pack(">i", -1))
    assert cp.decode_assignment(blob) == {"a": frozenset({0}), "b": frozenset({1, 2})}
    assert cp.decode_assignment(b"") == {}
    assert cp.subscription_version(b"") == 0


def test_the_migration_policy_is_checked_in_the_config():
    base = {"node.id": "1", "controller.quorum.voters": "1@h:1", "log.dirs": "/d",
            "process.roles": "broker,controller",
            "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093"}
    cfg = load_config({**base, "group.consumer.migration.policy": "Upgrade"})
    assert cfg.broker.group_consumer_migration_policy == "upgrade"
    assert load_config(base).broker.group_consumer_migration_policy == "bidirectional"
    with pytest.raises(ConfigError, match="group.consumer.migration.policy: 'sideways'"):
        load_config({**base, "group.consumer.migration.policy": "sideways"})


# ---------------------------------------------------------------- clients under chaos

class Mixed:
    """One client of either protocol, as librdkafka behaves: a classic one is eager (it gives
    up everything as soon as it is told to rejoin, before it joins again; its leader deals
    the partitions out round-robin); a consumer-protocol one owns what its last answer
    assigned. Either gives up everything after a session without a successful answer."""

    def __init__(self, name, protocol):
        self.name, self.protocol = name, protocol
        self.member_id, self.generation, self.epoch = "", -1, 0
        self.owned, self.ok_at, self.joined, self.waiting = set(), 0, False, False

    def reset(self, forget_id=False):
        self.owned, self.joined, self.waiting, self.epoch = set(), False, False, 0
        if forget_id:
            self.member_id = ""

    def step(self, world, now):
        if self.protocol == "consumer":
            return self._heartbeat848(world, now)
        if self.waiting:
            return
        if not self.joined:
            return self._join(world, now)
        error = world.c.gc.heartbeat("g", self.generation, self.member_id, now)
        if error in (m.NONE, m.REBALANCE_IN_PROGRESS):
            self.ok_at = now
        if error != m.NONE:
            self.reset(forget_id=error == m.UNKNOWN_MEMBER_ID)

    def _join(self, world, now):
        self.owned, self.waiting = set(), True

        def on_join(r):
            self.waiting = False
            if r.error == m.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                return self._join(world, now)
            if r.error != m.NONE:
                return self.reset(forget_id=r.error == m.UNKNOWN_MEMBER_ID)
            self.generation, self.ok_at = r.generation, now
            deal = {}
            if r.members:  # the leader of a classic generation
                ids = sorted(mid for mid, _ in r.members)
                deal = {mid: cp.encode_assignment({"t": set(range(len(ids) and 4)[i::len(ids)])})
                        for i, mid in enumerate(ids)}
            self.waiting = True
            world.c.gc.sync("g", self.generation, self.member_id, deal, now, on_sync)

        def on_sync(error, data):
            self.waiting = False
            if error != m.NONE:
                return self.reset(forget_id=error == m.UNKNOWN_MEMBER_ID)
            self.owned = set(cp.decode_assignment(data).get("t", ()))
            self.joined, self.ok_at = True, now
        world.c.gc.join("g", self.member_id, self.name, "/h", SESSION, 60_000, "consumer",
                        (("range", subscription("t")),), True, now, on_join)

    def _heartbeat848(self, world, now):
        r = hb(world.c, self.name, self.epoch if self.joined else 0,
               owned={world.tid: frozenset(self.owned)} if self.joined else {}, now=now)
        if r is None:
            return
        if r.error != m.NONE:
            return self.reset()
        self.epoch, self.joined, self.ok_at = r.member_epoch, True, now
        if r.assignment is not None:
            self.owned = set(r.assignment.get(world.tid, ()))

    def leave(self, world, now):
        if self.protocol == "consumer":
            hb(world.c, self.name, -1, now=now)
        else:
            world.c.gc.leave("g", self.member_id, now)
        self.reset(forget_id=True)


class World:
    """The coordinator of the moment, and every event any of them logged."""

    def __init__(self):
        self.events = []
        self.c = self.coordinator(Coordinator())
        self.tid = tid(self.c)

    def coordinator(self, c):
        c.gc._on_event = self.events.append
        return c


def schedule(seed):
    """Four clients (two classic, one of the consumer protocol, one either way) under a
    random schedule of joins, heartbeats, departures, crashes and coordinator moves, then
    left to settle; asserts that no partition is ever owned by two at once and that every
    partition ends owned once. Returns the coordinators' events."""
    rng = random.Random(seed)
    world = World()
    kinds = ["classic", "classic", "consumer", rng.choice(["classic", "consumer"])]
    clients = [Mixed(n, k) for n, k in zip("ABCD", kinds)]
    sessions = {"classic": SESSION,
                "consumer": world.c.gc.options.group_consumer_session_timeout_ms}
    now = 0

    def check(where):
        seen = {}
        for cl in clients:
            for p in cl.owned:
                assert p not in seen, (f"seed {seed}: t-{p} owned by {seen[p]} and {cl.name} "
                                       f"at {now} ({where})")
                seen[p] = cl.name

    def lose_expired():
        for cl in clients:
            if cl.joined and now - cl.ok_at >= sessions[cl.protocol]:
                cl.reset()
    for _ in range(300):
        now += rng.randint(1, 3_000)
        lose_expired()
        cl = rng.choice(clients)
        action = rng.random()
        if action < 0.03:  # the coordinator moves: the next one loads the log
            world.c = world.coordinator(Coordinator(disk=world.c.disk, now=now))
            for x in clients:
                if x.waiting:  # its parked request is answered NOT_COORDINATOR
                    x.reset()
            continue
        world.c.gc.poll(now, False)
        if action < 0.08 and cl.joined:
            cl.leave(world, now)
        elif action < 0.1:  # it crashes and stays away a while
            cl.reset()
            now += rng.choice([0, 50_000])
            lose_expired()
            world.c.gc.poll(now, False)
        else:
            cl.step(world, now)
        check("chaos")
    for _ in range(150):  # then everyone stays: the group settles
        now += 1_000
        lose_expired()
        world.c.gc.poll(now, False)
        for cl in clients:
            cl.step(world, now)
            check("settling")
    owned = sorted(p for cl in clients for p in cl.owned)
    assert owned == [0, 1, 2, 3], (seed, owned, [(x.name, x.owned) for x in clients])
    return "\n".join(map(str, world.events))


@pytest.mark.parametrize("seed", range(30))
def test_no_partition_is_ever_owned_twice_while_groups_move_between_protocols(seed):
    schedule(seed)


def test_the_random_schedules_do_move_groups_both_ways():
    """The schedules above are worth something only if groups do change protocol in them."""
    text = "".join(schedule(seed) for seed in range(30))
    assert text.count("upgraded from the classic protocol") >= 5
    assert text.count("downgraded to the classic protocol") >= 5
