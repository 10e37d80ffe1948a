"""Real Kafka clients (librdkafka via confluent-kafka, and kafka-python) against the 5-node
Docker cluster: acknowledged writes read back, a partition leader SIGKILLed mid-way (under
an idempotent producer, and under one transactional producer that must recover as KIP-360
lets it), NOT_ENOUGH_REPLICAS with two of three replicas stopped, and a partition moved
between brokers by kafka-python's admin client (a broker killed mid-move) under an
idempotent producer.

One cluster serves the module (3 controller+broker nodes, 2 brokers); each test creates
its own topic (6 partitions, replication factor 3, min.insync.replicas=2) and starts by
waiting until every broker is unfenced again.
"""
import threading
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError

from conftest import labelled
from harness.backends.docker_backend import DockerCluster

pytestmark = pytest.mark.docker

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(docker_client, node_image):
    run_id = "k" + uuid.uuid4().hex[:7]
    # no automatic preferred-leader election: only the reassignment test's ElectLeaders
    # moves a leader back (none of these tests waits for the five-minute one)
    c = DockerCluster(run_id, node_image, nodes=5, controllers=3, log=lambda m: None,
                      overrides={"auto.leader.rebalance.enable": "false"})
    try:
        c.up()
        c.bootstrap = ",".join(f"{n.address}:9092" for n in c.nodes)
        yield c
    finally:
        c.down()
        assert labelled(docker_client, f"chaoskraft.run={run_id}") == (0, 0, 0)


def quiet(_err):
    pass  # librdkafka logs connection errors to stderr on its own; nothing to add


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "error_cb": quiet})


def wait_until(what, predicate, timeout_s=90, interval_s=0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval_s)


def partitions(cluster, topic):
    """{partition: (leader, replicas, isr)} from a fresh Metadata request (to any broker:
    one that has not yet applied the topic's records answers UNKNOWN_TOPIC, so ask again)."""
    def ask():
        t = admin(cluster).list_topics(topic, timeout=10).topics[topic]
        if t.error is not None or len(t.partitions) != PARTITIONS:
            return {}
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}
    return wait_until(f"metadata of {topic}", ask, timeout_s=30)


def healthy(cluster, topic=None):
    def check():
        try:
            md = admin(cluster).list_topics(timeout=5)
        except Exception:  # noqa: BLE001 - a node may still be starting
            return False
        if len(md.brokers) != 5:
            return False
        if topic is None:
            return True
        parts = partitions(cluster, topic)
        return len(parts) == PARTITIONS and all(
            leader >= 0 and sorted(isr) == sorted(replicas) for leader, replicas, isr in parts.values())
    wait_until(f"all 5 brokers unfenced{' and full ISRs of ' + topic if topic else ''}", check)


def create_topic(cluster, name):
    healthy(cluster)
    client = admin(cluster)  # must outlive the future
    for attempt in range(3):
        # a request the client gave up on (on a starved machine once: its broker handle
        # destroyed while it waited) is asked again; the next answer may be that it exists
        futures = client.create_topics(
            [NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
            operation_timeout=30)
        try:
            futures[name].result(60)
            break
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if attempt == 2 or code not in (KafkaError._DESTROY_BROKER, KafkaError._TIMED_OUT,
                                            KafkaError._TRANSPORT):
                raise
    healthy(cluster, name)


def ck_produce(cluster, topic, prefix, n, idempotent, extra=None):
    """Send n values with confluent-kafka; returns {value: (partition, offset)} of the acked."""
    acked, failed = {}, []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            failed.append(err)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": idempotent, "linger.ms": 5, "error_cb": quiet,
                  **(extra or {})})
    for i in range(n):
        value = f"{prefix}-{i}"
        while True:
            try:
                p.produce(topic, value=value.encode(), partition=i % PARTITIONS,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    try:
        assert p.flush(120) == 0, "messages left undelivered"
    finally:
        p.purge()
        p.close()  # no client may outlive the cluster (its addresses go away with it)
    return acked, failed


def kp_produce(cluster, topic, prefix, n, idempotent):
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all",
                      enable_idempotence=idempotent, linger_ms=5)
    futures = [(f"{prefix}-{i}", p.send(topic, value=f"{prefix}-{i}".encode(),
                                        partition=i % PARTITIONS)) for i in range(n)]
    p.flush(120)
    acked = {}
    for value, f in futures:
        md = f.get(60)
        acked[value] = (md.partition, md.offset)
    p.close()
    return acked


