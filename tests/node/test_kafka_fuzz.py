"""Fuzz the Kafka listener of a live node: at least 100,000 random and mutated frames.

Three real node processes (controller + broker) on 127.0.0.1-3. Each frame
is sent alone and the fuzzer waits for its answer or for the connection to
close before sending the next, so every frame counted was processed by the
node. Afterwards the node must still serve a real client, and no node log
may hold a traceback (a traceback is a bug of ours, even if the node lived).
"""
import random
import socket
import struct
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from conftest import NIGHTLY, wait_for
from node_image import kafka_codec as kc
from node_image import records

FRAMES = 100_000 if NIGHTLY else 15_000  # CI's share of the nightly sweep
SEED = 20261121
PING_ID = 0x7EEE_EEEE
# ApiVersions v0 with correlation id PING_ID: sent after every fuzzed frame, so that the
# fuzzer knows the node is done with the frame even when it has no answer (acks=0).
PING = kc.encode_request(kc.API_VERSIONS, 0, ApiVersionsRequest[0](), correlation_id=PING_ID)


@pytest.fixture
def cluster(brokers3):
    return brokers3


def wait_for_brokers(cluster, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=5000)
            if len(admin.describe_cluster()["brokers"]) == 3:
                return admin
            admin.close()
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def valid_frames(rng: random.Random) -> list[bytes]:
    """Well-formed requests of every supported API, some for unknown topics."""
    batch = records.build_batch(0, 0, [(b"k", b"v" * rng.randrange(50))], 1000)
    TD = ProduceRequest.TopicProduceData
    topic = rng.choice(["fuzz", "nope", "", "x" * 300])
    part = rng.randrange(-2, 4)
    out = [
        kc.encode_request(kc.API_VERSIONS, 0, ApiVersionsRequest[0]()),
        kc.encode_request(kc.API_VERSIONS, 3, ApiVersionsRequest[3](
            client_software_name="fuzz", client_software_version="1")),
        kc.encode_request(kc.METADATA, 8, MetadataRequest[8](
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False)),
        kc.encode_request(kc.PRODUCE, 8, ProduceRequest[8](
            transactional_id=None, acks=rng.choice([-1, 0, 1, 2]), timeout_ms=rng.randrange(-5, 200),
            topic_data=[TD(name=topic, partition_data=[
                TD.PartitionProduceData(index=part, records=batch)])])),
        kc.encode_request(kc.FETCH, 11, FetchRequest[11](
            replica_id=-1, max_wait_ms=rng.randrange(-1, 20), min_bytes=rng.randrange(-1, 3),
            max_bytes=rng.randrange(-1, 1 << 20), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchTopic.FetchPartition(
                    partition=part, current_leader_epoch=rng.randrange(-1, 3),
                    fetch_offset=rng.randrange(-3, 100), log_start_offset=-1,
                    partition_max_bytes=rng.randrange(-1, 1 << 20))])],
            forgotten_topics_data=[], rack_id="")),
        kc.encode_request(kc.LIST_OFFSETS, 5, ListOffsetsRequest[5](
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=topic, partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=part, current_leader_epoch=-1,
                    timestamp=rng.choice([-2, -1, 0, 1 << 40]))])])),
    ]
    return [f[4:] for f in out + coordinator_frames(rng, topic, part)]  # bodies; framed later


