"""Share groups (KIP-932) with librdkafka's share consumer (confluent-kafka's
``ShareConsumer``) on three real node processes.

Three consumers share a group on a topic of two partitions (so at least one partition is
read by two of them): every record is delivered, and, as they accept what they poll and
no lock runs out, to one consumer once. A consumer acknowledging explicitly gets the
records it released again, with a higher delivery count, and never the ones it accepted or
rejected; when it has released a record as often as ``group.share.delivery.count.limit``
allows, the record is archived, undelivered. ListGroups lists the group as a share group.
A read_committed share group never gets an aborted transaction's records. A new leader
of a partition reads the group's state back: nothing accepted is delivered again. A new
coordinator reads the group's membership back: its member goes on in its epoch.
The group's configs are set as Kafka's are
(IncrementalAlterConfigs on the GROUP resource). Share groups need topic ids, so the nodes
advertise Metadata v12 (``chaoskraft.metadata.max.version``).
"""
import threading
import time

import pytest
from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource)

from kafka.protocol.admin import DescribeConfigsRequest, ListGroupsRequest

from conftest import local_brokers, wait_for
from group_clients import coordinator, create_topic, produce
from node_clients import wire
from node_image import kafka_codec as kc
from node_image import messages as m

PARTITIONS = 2


@pytest.fixture
def cluster(tmp_path):
    with local_brokers(tmp_path, extra_config={"chaoskraft.metadata.max.version": "12",
                                               "group.share.delivery.count.limit": "3"}) as c:
        yield c


