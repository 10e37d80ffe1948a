"""Clients no one here wrote against three real node processes (127.0.0.1-3): aiokafka
(its own Python protocol implementation) and kcat (the command-line client on Debian's
librdkafka 2.0), each codec, idempotence, consumer groups and transactions. Each test is a
cell of the compatibility matrix in docs/compatibility.md; the librdkafka (confluent-kafka)
and kafka-python cells are in the tests that page names."""
import asyncio
import os
import shutil
import signal
import subprocess
import uuid

import pytest

from conftest import create_topic_everywhere, local_brokers, wait_for

CODECS = ("gzip", "snappy", "lz4", "zstd")
N = 200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_brokers(tmp_path_factory.mktemp("compat")) as c:
        yield c


def topic_for(cluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic_everywhere(cluster, name, 3, {"min.insync.replicas": "2"}, timeout_s=60)
    return name


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


# ------------------------------------------------------------------ aiokafka

async def aio_produce(cluster, topic, values, **conf):
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all", **conf)
    await p.start()
    try:
        acked = {}
        for i, v in enumerate(values):
            md = await p.send_and_wait(topic, v.encode(), partition=i % 3)
            acked[v] = (md.partition, md.offset)
        return acked
    finally:
        await p.stop()


async def aio_read(cluster, topic, want: int, group: str | None = None, **conf):
    """{value: [(partition, offset), ...]} once ``want`` records were read; subscribed in
    ``group`` if one is given, else assigned every partition."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap(), group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False, **conf)
    if group is not None:
        c.subscribe([topic])
    await c.start()
    if group is None:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        await c.seek_to_beginning()
    out: dict = {}
    try:
        while sum(len(v) for v in out.values()) < want:
            batches = await c.getmany(timeout_ms=1000)
            for tp, msgs in batches.items():
                for msg in msgs:
                    out.setdefault(msg.value.decode(), []).append((tp.partition, msg.offset))
        if group is not None:
            await c.commit()
    finally:
        await c.stop()
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_idempotent_producer_with_each_codec_and_a_consumer_group(cluster, codec):
    topic = topic_for(cluster, f"aio-{codec}")
    values = [f"{codec}-{i}" for i in range(N)]
    acked = run(aio_produce(cluster, topic, values, enable_idempotence=True,
                            compression_type=codec))
    read = run(aio_read(cluster, topic, N, group=f"g-{topic}"))
    assert {v: [pos] for v, pos in acked.items()} == read, "each acknowledged record, once"


def test_aiokafka_transactions_commit_and_abort_for_read_committed(cluster):
    topic = topic_for(cluster, "aio-txn")
    committed, aborted = run(_aio_txns(cluster, topic))
    read = run(aio_read(cluster, topic, len(committed), isolation_level="read_committed"))
    assert sorted(read) == sorted(committed), "committed read once each, nothing aborted"
    assert not set(aborted) & set(read)
    everything = run(aio_read(cluster, topic, len(committed) + len(aborted)))
    assert set(aborted) <= set(everything), "the aborted records reached the log"


async def _aio_txns(cluster, topic):
    """30 transactions of 3 records over the 3 partitions, every third aborted."""
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap(),
                         transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
    await p.start()
    committed, aborted = [], []
    try:
        for n in range(30):
            values = [f"t{n}-{k}" for k in range(3)]
            await p.begin_transaction()
            for k, v in enumerate(values):
                await p.send_and_wait(topic, v.encode(), partition=k)
            if n % 3 == 2:
                await p.abort_transaction()
                aborted += values
            else:
                await p.commit_transaction()
                committed += values
    finally:
        await p.stop()
    return committed, aborted


# ------------------------------------------------------------------ kcat

def kcat(*args, stdin: str | None = None) -> str:
    exe = shutil.which("kcat")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("kcat is not installed (make setup installs Debian's kcat)")
        pytest.skip("kcat is not installed (make setup installs Debian's kcat)")
    out = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kcat {' '.join(args)}: {out.stderr[-2000:]}"
    return out.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_idempotently_with_each_codec_and_reads_back(cluster, codec):
    topic = topic_for(cluster, f"kcat-{codec}")
    values = [f"{codec}-{i}" for i in range(N)]
    kcat("-P", "-b", cluster.bootstrap(), "-t", topic, "-X", f"compression.codec={codec}",
         "-X", "enable.idempotence=true", "-X", "acks=all", stdin="\n".join(values) + "\n")
    out = kcat("-C", "-b", cluster.bootstrap(), "-t", topic, "-o", "beginning", "-e",
               "-f", "%p %o %s\n", "-X", "check.crcs=true")
    rows = [line.split(" ", 2) for line in out.splitlines() if line]
    read = sorted(v for _, _, v in rows)
    assert read == sorted(values), "each record once"
    per_partition = {}
    for p, o, _ in rows:
        per_partition.setdefault(p, []).append(int(o))
    assert all(offs == sorted(set(offs)) for offs in per_partition.values())


def test_kcat_consumer_group_reads_each_record_once(cluster):
    topic = topic_for(cluster, "kcat-group")
    values = [f"g-{i}" for i in range(N)]
    kcat("-P", "-b", cluster.bootstrap(), "-t", topic, stdin="\n".join(values) + "\n")
    out = kcat("-G", f"g-{topic}", "-b", cluster.bootstrap(), "-o", "beginning", "-e",
               "-f", "%s\n", topic)
    assert sorted(out.split()) == sorted(values)


def test_kcat_transactional_producer_commits_at_end_of_input_and_a_stopped_one_is_aborted(
        cluster):
    """kcat with ``transactional.id`` produces its whole input in one transaction, committed
    when the input ends. A kcat stopped by SIGINT in its transaction, with its records in the
    log, ends aborted: kcat aborts it, or (when the signal comes while it still produces,
    which ends it without an abort) the next kcat with the same transactional.id fences it
    and the coordinator aborts it. A read_committed consumer then reads the records of both
    committed transactions once each, the second past the aborted ones, and none of them."""
    topic = topic_for(cluster, "kcat-txn")

    def commit(values, txn_id):
        kcat("-P", "-b", cluster.bootstrap(), "-t", topic, "-X", f"transactional.id={txn_id}",
             "-m", "60", stdin="\n".join(values) + "\n")  # -m: its transactions' timeout

    def read(isolation):  # librdkafka reads committed by default
        out = kcat("-C", "-b", cluster.bootstrap(), "-t", topic, "-o", "beginning", "-e",
                   "-f", "%s\n", "-X", f"isolation.level={isolation}")
        return out.split()
    first = [f"c-{i}" for i in range(N)]
    commit(first, f"kc-{topic}")
    # kcat produces a line once more input follows it: 1.5 MB put all but the last in the log
    aborted = [f"a-{i}-" + "x" * 92 for i in range(15_000)]
    proc = subprocess.Popen([shutil.which("kcat"), "-P", "-b", cluster.bootstrap(), "-t", topic,
                             "-X", f"transactional.id=ka-{topic}", "-X", "linger.ms=0",
                             "-m", "60"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("\n".join(aborted) + "\n")
        proc.stdin.flush()
        wait_for("the open transaction's records in the log", lambda: sum(
            v.startswith("a-") for v in read("read_uncommitted")) >= len(aborted) - 100,
            timeout_s=60)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    second = [f"d-{i}" for i in range(N)]
    commit(second, f"ka-{topic}")
    got = wait_for("the second commit read committed", lambda: (
        lambda r: r if set(second) <= set(r) else None)(read("read_committed")), timeout_s=60)
    assert sorted(got) == sorted(first + second), "committed once each, nothing aborted"
    assert sum(v.startswith("a-") for v in read("read_uncommitted")) >= len(aborted) - 100


def test_aiokafka_every_codec_through_a_partition_leader_kill(cluster):
    """One idempotent aiokafka producer per codec, side by side, while the leader of
    partition 0 is SIGKILLed and started again: every acknowledged record read back once."""
    from confluent_kafka.admin import AdminClient
    topic = topic_for(cluster, "aio-kill")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "error_cb": lambda e: None})
    victim = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader

    async def go():
        from aiokafka import AIOKafkaProducer
        acked: dict = {}
        stop = asyncio.Event()

        async def produce(codec):
            p = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all",
                                 enable_idempotence=True, compression_type=codec,
                                 request_timeout_ms=30_000)
            await p.start()
            try:
                i = 0
                while not stop.is_set():
                    v = f"{codec}-{i}"
                    md = await p.send_and_wait(topic, v.encode(), partition=i % 3)
                    acked[v] = (md.partition, md.offset)
                    i += 1
            finally:
                await p.stop()

        def count(codec):
            return sum(1 for v in list(acked) if v.startswith(codec + "-"))
        tasks = [asyncio.create_task(produce(c)) for c in CODECS]
        killed = False
        try:
            while min(count(c) for c in CODECS) < 50:
                await asyncio.sleep(0.1)
            cluster.kill(victim)
            killed = True
            before = {c: count(c) for c in CODECS}
            while any(count(c) < before[c] + 50 for c in CODECS):
                await asyncio.sleep(0.1)
        finally:
            if killed:
                cluster.start(victim)  # also when the test fails: the module's cluster goes on
            stop.set()
            await asyncio.gather(*tasks)
        return acked
    acked = asyncio.run(asyncio.wait_for(go(), 180))
    read = run(aio_read(cluster, topic, len(acked)))
    assert {v: [pos] for v, pos in acked.items()} == read, "each acknowledged record, once"


def test_offsets_for_times_from_librdkafka_aiokafka_and_kcat(cluster):
    """ListOffsets by timestamp as each client asks it: partition 0 holds records stamped
    1000, 5000, 3000, 2000 (offsets 0-3); the first record stamped at or after 2500 is
    offset 1 (not offset 2, the first in offset order past a smaller stamp), after 6000
    there is none."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = topic_for(cluster, "stamps")
    p = Producer({"bootstrap.servers": cluster.bootstrap(), "acks": "all", "linger.ms": 50})
    for i, ts in enumerate((1000, 5000, 3000, 2000)):
        p.produce(topic, f"s{i}".encode(), partition=0, timestamp=ts)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": f"g-{topic}"})
    try:
        found = [c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=30)[0].offset
                 for ts in (1000, 2500, 6000)]
        assert found == [0, 1, -1], "-1: none, the end"
    finally:
        c.close()
    assert run(_aio_offsets_for_times(cluster, topic)) == [(0, 1000), (1, 5000), None]
    out = kcat("-C", "-b", cluster.bootstrap(), "-t", topic, "-p", "0", "-o", "s@2500", "-e",
               "-f", "%o %T\n")
    assert out.split("\n")[:3] == ["1 5000", "2 3000", "3 2000"]