def end_offsets(cluster, topic):
    """High watermarks; a ListOffsets that times out on a busy machine is asked again."""
    def ask():
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "probe",
                      "error_cb": quiet})
        try:
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in range(PARTITIONS)}
        except KafkaException:
            return None
        finally:
            c.close()
    return wait_until(f"end offsets of {topic}", ask, timeout_s=60)


def ck_read_all(cluster, topic):
    """Every message of every partition with confluent-kafka, assign() and a group id."""
    ends = end_offsets(cluster, topic)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                  "enable.auto.commit": True, "error_cb": quiet})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out = defaultdict(list)
    deadline = time.monotonic() + 120
    try:
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"consumer stuck: {ends} vs " + str(
                {p: len(v) for p, v in out.items()})
            for msg in c.consume(2000, 1.0):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    continue
                out[msg.partition()].append((msg.offset(), msg.value().decode()))
    finally:
        c.close()
    return out


def kp_read_all(cluster, topic):
    ends = end_offsets(cluster, topic)
    c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
    c.assign([KpTopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    out = defaultdict(list)
    deadline = time.monotonic() + 120
    try:
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, "kafka-python consumer stuck"
            for tp, msgs in c.poll(1000).items():
                out[tp.partition] += [(m.offset, m.value.decode()) for m in msgs]
    finally:
        c.close()
    return out


def check_read_back(read, acked, no_duplicates_prefixes):
    """Every acked value at its acked offset; offsets increasing; no duplicate where asked."""
    where = {}
    for p, msgs in read.items():
        offsets = [o for o, _ in msgs]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets not increasing"
        for o, v in msgs:
            where.setdefault(v, []).append((p, o))
    lost = [v for v, po in acked.items() if po not in where.get(v, [])]
    assert not lost, f"{len(lost)} acknowledged messages missing, e.g. {lost[:5]}"
    dups = [v for v, locs in where.items() if len(locs) > 1
            and v.split("-")[0] in no_duplicates_prefixes]
    assert not dups, f"duplicates from idempotent producers: {dups[:5]}"
    return where


def test_clients_write_100k_messages_and_read_every_acked_one_back(cluster):
    topic = "readback"
    create_topic(cluster, topic)
    acked = {}
    results = {}

    def run(name, fn):
        results[name] = fn()
    jobs = [
        ("ckidem", lambda: ck_produce(cluster, topic, "ckidem", 25_000, True)[0]),
        ("ckplain", lambda: ck_produce(cluster, topic, "ckplain", 25_000, False)[0]),
        ("kpidem", lambda: kp_produce(cluster, topic, "kpidem", 25_000, True)),
        ("kpplain", lambda: kp_produce(cluster, topic, "kpplain", 25_000, False)),
    ]
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, _ in jobs:
        assert len(results[name]) == 25_000, f"{name}: {len(results[name])} of 25000 acknowledged"
        acked.update(results[name])
    print(f"100000 messages acknowledged in {time.monotonic() - started:.1f} s")

    ck = ck_read_all(cluster, topic)
    kp = kp_read_all(cluster, topic)
    check_read_back(ck, acked, {"ckidem", "kpidem"})
    check_read_back(kp, acked, {"ckidem", "kpidem"})
    assert dict(ck) == dict(kp), "the two clients read different logs"
    assert sum(len(v) for v in ck.values()) >= 100_000


def ck_produce_until(p, topic, stop, prefix, pause_s, callback):
    """Send prefix-0, prefix-1, ... round the partitions with ``p`` until ``stop``, each with
    the delivery callback ``callback()`` makes at its send; then flush and close ``p``."""
    i = 0
    while not stop.is_set():
        p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS,
                  on_delivery=callback())
        i += 1
        p.poll(pause_s)
    try:
        assert p.flush(180) == 0
    finally:
        p.purge()
        p.close()


def test_partition_leader_sigkilled_midway_loses_no_acked_message(cluster):
    topic = "leaderkill"
    create_topic(cluster, topic)
    victim = partitions(cluster, topic)[0][0]
    acked, failed = {}, []
    stop = threading.Event()
    acked_times = defaultdict(list)  # partition -> (ack time, send time), monotonic

    def produce():
        def on_delivery(err, msg, sent):
            if err is None:
                acked[msg.value().decode()] = (msg.partition(), msg.offset())
                acked_times[msg.partition()].append((time.monotonic(), sent))
            else:
                failed.append(err)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5, "error_cb": quiet,
                      "message.timeout.ms": 120_000})
        ck_produce_until(p, topic, stop, "kill", 0.002, lambda: (
            lambda err, msg, sent=time.monotonic(): on_delivery(err, msg, sent)))
    t = threading.Thread(target=produce)
    t.start()
    try:
        wait_until("1000 acknowledged writes", lambda: len(acked) >= 1000)
        cluster.kill_node(victim)  # SIGKILL of the node process
        killed_at = time.monotonic()
        print(f"SIGKILLed node {victim}, the leader of {topic}-0, after {len(acked)} acks")
        next_ack = wait_until("an acknowledged write to partition 0 sent after the kill",
                              lambda: next((t for t, sent in acked_times[0] if sent > killed_at),
                                           None), timeout_s=120)
        # The producer found the new leader through some broker's metadata; the broker that
        # answers us may apply the same metadata records a moment later (brokers follow the
        # metadata log each at its own pace, as in Kafka), so ask until one names it. The
        # victim is held down, so a metadata answer naming it as leader can only be stale.
        new_leader = wait_until(f"metadata naming a leader of {topic}-0 other than {victim}",
                                lambda: next((l for l in [partitions(cluster, topic)[0][0]]
                                              if l not in (victim, -1)), None), timeout_s=30)
        print(f"{topic}-0 writable again after {next_ack - killed_at:.2f} s "
              f"(new leader {new_leader})")
        assert cluster.node_status(victim)["running"] is False
        time.sleep(2)
        cluster.start_node(victim)
        healthy(cluster, topic)  # the restarted node caught up and rejoined every ISR
    finally:
        stop.set()
        t.join()
    assert not failed, f"producer errors: {failed[:5]}"
    read = ck_read_all(cluster, topic)
    check_read_back(read, acked, {"kill"})
    print(f"{len(acked)} acknowledged messages, all read back")