def earliest(cluster, group, **configs):
    """The group starts at the log's start (and takes ``configs``, dots as underscores)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    settings = {"share.auto.offset.reset": "earliest",
                **{k.replace("_", "."): v for k, v in configs.items()}}
    r = ConfigResource("GROUP", group, incremental_configs=[ConfigEntry(
        k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()])
    admin.incremental_alter_configs([r])[r].result(30)
    # each broker answers from its own metadata image, which follows the committed change
    # a moment later: the partitions' leaders must see it before the first ShareFetch
    D = DescribeConfigsRequest[4]

    def described(i):
        r = wire(cluster, cluster.host(i), kc.DESCRIBE_CONFIGS, 4, D(
            resources=[D.DescribeConfigsResource(resource_type=32, resource_name=group,
                                                 configuration_keys=None)],
            include_synonyms=False, include_documentation=False))
        return {c.name: c.value for c in r.results[0].configs}
    for i in cluster.ids:
        wait_for(f"node {i} describing the group's configs",
                 lambda i=i: all(described(i).get(k) == v for k, v in settings.items()))
    assert described(1)["share.record.lock.duration.ms"] == "30000"


def listed(cluster, types):
    """ListGroups v5 with a type filter, from every broker: (id, protocol type, state,
    type) rows."""
    rows = []
    for i in cluster.ids:
        r = wire(cluster, cluster.host(i), kc.LIST_GROUPS, 5, ListGroupsRequest[5](
            states_filter=[], types_filter=types))
        assert r.error_code == 0
        rows += [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups]
    return rows


def share_consumer(cluster, group, **extra):
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group, **extra})
    c.subscribe(["t"])
    return c


def test_three_share_consumers_split_two_partitions_and_each_record_is_read_once(cluster):
    create_topic(cluster, PARTITIONS)
    earliest(cluster, "sg")
    values = [f"v{i}" for i in range(600)]
    produce(cluster, values, PARTITIONS)
    read: list[list] = [[], [], []]
    errors: list = []
    done = threading.Event()

    def run(i):
        c = share_consumer(cluster, "sg")
        try:
            while not done.is_set():
                for msg in c.poll(0.5):
                    if msg.error() is not None:
                        errors.append(msg.error())
                        continue
                    read[i].append((msg.partition(), msg.offset(), msg.value().decode(),
                                    msg.delivery_count()))
        finally:
            c.close()
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for("600 records read", lambda: sum(map(len, read)) >= len(values),
                 timeout_s=90)
        assert ("sg", "share", "Stable", "share") in listed(cluster, ["share"])
        assert not [g for g in listed(cluster, ["classic", "consumer"]) if g[0] == "sg"]
    finally:
        done.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    everything = [r for rs in read for r in rs]
    assert sorted(v for _, _, v, _ in everything) == sorted(values)  # each once
    assert all(count == 1 for *_, count in everything)
    # every record came from its partition at its place: value i at partition i % 2
    assert all(int(v[1:]) % PARTITIONS == p for p, _, v, _ in everything)


def test_released_records_come_back_and_accepted_or_rejected_ones_never(cluster):
    create_topic(cluster, 1)
    earliest(cluster, "sx")
    produce(cluster, [f"v{i}" for i in range(30)], 1)
    c = share_consumer(cluster, "sx", **{"share.acknowledgement.mode": "explicit"})
    deliveries: dict[int, list] = {}
    try:
        deadline = time.monotonic() + 60
        # offsets 0-9 accepted, 10-19 rejected, 20-29 released whenever they come
        while time.monotonic() < deadline:
            msgs = [x for x in c.poll(0.5) if x.error() is None]
            for x in msgs:
                deliveries.setdefault(x.offset(), []).append(x.delivery_count())
                kind = (AcknowledgeType.ACCEPT if x.offset() < 10 else
                        AcknowledgeType.REJECT if x.offset() < 20 else AcknowledgeType.RELEASE)
                c.acknowledge(x, kind)
            if msgs:
                c.commit_sync()
            if all(len(deliveries.get(o, [])) == 3 for o in range(20, 30)) and \
                    len(deliveries) == 30:
                break
        # nothing is left to deliver: every release used up the limit of 3
        late = [x for _ in range(4) for x in c.poll(0.5) if x.error() is None]
    finally:
        c.close()
    assert sorted(deliveries) == list(range(30))
    assert all(deliveries[o] == [1] for o in range(20)), deliveries
    assert all(deliveries[o] == [1, 2, 3] for o in range(20, 30)), deliveries
    assert late == []


def test_a_share_group_name_taken_by_a_consumer_group_is_refused(cluster):
    from confluent_kafka import Consumer
    create_topic(cluster, 1)
    produce(cluster, ["x"], 1)
    classic = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "taken",
                        "auto.offset.reset": "earliest"})
    classic.subscribe(["t"])
    try:
        wait_for("the classic consumer reads",
                 lambda: any(x.error() is None for x in [classic.poll(0.5)] if x))
        classic.commit(asynchronous=False)
        c = share_consumer(cluster, "taken")
        try:  # as a Kafka broker answers it: fatal to the share consumer
            with pytest.raises(KafkaException) as refused:
                for _ in range(20):
                    assert all(x.error() is not None for x in c.poll(0.5))
        finally:
            c.close()
        assert refused.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        # ShareGroupDescribe of a classic group, and of none, is GROUP_ID_NOT_FOUND (dead),
        # as Kafka answers it
        [taken] = describe(cluster, coordinator(cluster, "taken"), "taken")
        [nothing] = describe(cluster, coordinator(cluster, "nothing-here"), "nothing-here")
        assert (taken.error_code, taken.error_message) == \
            (m.GROUP_ID_NOT_FOUND, "Group taken is not a share group."), taken
        assert (nothing.error_code, nothing.group_state, nothing.error_message) == \
            (m.GROUP_ID_NOT_FOUND, "Dead", "Group nothing-here not found."), nothing
        assert nothing.authorized_operations == -(1 << 31) and nothing.members == []
        for group in ("taken", "nothing-here"):
            assert offsets(cluster, coordinator(cluster, group), group, None) == \
                (m.GROUP_ID_NOT_FOUND, []), group
    finally:
        classic.close()


def leader_of(cluster, partition):
    md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics("t", timeout=5)
    leader = md.topics["t"].partitions[partition].leader
    return leader if leader > 0 else None


def describe(cluster, node, *groups, api=kc.SHARE_GROUP_DESCRIBE, operations=False):
    """ShareGroupDescribe (or ConsumerGroupDescribe), newest version, of ``groups`` on
    ``node``."""
    version = kc.SUPPORTED[api][1]
    return wire(cluster, cluster.host(node), api, version, kc.SUPPORTED[api][2][version](
        group_ids=list(groups), include_authorized_operations=operations)).groups


def offsets(cluster, node, group, topics):
    """DescribeShareGroupOffsets v0 of ``group`` on ``node`` (``topics``: name -> partitions,
    or None for all): (group error, [(topic, partition, start offset, epoch > -1, error)])."""
    R = kc.DescribeShareGroupOffsetsRequest[0]
    G = R.DescribeShareGroupOffsetsRequestGroup
    [g] = wire(cluster, cluster.host(node), kc.DESCRIBE_SHARE_GROUP_OFFSETS, 0, R(groups=[G(
        group_id=group, topics=None if topics is None else [
            G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in topics.items()])])).groups
    return g.error_code, [(t.topic_name, p.partition_index, p.start_offset, p.leader_epoch > -1,
                           p.error_code) for t in g.topics for p in t.partitions]


def members(described) -> dict:
    """member id -> (epoch, subscribed, {topic name: partitions}) of a described group."""
    return {mb.member_id: (mb.member_epoch, list(mb.subscribed_topic_names),
                           {t.topic_name: sorted(t.partitions)
                            for t in mb.assignment.topic_partitions})
            for mb in described.members}


def readers(cluster, group, n, read, errors, done):
    """``n`` share consumers of ``group`` polling in threads until ``done`` is set: what
    they read goes to ``read``, fatal errors to ``errors``."""
    def run():
        c = share_consumer(cluster, group)
        try:
            while not done.is_set():
                for msg in c.poll(0.3):
                    if msg.error() is None:
                        read.append(msg.value().decode())
                    elif msg.error().fatal():
                        errors.append(msg.error())
        finally:
            c.close()
    threads = [threading.Thread(target=run, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def test_a_killed_leader_and_coordinator_lose_no_record(cluster):
    """The partition's leader (and, if it is the same node, the group's coordinator) is
    killed while two share consumers read: records held and not yet acknowledged may come
    again, but none is lost, and records produced during and after the kill are all
    read."""
    create_topic(cluster, 1)
    earliest(cluster, "sk")
    produce(cluster, [f"a{i}" for i in range(200)], 1)
    read, errors, done = [], [], threading.Event()
    threads = readers(cluster, "sk", 2, read, errors, done)
    try:
        wait_for("the first records read", lambda: len(set(read)) >= 50)
        victim = wait_for("the partition's leader", lambda: leader_of(cluster, 0))
        cluster.kill(victim)
        produce(cluster, [f"b{i}" for i in range(200)], 1)
        cluster.start(victim)
        produce(cluster, [f"c{i}" for i in range(100)], 1)
        want = {f"{k}{i}" for k, n in (("a", 200), ("b", 200), ("c", 100)) for i in range(n)}
        wait_for("every record read", lambda: want <= set(read), timeout_s=120)
    finally:
        done.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    assert set(read) == want


def test_a_new_leader_reads_the_share_state_back_and_gives_no_accepted_record_again(
        cluster):
    """A consumer reads and commits (accepts) 100 records; the partition's leader (and the
    group's coordinator, when it is the same node) is killed and 100 more are produced: the
    new leader reads the group's state back from the coordinator, so none of the first 100
    comes again (a leader that started the group afresh at ``earliest`` would give them
    all again) and each of the new ones is read (once, where no commit failed)."""
    create_topic(cluster, 1)
    earliest(cluster, "ss")
    first, then = [f"a{i}" for i in range(100)], [f"b{i}" for i in range(100)]
    produce(cluster, first, 1)
    c = share_consumer(cluster, "ss")
    read: list = []
    failed: list = []  # commits refused: what they held may come again

    def take(n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(set(read)) < n and time.monotonic() < deadline:
            got = [x for x in c.poll(0.5) if x.error() is None]
            read.extend(x.value().decode() for x in got)
            if got:  # accept what this poll gave, and wait for the broker to have it
                failed.extend(e for e in c.commit_sync(30).values() if e is not None)
    try:
        take(100, 60)
        assert sorted(read) == sorted(first) and not failed, (len(read), failed)
        victim = wait_for("the partition's leader", lambda: leader_of(cluster, 0))
        cluster.kill(victim)
        produce(cluster, then, 1)
        take(200, 120)
    finally:
        c.close()
    assert sorted(x for x in read if x.startswith("a")) == sorted(first), "accepted: not again"
    assert set(read) == set(first) | set(then)
    if not failed:
        assert len(read) == 200, len(read)


def test_a_share_fetch_holds_at_least_one_batch_and_then_what_max_bytes_allows(cluster):
    """fetch.max.bytes (ShareFetch's MaxBytes) 1500 with batches of one 1000-byte record:
    each fetch acquires one batch, so each poll gives one record; the first batch of an
    answer is given whole even when larger (a 3000-byte record); 0 gives nothing."""
    create_topic(cluster, 1)
    earliest(cluster, "sb")
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 0})
    for i in range(5):
        p.produce("t", value=bytes([65 + i]) * (3000 if i == 4 else 1000))
        assert p.flush(30) == 0  # one record per batch
    c = share_consumer(cluster, "sb", **{"fetch.max.bytes": 1500})
    polls = []
    try:
        deadline = time.monotonic() + 60
        while sum(map(len, polls)) < 5 and time.monotonic() < deadline:
            got = [x for x in c.poll(0.5) if x.error() is None]
            if got:
                polls.append([len(x.value()) for x in got])
    finally:
        c.close()
    assert polls == [[1000], [1000], [1000], [1000], [3000]]
    earliest(cluster, "sb0")
    c = share_consumer(cluster, "sb0", **{"fetch.max.bytes": 0})
    try:  # MaxBytes 0: nothing is acquired (librdkafka's 0180 asks this of Kafka)
        assert [x for _ in range(4) for x in c.poll(0.5) if x.error() is None] == []
    finally:
        c.close()


def test_read_committed_share_groups_never_see_aborted_records(cluster):
    """A transactional producer commits, aborts and commits ten records each: a group
    with ``share.isolation.level`` read_committed reads the twenty committed ones, a
    read_uncommitted group all thirty; no control record is delivered to either."""
    from confluent_kafka import Producer
    create_topic(cluster, 1)
    earliest(cluster, "rc", share_isolation_level="read_committed")
    earliest(cluster, "ru")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "transactional.id": "share-tx"})
    p.init_transactions(60)
    for n, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(10):
            p.produce("t", value=f"{n}-{i}".encode())
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(60)

    def read_all(group, want):
        c = share_consumer(cluster, group)
        got = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < want and time.monotonic() < deadline:
                got += [x.value().decode() for x in c.poll(0.5) if x.error() is None]
            got += [x.value().decode() for _ in range(3) for x in c.poll(0.5)
                    if x.error() is None]  # nothing more comes
        finally:
            c.close()
        return got
    committed = [f"{n}-{i}" for n in ("c1", "c2") for i in range(10)]
    assert sorted(read_all("rc", 20)) == sorted(committed)
    assert sorted(read_all("ru", 30)) == sorted(committed + [f"ab-{i}" for i in range(10)])


def test_the_in_flight_limit_splits_a_batch_and_every_record_still_comes(cluster):
    """``share.partition.max.record.locks`` 100 and one batch of 200 records: a fetch
    acquires the first 100 of the batch (sent whole, the client told which are its), the
    next fetch, once those are accepted, the rest; ``max.poll.records`` 5 does not split a
    batch (confluent-kafka's own suite asks both of Kafka)."""
    from confluent_kafka import Producer
    create_topic(cluster, 1)
    earliest(cluster, "sl", share_partition_max_record_locks="100")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "linger.ms": 1000})
    for i in range(200):
        p.produce("t", value=f"v{i}".encode())
    assert p.flush(30) == 0

    def polls(group, **conf):
        c = share_consumer(cluster, group, **{"share.acknowledgement.mode": "explicit", **conf})
        sizes, seen = [], []
        try:
            deadline = time.monotonic() + 60
            while len(seen) < 200 and time.monotonic() < deadline:
                got = [x for x in c.poll(1.0) if x.error() is None]
                for x in got:
                    c.acknowledge(x, AcknowledgeType.ACCEPT)
                if got:
                    sizes.append(len(got))
                    seen += [x.value().decode() for x in got]
        finally:
            c.close()
        assert sorted(seen) == sorted(f"v{i}" for i in range(200))
        return sizes
    assert max(polls("sl", **{"max.poll.records": 200})) == 100
    earliest(cluster, "sm")
    assert polls("sm", **{"max.poll.records": 5})[0] > 5