def coordinator_frames(rng: random.Random, topic: str, part: int) -> list[bytes]:
    """Well-formed group and transaction requests with random ids, members, generations,
    producer ids and epochs: whatever a confused client may send a coordinator."""
    def req(api, version, **fields):
        return kc.encode_request(api, version, kc.SUPPORTED[api][2][version](**fields))
    group = rng.choice(["g", "fuzz-group", "", "x" * 300])
    member = rng.choice(["", "m", "g-0000"])
    gen = rng.randrange(-2, 3)
    pid, epoch = rng.randrange(-1, 3), rng.randrange(-1, 3)
    txn = rng.choice(["t", "", "fuzz-txn"])
    J = kc.SUPPORTED[kc.JOIN_GROUP][2][5]
    S = kc.SUPPORTED[kc.SYNC_GROUP][2][3]
    C = kc.SUPPORTED[kc.OFFSET_COMMIT][2][7].OffsetCommitRequestTopic
    A = kc.SUPPORTED[kc.ADD_PARTITIONS_TO_TXN][2][2].AddPartitionsToTxnTopic
    T = kc.SUPPORTED[kc.TXN_OFFSET_COMMIT][2][2].TxnOffsetCommitRequestTopic
    F = kc.SUPPORTED[kc.OFFSET_FETCH][2][5].OffsetFetchRequestTopic
    return [
        req(kc.FIND_COORDINATOR, 2, key=rng.choice([group, txn]), key_type=rng.randrange(-1, 3)),
        req(kc.JOIN_GROUP, rng.choice([0, 4, 5]), group_id=group,
            session_timeout_ms=rng.choice([-1, 0, 6000, 10_000]),
            rebalance_timeout_ms=rng.choice([-1, 0, 100, 60_000]), member_id=member,
            group_instance_id=rng.choice([None, "static"]), protocol_type=rng.choice(["consumer", ""]),
            protocols=[J.JoinGroupRequestProtocol(name=rng.choice(["range", "x"]),
                                                  metadata=rng.randbytes(rng.randrange(8)))
                       for _ in range(rng.randrange(3))]),
        req(kc.SYNC_GROUP, 3, group_id=group, generation_id=gen, member_id=member,
            group_instance_id=None, assignments=[S.SyncGroupRequestAssignment(
                member_id=rng.choice([member, "other"]), assignment=rng.randbytes(4))]),
        req(kc.HEARTBEAT, 3, group_id=group, generation_id=gen, member_id=member,
            group_instance_id=None),
        req(kc.LEAVE_GROUP, rng.choice([1, 3]), group_id=group, member_id=member, members=[
            kc.SUPPORTED[kc.LEAVE_GROUP][2][3].MemberIdentity(member_id=member,
                                                               group_instance_id=None)]),
        req(kc.DESCRIBE_GROUPS, 4, groups=[group, "nope"], include_authorized_operations=False),
        req(kc.LIST_GROUPS, 2),
        req(kc.OFFSET_COMMIT, 7, group_id=group, generation_id_or_member_epoch=gen,
            member_id=member, group_instance_id=None, topics=[C(name=topic, partitions=[
                C.OffsetCommitRequestPartition(partition_index=part,
                                               committed_offset=rng.randrange(-2, 50),
                                               committed_leader_epoch=-1,
                                               committed_metadata=rng.choice([None, "m"]))])]),
        req(kc.OFFSET_FETCH, 5, group_id=group, topics=rng.choice([None, [F(
            name=topic, partition_indexes=[part])]]), require_stable=False),
        req(kc.INIT_PRODUCER_ID, 1, transactional_id=rng.choice([None, txn]),
            transaction_timeout_ms=rng.choice([-1, 0, 1000, 1 << 30])),
        req(kc.ADD_PARTITIONS_TO_TXN, 2, v3_and_below_transactional_id=txn,
            v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[A(name=topic, partitions=[part])]),
        req(kc.ADD_OFFSETS_TO_TXN, 2, transactional_id=txn, producer_id=pid,
            producer_epoch=epoch, group_id=group),
        req(kc.END_TXN, 2, transactional_id=txn, producer_id=pid, producer_epoch=epoch,
            committed=rng.random() < 0.5),
        req(kc.TXN_OFFSET_COMMIT, 2, transactional_id=txn, group_id=group, producer_id=pid,
            producer_epoch=epoch, topics=[T(name=topic, partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=part, committed_offset=3,
                                                  committed_leader_epoch=-1,
                                                  committed_metadata="")])]),
    ] + share_frames(rng, group, member, topic)