async def _aio_offsets_for_times(cluster, topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap())
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        out = []
        for ts in (1000, 2500, 6000):
            found = (await c.offsets_for_times({tp: ts}))[tp]
            out.append(None if found is None else (found.offset, found.timestamp))
        return out
    finally:
        await c.stop()


def test_aiokafka_admin_client_calls(cluster):
    """aiokafka's admin client, call by call: DescribeCluster, CreateTopics (validate only,
    then made), Metadata, CreatePartitions, DescribeConfigs and AlterConfigs, the group
    listings after a consumer group committed, DeleteRecords and DeleteTopics. aiokafka's
    admin keeps the brokers it learnt when it started (and refuses one it did not learn of,
    NodeNotReadyError), so it starts once every broker lists a topic of replication factor
    3: then every broker's metadata holds all three."""
    topic_for(cluster, "aio-admin-ready")
    run(_aio_admin(cluster))


async def _aio_admin(cluster):
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import TopicPartition

    name = f"aio-admin-{uuid.uuid4().hex[:6]}"
    a = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=30_000)
    await a.start()
    try:
        info = await a.describe_cluster()
        assert (info["cluster_id"], sorted(b["node_id"] for b in info["brokers"])) == (
            "local", cluster.ids)
        dry = await a.create_topics([NewTopic(name, 2, 3)], validate_only=True)
        assert [t[1] for t in dry.topic_errors] == [0]
        assert name not in await a.list_topics(), "validate_only made nothing"
        made = await a.create_topics([NewTopic(name, 2, 3, topic_configs={
            "min.insync.replicas": "2"})])
        assert [(t[0], t[1]) for t in made.topic_errors] == [(name, 0)]
        again = await a.create_topics([NewTopic(name, 2, 3)])
        assert [t[1] for t in again.topic_errors] == [36], "TOPIC_ALREADY_EXISTS"

        async def partitions():
            [t] = await a.describe_topics([name])
            return sorted(p["partition"] for p in t["partitions"]) if t["error_code"] == 0 \
                else None
        await _eventually(partitions, [0, 1])
        grown = await a.create_partitions({name: NewPartitions(3)})
        assert [t[1] for t in grown.topic_errors] == [0]
        await _eventually(partitions, [0, 1, 2])

        topic = ConfigResource(ConfigResourceType.TOPIC, name)
        [altered] = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name, {
            "retention.ms": "-1", "min.insync.replicas": "1"})])
        assert [r[0] for r in altered.resources] == [0]

        async def configs():
            [resp] = await a.describe_configs([topic])
            [res] = resp.resources
            return {c[0]: c[1] for c in res[4]}.get("min.insync.replicas")
        await _eventually(configs, "1")

        acked = await aio_produce(cluster, name, [f"v{i}" for i in range(30)])
        group = f"g-{name}"
        await aio_read(cluster, name, 30, group=group)
        listed = await a.list_consumer_groups()
        assert (group, "consumer") in [(g[0], g[1]) for g in listed]
        [described] = await a.describe_consumer_groups([group])
        assert [(g[0], g[1], g[2], g[3]) for g in described.groups] == [
        (0, group, "Empty", "consumer")]
        committed = await a.list_consumer_group_offsets(group)
        ends = {p: 1 + max(o for q, o in acked.values() if q == p) for p in range(3)}
        assert {tp.partition: om.offset for tp, om in committed.items()} == ends

        low = await a.delete_records({TopicPartition(name, 0): RecordsToDelete(5)})
        assert {tp.partition: w for tp, w in low.items()} == {0: 5}
        deleted = await a.delete_topics([name])
        assert [(t[0], t[1]) for t in deleted.topic_error_codes] == [(name, 0)]
        await _eventually(lambda: _absent(a, name), True)
    finally:
        await a.close()


async def _absent(a, name):
    return name not in await a.list_topics()


async def _eventually(probe, want, timeout_s: float = 60):
    """Ask ``probe()`` until it gives ``want`` (brokers apply metadata a moment apart)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            got = await probe()
        except Exception as exc:  # noqa: BLE001 - not there yet
            got = exc
        if got == want:
            return
        assert asyncio.get_running_loop().time() < deadline, f"still {got!r}, not {want!r}"
        await asyncio.sleep(0.3)
