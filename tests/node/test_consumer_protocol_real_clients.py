"""KIP-848's consumer group protocol (``group.protocol=consumer``) with librdkafka on three
real node processes (127.0.0.1-3).

Two consumers share a group through ConsumerGroupHeartbeat: the coordinator assigns the
partitions (the second member gets its share only once the first has given it up), the
members commit under their member epochs, and when the coordinator's node is killed the
group moves to the partition's new leader with its epochs and assignments read back from
the log: the members go on without rejoining. A member that leaves hands its partitions to
the other, and one joining later starts at the committed offsets. ListGroups (by type) and
ConsumerGroupDescribe show the group as librdkafka's admin client asks for it. Static members
(``group.instance.id``) and regular-expression subscriptions as librdkafka sends them have a
test of their own. librdkafka needs topic
ids for this protocol, so the nodes advertise Metadata v12
(``chaoskraft.metadata.max.version``).
"""
import threading
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaException
from confluent_kafka.admin import AdminClient

from conftest import wait_for
from group_clients import committed, coordinator, create_topic, produce, reads_only_news

GROUP = "g848"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path):
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=3, brokers=True, extra_config={
        "chaoskraft.metadata.max.version": "12",
        "group.consumer.heartbeat.interval.ms": "1000"})
    c.start_all()
    try:
        yield c
    finally:
        c.close()




def consumer(cluster):
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": GROUP,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["t"])
    return c


class Member(threading.Thread):
    """One consumer: polls, records what it read per partition, commits after each batch."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.c = consumer(cluster)
        self.read = []  # (partition, offset, value)
        self.assigned = set()
        self.stop = threading.Event()
        self.errors = []

    def run(self):
        while not self.stop.is_set():
            try:
                msgs = [x for x in self.c.consume(100, 0.3) if x.error() is None]
                self.read += [(x.partition(), x.offset(), x.value().decode()) for x in msgs]
                self.assigned = {tp.partition for tp in self.c.assignment()}
                if msgs:
                    self.c.commit(asynchronous=False)
            except KafkaException as exc:  # a commit refused during a move or a failover
                self.errors.append(exc.args[0])
                if exc.args[0].fatal():
                    raise
                time.sleep(0.2)
        self.c.close()  # leaves the group (member epoch -1)






def listed(cluster):
    """(type, state) of our group as ListGroups says, asked for consumer-protocol groups."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    result = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10)
    return {(g.type, g.state) for g in result.valid if g.group_id == GROUP}


def described(cluster):
    """What librdkafka's describe_consumer_groups (ConsumerGroupDescribe) says of our group:
    (type, state, {member id: its partitions})."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    d = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
    return d.type, d.state, {mb.member_id: {tp.partition for tp in mb.assignment.topic_partitions}
                             for mb in d.members}


def test_a_consumer_protocol_group_survives_its_coordinators_death(cluster):
    create_topic(cluster, PARTITIONS)
    first = [f"a{i}" for i in range(600)]
    produce(cluster, first, PARTITIONS)
    members = [Member(cluster)]
    members[0].start()
    victim = None
    try:
        wait_for("the first member with every partition", lambda: members[0].assigned == set(
            range(PARTITIONS)), timeout_s=60)
        members.append(Member(cluster))
        members[1].start()
        wait_for("the partitions shared by both members", lambda: all(
            mb.assigned for mb in members) and len(members[0].assigned) + len(
            members[1].assigned) == PARTITIONS, timeout_s=60)
        assert members[0].assigned.isdisjoint(members[1].assigned)
        wait_for("every record of the first round read", lambda: set(first) <= {
            v for mb in members for _, _, v in mb.read}, timeout_s=90)
        before = [set(mb.assigned) for mb in members]
        kind, state, assigned = wait_for("the group described as stable", lambda: (
            lambda d: d[1] == ConsumerGroupState.STABLE and d)(described(cluster)))
        assert kind == ConsumerGroupType.CONSUMER
        assert sorted(map(sorted, assigned.values())) == sorted(map(sorted, before))
        victim = wait_for("the group's coordinator", lambda: coordinator(cluster, GROUP))
        cluster.kill(victim)
        second = [f"b{i}" for i in range(600)]
        produce(cluster, second, PARTITIONS)
        wait_for("every record of both rounds read", lambda: set(first + second) <= {
            v for mb in members for _, _, v in mb.read}, timeout_s=120)
        wait_for("a new coordinator", lambda: coordinator(cluster, GROUP) not in (None, victim))
        wait_for("commits up to the end of every partition", lambda: all(
            c == end for c, end in committed(cluster, GROUP, PARTITIONS).values()), timeout_s=90)
        assert [mb.assigned for mb in members] == before, \
            "the members kept their partitions across the coordinator's move"
        assert listed(cluster) == {(ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)}
        members[0].stop.set()  # leaves: the other member takes everything
        members[0].join(30)
        wait_for("the remaining member with every partition", lambda: members[1].assigned == set(
            range(PARTITIONS)), timeout_s=60)
    finally:
        for mb in members:
            mb.stop.set()
        for mb in members:
            mb.join(30)
    for mb in members:  # each partition read in offset order by each member
        for p in range(PARTITIONS):
            offsets = [o for q, o, _ in mb.read if q == p]
            assert offsets == sorted(offsets), (p, offsets[:20])
    assert all(not e.fatal() for mb in members for e in mb.errors), [
        e for mb in members for e in mb.errors]
    cluster.start(victim)
    late = consumer(cluster)  # joins later: starts at the committed offsets, reads only news
    got = reads_only_news(cluster, late, 30, PARTITIONS)
    assert sorted(got) == sorted(f"c{i}" for i in range(30)), got[:30]
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs
    assert f"group {GROUP}: epoch" in logs and "loaded 1 group(s)" in logs, \
        "the new coordinator rebuilt the group from the log"


def poll(consumers, until, what, timeout_s=60, read=None):
    """Poll every consumer in turn (librdkafka moves its group membership forward only while
    polled) until ``until()`` holds, adding each record's value to ``read``."""
    deadline = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for c in consumers:
            for x in c.consume(100, 0.2):
                if x.error() is not None:
                    assert not x.error().fatal(), f"{what}: {x.error()}"
                elif read is not None:
                    read.append(x.value().decode())