def share_frames(rng: random.Random, group: str, member: str, topic: str) -> list[bytes]:
    """KIP-932's requests with random epochs, acknowledgement ranges (reversed, huge) and
    types (unknown ones too), for a topic id that may not exist."""
    H, F, A = (kc.SUPPORTED[k][2][1] for k in (kc.SHARE_GROUP_HEARTBEAT, kc.SHARE_FETCH,
                                               kc.SHARE_ACKNOWLEDGE))
    tid = uuid.UUID(int=rng.getrandbits(128))
    epoch = rng.choice([-1, 0, 1, 2, 1 << 30])

    def batches(B):
        return [B(first_offset=rng.randrange(-2, 50), last_offset=rng.choice(
            [-1, 3, 40, 1 << 62]), acknowledge_types=[rng.randrange(-1, 5)
                                                     for _ in range(rng.randrange(3))])
                for _ in range(rng.randrange(3))]
    FP = F.FetchTopic.FetchPartition
    AP = A.AcknowledgeTopic.AcknowledgePartition
    return [
        kc.encode_request(kc.SHARE_GROUP_HEARTBEAT, 1, H(
            group_id=group, member_id=member, member_epoch=rng.choice([-2, -1, 0, 1, 5]),
            rack_id=None, subscribed_topic_names=rng.choice([None, [], [topic]]))),
        kc.encode_request(kc.SHARE_FETCH, 1, F(
            group_id=rng.choice([group, None]), member_id=rng.choice([member, None, "m"]),
            share_session_epoch=epoch, max_wait_ms=rng.randrange(-1, 20),
            min_bytes=1, max_bytes=rng.randrange(-1, 1 << 20),
            max_records=rng.randrange(-1, 600), batch_size=rng.randrange(-1, 600),
            topics=[F.FetchTopic(topic_id=tid, partitions=[FP(
                partition_index=rng.randrange(-1, 3),
                acknowledgement_batches=batches(FP.AcknowledgementBatch))])],
            forgotten_topics_data=[])),
        kc.encode_request(kc.SHARE_ACKNOWLEDGE, 1, A(
            group_id=group, member_id=member, share_session_epoch=epoch,
            topics=[A.AcknowledgeTopic(topic_id=tid, partitions=[AP(
                partition_index=rng.randrange(-1, 3),
                acknowledgement_batches=batches(AP.AcknowledgementBatch))])])),
    ]


def mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    kind = rng.randrange(6)
    if kind == 0 and b:  # flip bytes
        for _ in range(rng.randrange(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # truncate
        del b[rng.randrange(len(b) + 1):]
    elif kind == 2:  # extend with garbage
        b += rng.randbytes(rng.randrange(1, 64))
    elif kind == 3:  # random api key / version
        if len(b) >= 4:
            struct.pack_into(">hh", b, 0, rng.randrange(-5, 80), rng.randrange(-3, 20))
    elif kind == 4:  # huge array or string length somewhere after the header
        if len(b) > 12:
            pos = rng.randrange(8, len(b) - 4)
            struct.pack_into(">i", b, pos, rng.choice([-2, 0x7FFFFFFF, 1 << 24, -1]))
    else:  # pure garbage
        b = bytearray(rng.randbytes(rng.randrange(0, 200)))
    return bytes(b)


class Fuzzer:
    def __init__(self, host: str, port: int) -> None:
        self.addr = (host, port)
        self.sock: socket.socket | None = None
        self.answered = self.closed = 0

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.addr, timeout=5)
            self.sock.settimeout(2.0)
        return self.sock

    def send(self, frame: bytes, ping: bool = True) -> None:
        """Send one frame, then a ping; read answers until the ping's, or until the close."""
        s = self._connect()
        try:
            s.sendall(frame + (PING if ping else b""))
            while True:
                body = kc.recv_frame(s)
                if struct.unpack_from(">i", body)[0] == PING_ID:
                    break
                self.answered += 1
        except (ConnectionError, OSError):
            # A closed connection is the answer to garbage.
            self.closed += 1
            s.close()
            self.sock = None


def test_fuzzed_frames_never_stop_the_node(cluster):
    admin = wait_for_brokers(cluster)
    admin.close()

    def created():  # a connection of the admin client may meet a broker still opening up
        a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=5000)
        try:
            a.create_topics([NewTopic("fuzz", 2, 3)])
        except TopicAlreadyExistsError:
            pass
        finally:
            a.close()
        return True
    wait_for("topic fuzz", created)
    rng = random.Random(SEED)
    fuzzers = [Fuzzer(cluster.host(i), cluster.kafka_port) for i in cluster.ids]
    pool = [b for _ in range(100) for b in valid_frames(rng)]
    # Every frame is drawn from the seed first (frame i goes to node i mod 3), then each node's
    # share is sent by its own thread: the three nodes work side by side.
    plans: list[list[tuple[bytes, bool]]] = [[] for _ in fuzzers]
    for i in range(FRAMES):
        body = rng.choice(pool)
        roll = rng.random()
        if roll < 0.25:
            frame = len(body).to_bytes(4, "big") + body  # well-formed (odd values)
        elif roll < 0.9:
            m = mutate(rng, body)
            frame = len(m).to_bytes(4, "big") + m
        elif roll < 0.95:  # a length prefix that lies
            frame = rng.choice([0x7FFFFFFF, 200_000_000, -1 & 0xFFFFFFFF]).to_bytes(4, "big") + body
        else:  # acks=0 style: valid header, then the connection ends mid-frame
            frame = (len(body) + 100).to_bytes(4, "big") + body
            frame = frame[:rng.randrange(4, len(frame) + 1)]
        # A frame that lies about its length is sent and the connection hung up: the node
        # waits for the rest of it (or refuses the length).
        plans[i % len(fuzzers)].append((frame, roll >= 0.9))
    started = time.monotonic()
    sent = [0] * len(fuzzers)

    def drive(k: int) -> None:
        fz = fuzzers[k]
        for frame, hang_up in plans[k]:
            if hang_up:
                s = fz._connect()
                s.sendall(frame)
                s.close()
                fz.sock = None
                fz.closed += 1
            else:
                fz.send(frame)
            sent[k] += 1
            if sent[k] % 10_000 == 0:
                print(f"node {k + 1}: {sent[k]} frames in {time.monotonic() - started:.0f} s")

    with ThreadPoolExecutor(len(fuzzers)) as pool_:
        for f in [pool_.submit(drive, k) for k in range(len(fuzzers))]:
            f.result()
    sent = sum(sent)
    answered = sum(f.answered for f in fuzzers)
    closed = sum(f.closed for f in fuzzers)
    print(f"{sent} frames: {answered} answered, {closed} connections closed, "
          f"{time.monotonic() - started:.0f} s")
    assert sent >= FRAMES
    assert answered > FRAMES // 10 and closed > FRAMES // 10, "the mix should exercise both paths"

    # Every node still serves real clients.
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(), acks="all")
    metas = [producer.send("fuzz", value=f"after-{i}".encode(), partition=i % 2).get(30)
             for i in range(20)]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap(), consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("fuzz", 0), TopicPartition("fuzz", 1)])
    consumer.seek_to_beginning()
    values = {m.value for m in consumer}
    consumer.close()
    assert {f"after-{i}".encode() for i in range(20)} <= values, metas
    for i in cluster.ids:
        assert cluster.procs[i].poll() is None, f"node {i} exited"
        log = cluster.log_path(i).read_text()
        assert "Traceback" not in log, f"node {i} logged a traceback:\n{log[-5000:]}"