CODECS = ("gzip", "snappy", "lz4", "zstd")


CLIENTS = {"confluent-kafka": "ck", "kafka-python": "kp"}  # client -> its values' tag


def _codec_producer(client, cluster, topic, codec, acked, failed, stop):
    """Idempotent acks=all sends of TAG.``codec``-i, compressed with ``codec``, until ``stop``."""
    prefix = f"{CLIENTS[client]}.{codec}"
    if client == "confluent-kafka":
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5, "error_cb": quiet,
                      "compression.type": codec, "message.timeout.ms": 120_000})

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value().decode()] = (msg.partition(), msg.offset())
            else:
                failed.append(err)
        ck_produce_until(p, topic, stop, prefix, 0.005, lambda: on_delivery)
        return
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True,
                      linger_ms=5, compression_type=codec, request_timeout_ms=30_000)

    def ok(value, md):  # kafka-python passes add_callback's arguments first
        acked[value] = (md.partition, md.offset)
    i = 0
    while not stop.is_set():
        value = f"{prefix}-{i}"
        p.send(topic, value=value.encode(), partition=i % PARTITIONS).add_callback(
            ok, value).add_errback(failed.append)
        i += 1
        time.sleep(0.005)
    try:
        p.flush(180)
    finally:
        p.close(10)


def test_every_codec_of_both_clients_survives_a_partition_leader_kill(cluster):
    """One idempotent producer per codec and client (librdkafka and kafka-python), eight side
    by side, while the leader of partition 0 is SIGKILLed and started again: every
    acknowledged record is read back where it was acknowledged, once, by librdkafka and by
    kafka-python (each decompressing all four codecs of both)."""
    topic = "codecs"
    create_topic(cluster, topic)
    victim = partitions(cluster, topic)[0][0]
    acked, failed, stop = {}, [], threading.Event()
    producers = [(client, codec) for client in CLIENTS for codec in CODECS]
    prefixes = {f"{CLIENTS[client]}.{codec}" for client, codec in producers}
    threads = [threading.Thread(target=_codec_producer, args=(
        client, cluster, topic, codec, acked, failed, stop)) for client, codec in producers]
    for t in threads:
        t.start()
    killed = False
    try:
        def per_producer():
            counts = dict.fromkeys(prefixes, 0)
            for v in list(acked):
                counts[v.split("-")[0]] += 1
            return counts
        wait_until("200 acknowledged writes of every producer",
                   lambda: min(per_producer().values()) >= 200)
        cluster.kill_node(victim)
        killed = True
        before = per_producer()
        print(f"SIGKILLed node {victim}, the leader of {topic}-0, after {before}")
        wait_until("100 more acknowledged writes of every producer",
                   lambda: all(n >= before[c] + 100 for c, n in per_producer().items()),
                   timeout_s=120)
        cluster.start_node(victim)
        killed = False
    finally:
        if killed:
            cluster.start_node(victim)
        stop.set()
        for t in threads:
            t.join()
    # the producers stop before the restarted node is waited for: how fast it catches up
    # beside eight producers is the machine's speed, not what this test is about
    healthy(cluster, topic)
    assert not failed, f"producer errors: {failed[:5]}"
    for read in (ck_read_all(cluster, topic), kp_read_all(cluster, topic)):
        check_read_back(read, acked, prefixes)
    print(f"{len(acked)} acknowledged messages of {len(producers)} producers, all read back twice")


