"""Consumer groups with real clients on three real node processes (127.0.0.1-3).

A librdkafka consumer and a kafka-python consumer share one group through
``subscribe()``: the coordinator splits the partitions between them, their
commits land in ``__consumer_offsets``, and when the coordinator's node is
killed the group moves to the partition's new leader with its committed
offsets, so a consumer that joins later starts where the group stopped.
"""
import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer

from conftest import wait_for
from group_clients import committed, coordinator, create_topic, produce, reads_only_news

GROUP = "g"
PARTITIONS = 4


@pytest.fixture
def cluster(brokers3):
    return brokers3




class Member(threading.Thread):
    """One consumer of the group: polls, records what it read, commits after every batch."""

    def __init__(self, cluster, kind, instance=None, session_ms=6000):
        """``instance``: a static member's group.instance.id."""
        super().__init__(daemon=True)
        self.kind = kind
        self.read = []
        self.assigned = set()
        self.stop = threading.Event()
        self.errors = []
        if kind == "librdkafka":
            self.c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": GROUP,
                               "auto.offset.reset": "earliest", "enable.auto.commit": False,
                               "session.timeout.ms": session_ms, "heartbeat.interval.ms": 1000,
                               **({"group.instance.id": instance} if instance else {})})
            self.c.subscribe(["t"])
        elif kind == "kafka-python":
            self.c = KafkaConsumer("t", bootstrap_servers=cluster.bootstrap(), group_id=GROUP,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=session_ms, heartbeat_interval_ms=1000,
                                   group_instance_id=instance)
        else:  # aiokafka: made and polled on the thread's own event loop
            self.conf = dict(bootstrap_servers=cluster.bootstrap(), group_id=GROUP,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=session_ms, heartbeat_interval_ms=1000,
                             group_instance_id=instance)

    def run(self):
        if self.kind == "aiokafka":
            asyncio.run(self._aio())
            return
        while not self.stop.is_set():
            try:
                if self.kind == "librdkafka":
                    msgs = [x for x in self.c.consume(100, 0.3) if x.error() is None]
                    self.read += [x.value().decode() for x in msgs]
                    self.assigned = {tp.partition for tp in self.c.assignment()}
                    if msgs:
                        self.c.commit(asynchronous=False)
                else:
                    batches = self.c.poll(300)
                    self.read += [x.value.decode() for b in batches.values() for x in b]
                    self.assigned = {tp.partition for tp in self.c.assignment()}
                    if batches:
                        self.c.commit()
            except Exception as exc:  # noqa: BLE001 - a rebalance, a failover
                self.errors.append(repr(exc))
                time.sleep(0.2)
        self.c.close()

    async def _aio(self):
        from aiokafka import AIOKafkaConsumer
        c = AIOKafkaConsumer("t", **self.conf)
        await c.start()
        try:
            while not self.stop.is_set():
                try:
                    batches = await c.getmany(timeout_ms=300)
                    self.read += [x.value.decode() for b in batches.values() for x in b]
                    self.assigned = {tp.partition for tp in c.assignment()}
                    if batches:
                        await c.commit()
                except Exception as exc:  # noqa: BLE001 - a rebalance, a failover
                    self.errors.append(repr(exc))
                    await asyncio.sleep(0.2)
        finally:
            await c.stop()






def test_a_group_of_two_clients_survives_its_coordinators_death_with_its_offsets(cluster):
    create_topic(cluster, PARTITIONS)
    first = [f"a{i}" for i in range(200)]
    produce(cluster, first, PARTITIONS)
    members = [Member(cluster, "librdkafka"), Member(cluster, "kafka-python")]
    for mb in members:
        mb.start()
    try:
        wait_for("both members with partitions and every record read", lambda: all(
            mb.assigned for mb in members) and set(first) <= {v for mb in members for v in mb.read},
            timeout_s=90)
        assert members[0].assigned.isdisjoint(members[1].assigned)
        assert members[0].assigned | members[1].assigned == set(range(PARTITIONS))
        victim = wait_for("the group's coordinator", lambda: coordinator(cluster, GROUP))
        cluster.kill(victim)
        second = [f"b{i}" for i in range(200)]
        produce(cluster, second, PARTITIONS)
        wait_for("every record of both rounds read", lambda: set(first + second) <= {
            v for mb in members for v in mb.read}, timeout_s=120)
        wait_for("a new coordinator", lambda: coordinator(cluster, GROUP) not in (None, victim))
        wait_for("commits up to the end of every partition", lambda: all(
            c == end for c, end in committed(cluster, GROUP, PARTITIONS).values()), timeout_s=90)
    finally:
        for mb in members:
            mb.stop.set()
        for mb in members:
            mb.join(30)
    cluster.start(victim)
    # a consumer joining the group later starts at the committed offsets: it reads only news
    late = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": GROUP,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    late.subscribe(["t"])
    got = reads_only_news(cluster, late, 20, PARTITIONS)
    assert sorted(got) == sorted(f"c{i}" for i in range(20)), got[:30]
    logs = "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    assert "Traceback" not in logs
    assert f"group {GROUP}: generation" in logs and "loaded 1 group(s)" in logs, \
        "the new coordinator rebuilt the group from the log"


def test_static_members_of_three_clients_come_back_to_their_partitions_without_a_rebalance(
        cluster):
    """KIP-345: a librdkafka, a kafka-python and an aiokafka consumer with group.instance.id;
    each is
    closed and started again (a static member does not leave on close) and takes its
    partitions back under a new member id while the others keep reading, with no rebalance;
    every record is read."""
    create_topic(cluster, PARTITIONS)
    first = [f"a{i}" for i in range(200)]
    produce(cluster, first, PARTITIONS)
    kinds = (("librdkafka", "il"), ("kafka-python", "ik"), ("aiokafka", "ia"))
    members = [Member(cluster, kind, instance, session_ms=30_000) for kind, instance in kinds]
    for mb in members:
        mb.start()

    def logs():
        return "".join(cluster.log_path(i).read_text() for i in (1, 2, 3))
    read = []
    try:
        wait_for("the static members with partitions and every record read", lambda: all(
            mb.assigned for mb in members) and set(first) <= {v for mb in members for v in mb.read},
            timeout_s=90)
        before = [set(mb.assigned) for mb in members]
        assert set().union(*before) == set(range(PARTITIONS))
        rebalances = logs().count(f"group {GROUP}: rebalancing")
        for i, (kind, instance) in enumerate(kinds):
            members[i].stop.set()
            members[i].join(30)
            read += members[i].read
            members[i] = Member(cluster, kind, instance, session_ms=30_000)
            members[i].start()
            wait_for(f"{kind} back with its partitions", lambda: members[i].assigned == before[i],
                     timeout_s=60)
            assert f"static member {instance} rejoined as" in logs()
        second = [f"b{i}" for i in range(200)]
        produce(cluster, second, PARTITIONS)
        wait_for("the second round read", lambda: set(second) <= {
            v for mb in members for v in mb.read}, timeout_s=60)
        assert [mb.assigned for mb in members] == before
        assert logs().count(f"group {GROUP}: rebalancing") == rebalances, \
            "no rebalance while the static members came back"
    finally:
        for mb in members:
            mb.stop.set()
        for mb in members:
            mb.join(30)
    read += [v for mb in members for v in mb.read]
    assert set(first + second) <= set(read)
    assert not [e for mb in members for e in mb.errors]
    assert "Traceback" not in logs()