def test_static_members_and_regex_subscriptions_as_librdkafka_sends_them(cluster):
    """A static member (group.instance.id) that closes keeps its partitions in the group
    (epoch -2) and a new consumer with the same instance id takes them over; one whose id is
    in use is refused (UNRELEASED_INSTANCE_ID). A regex subscription reads every matching
    topic, also one created after it subscribed, and nothing else."""
    create_topic(cluster, 4, topic="ra")
    create_topic(cluster, 2, topic="xa")

    def static(instance):
        c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "gs",
                      "group.protocol": "consumer", "group.instance.id": instance,
                      "auto.offset.reset": "earliest"})
        c.subscribe(["ra"])
        return c

    def parts(c):
        return {tp.partition for tp in c.assignment()}

    def members():
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})  # kept till answered
        d = admin.describe_consumer_groups(["gs"])["gs"].result(10)
        return {mb.group_instance_id: (mb.member_id, {
            tp.partition for tp in mb.assignment.topic_partitions}) for mb in d.members}

    s1, s2 = static("i1"), static("i2")
    poll([s1, s2], lambda: parts(s1) and parts(s2) and len(parts(s1) | parts(s2)) == 4,
         "both static members with a share of ra")
    first, second = parts(s1), parts(s2)
    wait_for("the group described with both members", lambda: members() == {
        "i1": (members()["i1"][0], first), "i2": (members()["i2"][0], second)})
    old_id = members()["i1"][0]

    def said(text):
        return any(text in cluster.log_path(i).read_text() for i in (1, 2, 3))
    s1.close()
    wait_for("i1's leave (epoch -2) taken", lambda: said(f"static member {old_id} (i1) left"))
    assert members()["i1"] == (old_id, first), "a static member that left keeps its partitions"
    s1b = static("i1")
    poll([s1b, s2], lambda: parts(s1b) == first, "the new i1 with the old one's partitions")
    assert parts(s2) == second
    now = members()
    assert now["i1"][0] != old_id and now["i1"][1] == first
    assert said(f"(i1) replaces {old_id}") and not said("group gs: epoch 3"), \
        "taken over without a new group epoch"
    dup = static("i2")  # librdkafka retries the refusal: the node says it refused
    poll([dup], lambda: said("with instance id i2 cannot join the group because the "
                             "instance id is owned by"), "the duplicate instance id refused")
    assert members() == now and not dup.assignment()
    dup.close()
    for c in (s1b, s2):
        c.close()

    produce(cluster, [f"ra{i}" for i in range(40)], 4, topic="ra")
    produce(cluster, [f"xa{i}" for i in range(10)], 2, topic="xa")
    r = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "gr",
                  "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    r.subscribe(["^r.*"])
    read = []
    poll([r], lambda: len(read) >= 40, "ra read through the regex", read=read)
    create_topic(cluster, 2, topic="rb")
    produce(cluster, [f"rb{i}" for i in range(10)], 2, topic="rb")
    poll([r], lambda: len(read) >= 50, "rb, created later, read too", read=read)
    poll([r], lambda: r.assignment() and {tp.topic for tp in r.assignment()} == {"ra", "rb"},
         "ra and rb assigned, xa not")
    r.close()
    assert sorted(read) == sorted([f"ra{i}" for i in range(40)] + [f"rb{i}" for i in range(10)])