def read_committed_group(cluster, topic, want, group):
    """Values read by a read_committed consumer in ``group`` (subscribe) until every value of
    ``want`` was read and the group's position reached the last stable offsets, then 3 s more
    for anything that should not be there; {value: times read}."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "error_cb": quiet})
    c.subscribe([topic])
    seen = defaultdict(int)
    eof, done_at = set(), None
    deadline = time.monotonic() + 120
    try:
        while done_at is None or time.monotonic() < done_at + 3:
            assert time.monotonic() < deadline, (
                f"read_committed consumer stuck: {len(set(want) - set(seen))} committed "
                f"values unread, at end of {sorted(eof)}")
            for msg in c.consume(500, 0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    eof.add(msg.partition())
                    continue
                eof.discard(msg.partition())
                seen[msg.value().decode()] += 1
            if done_at is None and set(want) <= set(seen) and len(eof) == PARTITIONS:
                done_at = time.monotonic()
    finally:
        c.close()
    return seen


def _again_while_retriable(end, errors):
    """commit_transaction or abort_transaction as librdkafka documents them: a retriable
    error is answered by the same call again."""
    while True:
        try:
            end(60)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
            errors.append(exc.args[0])


def test_one_transactional_producer_survives_a_partition_leader_kill(cluster):
    """An application written as Kafka's documentation says: one transactional producer for
    the whole run, a retriable error retried, an abortable one answered by aborting and
    going on. The leader of a partition every transaction writes is SIGKILLed and started
    again midway, with records in flight to it: they are retried to the new leader, which
    must tell a retry of a batch the killed leader had replicated from a new one. Should
    the kill make a transaction fail, librdkafka recovers by aborting and bumping its epoch
    (InitProducerId with its producer id and epoch, KIP-360); a broker without it leaves
    the producer in a fatal state. Nothing committed may be lost or read twice, nothing
    aborted read."""
    topic = "txnkill"
    create_topic(cluster, topic)
    victim = partitions(cluster, topic)[0][0]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "error_cb": quiet,
                  "transactional.id": f"kip360-{uuid.uuid4().hex[:6]}",
                  "transaction.timeout.ms": 60_000, "linger.ms": 5})
    committed, aborted, errors = [], [], []
    killed = restarted = False
    p.init_transactions(60)
    try:
        for n in range(150):
            if n == 100:
                cluster.start_node(victim)
                restarted = True
            values = [f"t{n}-{k}" for k in range(8)]
            try:
                p.begin_transaction()
                for k, v in enumerate(values):  # over partitions 0-2, one of them the victim's
                    p.produce(topic, value=v.encode(), partition=k % 3)
                    if n == 50 and k == 3:  # a third of the way, with records in flight
                        p.poll(0.005)
                        cluster.kill_node(victim)  # SIGKILL: the leader of partition 0
                        killed = True
                        print(f"SIGKILLed node {victim}, the leader of {topic}-0, "
                              f"in transaction {n}")
                p.poll(0)
                if n % 3 == 2:
                    # The records reach the log first, so the abort has something to hide. An
                    # abort at once would race the last commit's markers: librdkafka sends
                    # EndTxn(abort) while its AddPartitionsToTxn is refused with
                    # CONCURRENT_TRANSACTIONS (the coordinator still marks the commit), and
                    # Kafka answers INVALID_TXN_STATE, fatal to librdkafka; and it would purge
                    # records a killed leader may have kept and reuse their sequence numbers
                    # (OUT_OF_ORDER_SEQUENCE_NUMBER, fatal). Kafka does both, in a window as
                    # long as marking a commit takes, which a busy machine makes long.
                    p.flush(60)
                    _again_while_retriable(p.abort_transaction, errors)
                    aborted += values
                    continue
                _again_while_retriable(p.commit_transaction, errors)
                committed += values
            except KafkaException as exc:
                err = exc.args[0]
                errors.append(err)
                assert not err.fatal(), f"transaction {n}: fatal error {err}"
                assert err.txn_requires_abort(), f"transaction {n}: {err}"
                # as Kafka's documentation says: abort and go on
                _again_while_retriable(p.abort_transaction, errors)
                aborted += values
    finally:
        if killed and not restarted:
            cluster.start_node(victim)
        p.flush(10)
    print(f"{len(committed) // 8} transactions committed, {len(aborted) // 8} aborted, "
          f"errors on the way: {sorted({e.name() for e in errors})}")
    healthy(cluster, topic)
    seen = read_committed_group(cluster, topic, committed, f"g-{topic}")
    lost = [v for v in committed if v not in seen]
    twice = [v for v, times in seen.items() if times > 1]
    read_aborted = [v for v in aborted if v in seen]
    assert not lost, f"{len(lost)} committed values never read, e.g. {lost[:5]}"
    assert not twice, f"values read more than once: {twice[:5]}"
    assert not read_aborted, f"aborted values read: {read_aborted[:5]}"
    after = sorted({int(v[1:].split("-")[0]) for v in committed})
    assert any(50 <= n < 100 for n in after) and any(n >= 100 for n in after), \
        f"the same producer committed while the node was down and after it came back: {after}"


def test_not_enough_replicas_when_two_of_three_are_stopped(cluster):
    topic = "minisr"
    create_topic(cluster, topic)
    parts = partitions(cluster, topic)
    # Stop two followers while keeping a majority of the 3 controllers (nodes 1-3) alive,
    # so the controller can take them out of the ISR.
    pid, (leader, replicas, _) = min(
        parts.items(), key=lambda kv: sum(1 for r in kv[1][1] if r != kv[1][0] and r <= 3))
    followers = [r for r in replicas if r != leader]
    assert sum(1 for r in followers if r <= 3) <= 1
    for f in followers:
        cluster.stop_node(f)  # SIGTERM: controlled shutdown
    try:
        wait_until(f"ISR of {topic}-{pid} to shrink to [{leader}]",
                   lambda: partitions(cluster, topic).get(pid, (0, 0, []))[2] == [leader])
        before = end_offsets(cluster, topic)[pid]

        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=0)
        errors = []
        for i in range(20):
            try:
                p.send(topic, value=f"nope-{i}".encode(), partition=pid).get(30)
                errors.append(None)
            except (NotEnoughReplicasError, NotEnoughReplicasAfterAppendError) as exc:
                # AFTER_APPEND: the leader appended before it applied the ISR shrink the
                # controller had already published (metadata reaches brokers one by one, in
                # Kafka too); either way the record is not acknowledged, checked below.
                errors.append(exc)
        p.close()
        assert all(isinstance(e, (NotEnoughReplicasError, NotEnoughReplicasAfterAppendError))
                   for e in errors), errors

        acked, failed = ck_produce(cluster, topic, "cknope", 60, True,
                                   {"message.timeout.ms": 5000})
        acked = {v: po for v, po in acked.items() if po[0] == pid}
        assert not acked, f"acknowledged with two of three replicas down: {acked}"
        assert end_offsets(cluster, topic)[pid] == before, "the high watermark moved"
        print(f"{topic}-{pid}: 20 kafka-python sends got NOT_ENOUGH_REPLICAS; "
              f"confluent-kafka errors: {sorted({str(e.name()) for e in failed})}")
    finally:
        for f in followers:
            cluster.start_node(f)
    healthy(cluster, topic)
    acked, failed = ck_produce(cluster, topic, "again", 12, True)
    assert len(acked) == 12 and not failed, failed


def test_partition_reassignments_and_a_preferred_election_under_a_producer(cluster):
    """``reassign_scenario``: a partition grown from one replica to three (one target broker
    killed mid-move), shrunk to two off its leader, reordered, its leader moved by a preferred
    election, under an idempotent producer: every acknowledged record read once."""
    from harness.backends import DATA_DIR
    from reassign_scenario import Brokers, move_partition_under_a_producer
    healthy(cluster)

    def holds_copy(broker, directory):
        code, out = cluster.exec(broker, ["sh", "-c", f"ls -A {DATA_DIR}/{directory} "
                                                      "2>/dev/null | wc -l"], check=False)
        return code != 0 or out.strip() != "0"
    move_partition_under_a_producer(Brokers(
        {n.node_id: f"{n.address}:9092" for n in cluster.nodes}, cluster.kill_node,
        cluster.start_node, holds_copy), f"moved-{uuid.uuid4().hex[:6]}")