def test_a_deleted_topics_share_state_is_tombstoned_by_its_coordinator(cluster):
    """A group reads and accepts records of a topic, so its coordinator holds the
    partition's share state; the topic is deleted: the coordinator says it removed that
    state (and tombstoned it: tests/node/test_group_coordinator.py reloads the log), and the
    topic made again under its name is a new topic the group reads from its start."""
    create_topic(cluster, 1)
    earliest(cluster, "sd")
    produce(cluster, [f"a{i}" for i in range(20)], 1)
    c = share_consumer(cluster, "sd")
    read: list = []
    try:
        deadline = time.monotonic() + 60
        while len(read) < 20 and time.monotonic() < deadline:
            got = [x for x in c.poll(0.5) if x.error() is None]
            read.extend(x.value().decode() for x in got)
            if got:
                c.commit_sync(30)
    finally:
        c.close()
    assert sorted(read) == sorted(f"a{i}" for i in range(20))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.delete_topics(["t"])["t"].result(30)
    said = "share state of 1 partition(s) of deleted topics removed"
    wait_for("a coordinator removing the deleted topic's share state",
             lambda: any(said in cluster.log_path(i).read_text() for i in cluster.ids))
    create_topic(cluster, 1)
    produce(cluster, [f"b{i}" for i in range(5)], 1)
    again: list = []
    c = share_consumer(cluster, "sd")
    try:
        deadline = time.monotonic() + 60
        while len(again) < 5 and time.monotonic() < deadline:
            again.extend(x.value().decode() for x in c.poll(0.5) if x.error() is None)
    finally:
        c.close()
    assert sorted(again) == sorted(f"b{i}" for i in range(5))