def test_a_classic_static_member_taking_the_last_consumer_protocol_members_place_downgrades(
        cluster):
    """A classic consumer and a static consumer-protocol one (instance i1) share a group (the
    second upgraded it); the static one closes (epoch -2: its place kept) and a classic
    consumer restarted with instance id i1 joins in its place: the group is classic again
    and the two classic consumers share every partition."""
    create_topic(cluster, 4, topic="sd")

    def consumer(protocol, instance=None):
        conf = {"bootstrap.servers": cluster.bootstrap(), "group.id": "gd",
                "auto.offset.reset": "earliest", "group.protocol": protocol}
        if instance:
            conf["group.instance.id"] = instance
        c = Consumer(conf)
        c.subscribe(["sd"])
        return c

    def parts(c):
        return {tp.partition for tp in c.assignment()}

    def said(text):
        return any(text in cluster.log_path(i).read_text() for i in (1, 2, 3))
    classic = consumer("classic")
    poll([classic], lambda: len(parts(classic)) == 4, "the classic consumer alone")
    new = consumer("consumer", "i1")
    poll([classic, new], lambda: parts(classic) and parts(new)
         and len(parts(classic) | parts(new)) == 4, "the group upgraded and shared")
    assert said("group gd: upgraded from the classic protocol")
    new.close()
    wait_for("i1's leave (epoch -2) taken", lambda: said("(i1) left"))
    back = consumer("classic", "i1")
    poll([classic, back], lambda: parts(classic) and parts(back)
         and len(parts(classic) | parts(back)) == 4, "both classic consumers with a share")
    assert said("downgraded to the classic protocol") and said(
        "was replaced by a classic static member (i1)")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    d = admin.describe_consumer_groups(["gd"])["gd"].result(10)
    assert d.type == ConsumerGroupType.CLASSIC, d.type
    assert {mb.group_instance_id for mb in d.members} == {None, "i1"}
    for c in (classic, back):
        c.close()


@pytest.mark.parametrize("strategy", [pytest.param("roundrobin", marks=pytest.mark.nightly),
                                      "cooperative-sticky"])  # CI: the incremental one
def test_a_classic_group_upgraded_by_a_consumer_protocol_member_and_downgraded_again(
        cluster, strategy):
    """KIP-848's online migration as librdkafka drives it (confluent-kafka's own
    ``test_consumer_upgrade_downgrade``, made stricter): a classic consumer (eager or
    cooperative) holds all ten partitions; a ``group.protocol=consumer`` consumer joining
    turns the group into a consumer group where the classic one keeps five partitions and
    the new one gets the other five; the coordinator's node is killed (the new one reads the
    classic member back from the log); when the new consumer closes, the group is classic
    again with all ten partitions on the classic consumer. Every record written in each phase
    is read, no partition ever held by both at once."""
    topic, group, n = f"mig-{strategy}", f"mig-{strategy}", 10
    create_topic(cluster, n, topic=topic)
    common = {"bootstrap.servers": cluster.bootstrap(), "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": True,
              "auto.commit.interval.ms": 200}
    classic = Consumer({**common, "group.protocol": "classic", "session.timeout.ms": 10000,
                       "partition.assignment.strategy": strategy})
    classic.subscribe([topic])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})

    def kind():
        return admin.describe_consumer_groups([group])[group].result(10).type

    def parts(c):
        return {tp.partition for tp in c.assignment()}
    read = []
    overlaps = []

    def phase(consumers, label, want):
        def settled():
            held = [parts(c) for c in consumers]
            if len(consumers) == 2 and held[0] & held[1]:
                overlaps.append((label, held))
            return [len(h) for h in held] == want
        poll(consumers, settled, f"{label}: partitions {want}")
        values = [f"{label}-{i}" for i in range(50)]
        produce(cluster, values, n, topic=topic)
        poll(consumers, lambda: set(values) <= set(read), f"{label}: every record read",
             read=read)

    victim = None
    try:
        phase([classic], "classic", [10])
        assert kind() == ConsumerGroupType.CLASSIC
        modern = Consumer({**common, "group.protocol": "consumer"})
        modern.subscribe([topic])
        phase([classic, modern], "mixed", [5, 5])
        assert wait_for("the group described as a consumer group",
                        lambda: kind() == ConsumerGroupType.CONSUMER)
        victim = wait_for("the group's coordinator", lambda: coordinator(cluster, group))
        cluster.kill(victim)
        phase([classic, modern], "failover", [5, 5])
        modern.close()
        phase([classic], "downgraded", [10])
        assert wait_for("the group described as classic again",
                        lambda: kind() == ConsumerGroupType.CLASSIC)
    finally:
        classic.close()
        if victim is not None:
            cluster.start(victim)
    assert not overlaps, overlaps
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs
    assert f"group {group}: upgraded from the classic protocol" in logs
    assert f"group {group}: downgraded to the classic protocol" in logs