def test_a_new_coordinator_reads_the_membership_back_and_the_member_goes_on(cluster):
    """The group's coordinator is killed while a share consumer reads: the broker that takes
    its ``__consumer_offsets`` partition over reads the group's records back, so the
    member's next heartbeat is answered in the epoch it had (it does not join again: one
    join in every node's log), and every record, also those produced after the kill, is
    read."""
    create_topic(cluster, 1)
    earliest(cluster, "sm")
    produce(cluster, [f"a{i}" for i in range(100)], 1)
    read, errors, done = [], [], threading.Event()
    [t] = readers(cluster, "sm", 1, read, errors, done)
    try:
        wait_for("the first records read", lambda: len(set(read)) >= 100, timeout_s=60)
        victim = wait_for("the group's coordinator", lambda: coordinator(cluster, "sm"))
        # ShareGroupDescribe on the coordinator: the member, in the group's epoch, given the
        # topic's one partition
        [before] = describe(cluster, victim, "sm", operations=True)
        assert (before.error_code, before.group_state, before.assignor_name) == \
            (0, "Stable", "simple"), before
        assert before.assignment_epoch == before.group_epoch > 0
        assert before.authorized_operations > 0  # no authorizer: every group operation
        assert list(members(before).values()) == [(before.group_epoch, ["t"], {"t": [0]})], \
            before
        cluster.kill(victim)
        produce(cluster, [f"b{i}" for i in range(100)], 1)
        went_on = "member {} goes on in epoch"
        others = [i for i in cluster.ids if i != victim]

        def logs():
            return "".join(cluster.log_path(i).read_text() for i in cluster.ids)
        wait_for("the new coordinator taking the member's heartbeat in its epoch", lambda: any(
            "goes on in epoch" in cluster.log_path(i).read_text() for i in others),
            timeout_s=90)
        want = {f"{k}{i}" for k in "ab" for i in range(100)}
        wait_for("every record read", lambda: want <= set(read), timeout_s=90)
        node = coordinator(cluster, "sm")
        [after] = describe(cluster, node, "sm")
        # every record accepted: once the partition's leader has stored the group's state,
        # DescribeShareGroupOffsets gives its start offset past all 200, for the topic named
        # or for all the group has a state of; a partition or topic that is not there is
        # named
        wait_for("the start offset stored", lambda: offsets(cluster, node, "sm", {"t": [0]})
                 == (0, [("t", 0, 200, True, 0)]), timeout_s=60)
        assert offsets(cluster, node, "sm", None) == (0, [("t", 0, 200, True, 0)])
        assert offsets(cluster, node, "sm", {"t": [1], "nope": [0]}) == (0, [
            ("t", 1, -1, False, m.UNKNOWN_TOPIC_OR_PARTITION),
            ("nope", 0, -1, False, m.UNKNOWN_TOPIC_OR_PARTITION)])
    finally:
        done.set()
        t.join(30)
    assert not errors, errors
    # the new coordinator described the group as it read it back from the log: the same
    # member, epoch and assignment
    assert (after.error_code, after.group_epoch) == (0, before.group_epoch), after
    assert members(after) == members(before)
    [as_consumer] = describe(cluster, coordinator(cluster, "sm"), "sm",
                             api=kc.CONSUMER_GROUP_DESCRIBE)
    assert (as_consumer.error_code, as_consumer.error_message) == \
        (m.GROUP_ID_NOT_FOUND, "Group sm is not a consumer group."), as_consumer
    text = logs()
    joins = [line for line in text.splitlines() if "share group sm: epoch" in line
             and "joined" in line]
    assert len(joins) == 1, joins
    member = joins[0].split("member ")[1].split(" joined")[0]
    assert went_on.format(member) in text
    assert "Traceback" not in text
