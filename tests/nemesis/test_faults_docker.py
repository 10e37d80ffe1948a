"""Every fault kind on a real Docker cluster: applied through the campaign's nemesis, its
effect observed from outside the node process, and undone by healing.

One 3-node cluster (all controllers, running under libfaketime) serves the module; each test
starts one fault step as a campaign would, looks, stops it, and looks again.
"""
import asyncio
import concurrent.futures
import contextlib
import json
import statistics
import time
import uuid

import pytest

from fault_steps import campaign, module_cluster, rows
from workloads.nodes import clock_offsets, describe_all, wait_for_service
from nemesis.packages.corrupt import corrupt_script
from nemesis.schedule import FaultStep
from workloads.queue_workload import broker_metadata

pytestmark = pytest.mark.docker

PROBE = r"""
import socket, sys
addr, tries, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ok = 0
for _ in range(tries):
    try:
        socket.create_connection((addr, 9093), timeout=timeout).close()
        ok += 1
    except OSError:
        pass
print(ok)
"""


# Counts distinct datagrams on a UDP port until it has ``n`` or a stop file appears; says
# when it is bound, and writes the count at the end.
LISTEN = r"""
import os, socket, sys
port, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", port))
s.settimeout(0.1)
open(out + ".bound", "w").close()
got = set()
while len(got) < n and not os.path.exists(out + ".stop"):
    try:
        got.add(s.recv(64))
    except socket.timeout:
        pass
s.setblocking(False)
while len(got) < n:  # told to stop: what already arrived still counts
    try:
        got.add(s.recv(64))
    except BlockingIOError:
        break
open(out + ".tmp", "w").write(str(len(got)))
os.replace(out + ".tmp", out)  # whole when it appears: the test reads it as soon as it exists
"""
SEND = r"""
import socket, sys
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n):
    s.sendto(str(i).encode(), (addr, port))
"""


# Receives ``n`` bytes on a TCP port and answers one byte; says when it is bound.
SINK = r"""
import socket, sys
port, n, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port))
s.listen(1)
open(out + ".bound", "w").close()
c, _ = s.accept()
got = 0
while got < n:
    chunk = c.recv(65536)
    if not chunk:
        break
    got += len(chunk)
c.sendall(b"k")
open(out, "w").write(str(got))
"""
# Sends ``n`` bytes, waits for the answer; prints the seconds from connect to answer.
SOURCE = r"""
import socket, sys, time
addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.monotonic()
c = socket.create_connection((addr, port), timeout=60)
c.sendall(b"x" * n)
assert c.recv(1) == b"k"
print(time.monotonic() - t)
"""


def kbit_per_s(cluster, src: int, dst: int, n: int = 400_000) -> float:
    """The rate ``n`` bytes go from node ``src`` to node ``dst`` at, in kbit/s."""
    out = f"/tmp/tcp-{src}-{dst}-{uuid.uuid4().hex[:6]}"
    cluster.put_file(dst, "/tmp/sink.py", SINK.encode())
    cluster.exec(dst, ["sh", "-c", f"python3 /tmp/sink.py 7778 {n} {out} >/dev/null 2>&1 &"])
    wait_for_file(cluster, dst, out + ".bound")
    _, took = cluster.exec(src, ["python3", "-c", SOURCE, cluster.node(dst).address, "7778",
                                 str(n)])
    assert int(wait_for_file(cluster, dst, out)) == n
    return n * 8 / 1000 / float(took)


# Answers every datagram on a UDP port with the same bytes; logs the order they came in.
ECHO = r"""
import socket, sys
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", port))
open(out + ".bound", "w").close()
with open(out, "w", buffering=1) as log:
    while True:
        data, peer = s.recvfrom(64)
        log.write(data.decode() + "\n")
        s.sendto(data, peer)
"""
# Sends ``n`` numbered datagrams ``gap`` seconds apart; prints the round trip of each
# answer in ms (JSON), -1 where none came back.
PINGS = r"""
import json, select, socket, sys, time
addr, port, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent, rtt = {}, {}
for i in range(n):
    sent[i] = time.monotonic()
    s.sendto(str(i).encode(), (addr, port))
    end = time.monotonic() + gap
    while time.monotonic() < end:
        if select.select([s], [], [], max(0, end - time.monotonic()))[0]:
            i2 = int(s.recv(64))
            rtt[i2] = (time.monotonic() - sent[i2]) * 1000
end = time.monotonic() + 3
while len(rtt) < n and time.monotonic() < end:
    if select.select([s], [], [], 0.1)[0]:
        i2 = int(s.recv(64))
        rtt[i2] = (time.monotonic() - sent[i2]) * 1000
print(json.dumps([rtt.get(i, -1) for i in range(n)]))
"""


def pings(cluster, src: int, dst: int, n: int, gap_s: float) -> tuple[list[float], list[int]]:
    """Round trips (ms) of ``n`` datagrams from ``src`` to an echo on ``dst``, and the order
    ``dst`` received them in."""
    out = f"/tmp/echo-{src}-{dst}-{uuid.uuid4().hex[:6]}"
    cluster.put_file(dst, "/tmp/echo.py", ECHO.encode())
    cluster.exec(dst, ["sh", "-c", f"nohup python3 /tmp/echo.py 7779 {out} >/dev/null 2>&1 &"])
    try:
        wait_for_file(cluster, dst, out + ".bound")
        _, text = cluster.exec(src, ["python3", "-c", PINGS, cluster.node(dst).address, "7779",
                                     str(n), str(gap_s)])
        order = [int(x) for x in wait_for_file(cluster, dst, out).split()]
    finally:
        cluster.exec(dst, ["pkill", "-f", "/tmp/echo.py"], check=False)
    return json.loads(text), order


def wait_for_file(cluster, node: int, path: str, timeout_s: float = 15.0) -> str:
    """The file's text once it exists (an exec's output can come back empty under load)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(FileNotFoundError):
            return cluster.get_file(node, path).decode()
        assert time.monotonic() < deadline, f"n{node}: no {path} after {timeout_s:g} s"
        time.sleep(0.1)


def datagrams_heard(cluster, src: int, dst: int, n: int = 20) -> int:
    """Of ``n`` datagrams node ``src`` sends, how many node ``dst`` receives."""
    out = f"/tmp/udp-{src}-{dst}-{uuid.uuid4().hex[:6]}"
    cluster.put_file(dst, "/tmp/listen.py", LISTEN.encode())
    cluster.exec(dst, ["sh", "-c", f"python3 /tmp/listen.py 7777 {n} {out} >/dev/null 2>&1 &"])
    wait_for_file(cluster, dst, out + ".bound")
    cluster.exec(src, ["python3", "-c", SEND, cluster.node(dst).address, "7777", str(n)])
    # Every datagram that gets through is in the listener's socket buffer by the time the
    # sender is done (one bridge); those dropped never arrive, however long it waited.
    cluster.exec(dst, ["touch", out + ".stop"])
    return int(wait_for_file(cluster, dst, out))


@pytest.fixture(scope="module")
def cluster(docker_client, node_image):
    yield from module_cluster(node_image, "f", faketime=True, seed=3)


def connects(cluster, src: int, dst: int, tries: int, timeout_s: float = 0.3) -> int:
    """TCP connections from node ``src`` to node ``dst``'s port 9093 that succeed."""
    addr = cluster.node(dst).address
    _, out = cluster.exec(src, ["python3", "-c", PROBE, addr, str(tries), str(timeout_s)])
    return int(out.strip())


async def offsets_of_every_node(nodes) -> dict[int, float]:
    seen = await clock_offsets(nodes, within_s=30)
    assert len(seen) == len(nodes), f"unanswered after 30 s: {seen}"
    return seen


def status(cluster, node: int) -> dict:
    return json.loads(cluster.exec(node, ["ck-ctl", "status"])[1])


def test_pause_stops_the_process_and_resume_brings_it_back(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path)

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "pause", "one", 5))
        node = rows(history, "pause")[0]["value"]["nodes"][0]
        assert status(cluster, node)["paused"] is True
        assert node not in await describe_all([cluster.node(node)], 1.0), "a paused node answers"
        await stop()
        assert status(cluster, node)["paused"] is False
        # a resumed process answers again (it may first work through what piled up while it
        # was stopped: on a loaded machine a single 2 s try went unanswered once in two runs)
        assert node in await describe_all([cluster.node(node)], 2.0, within_s=30), \
            "the resumed node does not answer"
        assert rows(history, "resume")[0]["value"]["nodes"] == [node]
    asyncio.run(scenario())


def test_clock_bump_is_seen_in_the_node_clock_and_reset_undoes_it(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, clock={"max_skew_s": 120})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "clock", "all", 5, "bump"))
        bump = rows(history, "clock-bump")[0]["value"]
        planned = {int(n): o for n, o in bump["offsets"].items()}
        assert sorted(planned) == [1, 2, 3] and all(12 <= abs(o) <= 120 for o in planned.values())
        seen = await offsets_of_every_node(cluster.nodes)
        for n, o in planned.items():
            assert abs(seen[n] - o) < 1.0, (n, o, seen)
            assert abs(float(bump["measured"][str(n)]) - o) < 1.0, bump
        print(f"clock bump: planned {planned}, node clocks {seen}")
        await stop()
        seen = await offsets_of_every_node(cluster.nodes)
        assert all(abs(o) < 1.0 for o in seen.values()) and len(seen) == 3, seen
        print(f"after reset: {seen}")
        # the skewed nodes kept serving: a controller answers register reads
        await wait_for_service(cluster.nodes, 30, print)
    asyncio.run(scenario())


def test_clock_rate_slows_the_node_clock_without_a_jump_and_reset_undoes_it(cluster, tmp_path):
    """libfaketime's speed factor set at run time: the package computes, in the node, the
    offset that keeps the clock continuous (libfaketime counts a rate from the process's
    start), so the clock changes pace without jumping; its measured rate is recorded."""
    c, history = campaign(cluster, tmp_path, **{"clock-rate": {"rate": [0.5, 0.5]}})

    async def scenario():
        before = await offsets_of_every_node(cluster.nodes)
        stop = await c.start_fault(FaultStep(0, 0, "clock-rate", "all", 10))
        started = time.monotonic()
        at_start = await offsets_of_every_node(cluster.nodes)
        row = rows(history, "clock-rate")[0]["value"]
        assert row["rates"] == {"1": 0.5, "2": 0.5, "3": 0.5} and "failed" not in row, row
        for n in (1, 2, 3):  # no jump: what a second of half pace loses at most
            assert abs(at_start[n] - before[n]) < 1.0, (n, before, at_start)
        await asyncio.sleep(4)
        later = await offsets_of_every_node(cluster.nodes)
        elapsed = time.monotonic() - started
        for n in (1, 2, 3):  # half pace: the offset falls by half the time elapsed
            lost = at_start[n] - later[n]
            assert abs(lost - elapsed / 2) < 1.0, (n, at_start, later, elapsed)
        print(f"clock rate 0.5: offsets {at_start} then {later} after {elapsed:.1f} s")
        await stop()
        reset = rows(history, "clock-rate-reset")[0]["value"]
        assert len(reset["measured_rates"]) == 3 and all(
            0.3 < r < 0.7 for r in reset["measured_rates"].values()), reset
        seen = await offsets_of_every_node(cluster.nodes)
        assert all(abs(o) < 1.0 for o in seen.values()) and len(seen) == 3, seen
        await wait_for_service(cluster.nodes, 30, print)
    asyncio.run(scenario())


def create_topic(bootstrap: str, topic: str, config: dict):
    """A 1-partition, 3-replica topic, once every broker is back: a test before may have
    killed or paused one, which stays fenced until its session is renewed."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        try:
            # a request that times out is asked again (the next answer may be that it exists):
            # on a starved machine one went unanswered for 30 s and the future's own timeout
            # escaped the loop
            admin.create_topics([NewTopic(topic, 1, 3, config=config)],
                                request_timeout=20)[topic].result(25)
            break
        except concurrent.futures.TimeoutError:
            if time.monotonic() > deadline:
                raise
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:  # an earlier try got through
                break
            if time.monotonic() > deadline or not (
                    err.retriable() or "available brokers" in err.str()
                    or err.code() == KafkaError._TIMED_OUT):
                raise
            time.sleep(0.5)
    while True:  # every broker knows the partition and its leader (metadata propagates)
        views = []
        for address in (a.rsplit(":", 1)[0] for a in bootstrap.split(",")):
            try:
                views.append(broker_metadata(address, topic, 5.0))
            except OSError:
                views.append([])
        if all(v and v[0][1] >= 0 for v in views):
            return admin
        assert time.monotonic() < deadline, f"{topic}: no leader known everywhere after 60 s"
        time.sleep(0.2)


def test_a_clock_bump_moves_the_log_append_time_the_leader_stamps(cluster, tmp_path):
    """A topic with message.timestamp.type=LogAppendTime takes its records' timestamps from
    the leader's wall clock (Kafka's Time.milliseconds()): bumped, the timestamps move with
    it, in the produce answer and in what consumers read."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
    bootstrap = ",".join(f"{n.address}:9092" for n in cluster.nodes)
    topic = f"append-time-{uuid.uuid4().hex[:6]}"
    admin = create_topic(bootstrap, topic, {"message.timestamp.type": "LogAppendTime"})
    c, history = campaign(cluster, tmp_path, clock={"max_skew_s": 1000})

    def produce_one() -> tuple[int, int]:
        """(timestamp type, timestamp ms) of one acknowledged record."""
        got = []
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
        p.produce(topic, b"v", on_delivery=lambda err, msg: got.append((err, msg.timestamp())))
        p.flush(40)
        [(err, stamp)] = got
        assert err is None, err
        return stamp

    async def scenario():
        before = await asyncio.to_thread(produce_one)
        stop = await c.start_fault(FaultStep(0, 0, "clock", "all", 5, "bump"))
        measured = rows(history, "clock-bump")[0]["value"]["measured"]
        leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
        during = await asyncio.to_thread(produce_one)
        await stop()
        return before, during, measured[str(leader)], leader
    before, during, offset_s, leader = asyncio.run(scenario())
    now_ms = time.time() * 1000
    assert before[0] == during[0] == TIMESTAMP_LOG_APPEND_TIME
    assert abs(before[1] - now_ms) < 60_000, before
    print(f"leader n{leader} clock at {offset_s:+.1f} s: LogAppendTime "
          f"{(during[1] - now_ms) / 1000:+.1f} s from the harness's clock")
    assert abs(during[1] - now_ms - offset_s * 1000) < 60_000, (during, offset_s)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = []
        deadline = time.monotonic() + 30
        while len(read) < 2 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                read.append(msg.timestamp())
    finally:
        consumer.close()
    assert read == [before, during]


def test_a_leader_whose_clock_went_back_refuses_records_from_its_future(cluster, tmp_path):
    """message.timestamp.after.max.ms (KIP-937) bounds CreateTime by the leader's wall clock:
    set 300 s back, the leader finds the producer's timestamps 5 minutes in its future and
    refuses them (INVALID_TIMESTAMP); reset, it takes them again."""
    from confluent_kafka import KafkaError, Producer
    from nemesis.packages.clock import clock_script
    bootstrap = ",".join(f"{n.address}:9092" for n in cluster.nodes)
    topic = f"bounded-{uuid.uuid4().hex[:6]}"
    admin = create_topic(bootstrap, topic, {"message.timestamp.after.max.ms": "60000"})

    def produce_one():
        got = []
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                      "message.timeout.ms": 30000})
        p.produce(topic, b"v", on_delivery=lambda err, msg: got.append(err))
        p.flush(40)
        return got[0]
    assert produce_one() is None
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    try:
        cluster.exec(leader, clock_script(-300.0))
        seen = asyncio.run(offsets_of_every_node([cluster.node(leader)]))
        assert seen[leader] < -290, seen
        err = produce_one()
        assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP, err
    finally:
        cluster.exec(leader, clock_script(0.0))
    assert produce_one() is None


def test_clock_strobe_jumps_back_and_forth_until_reset(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, clock={"strobe_delta_s": 30, "strobe_period_ms": 200})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "clock", "one", 5, "strobe"))
        node = rows(history, "clock-strobe")[0]["value"]["nodes"][0]
        samples = []
        for _ in range(25):
            samples.append((await clock_offsets([cluster.node(node)])).get(node))
            await asyncio.sleep(0.13)
        assert any(o is not None and abs(o - 30) < 1.5 for o in samples), samples
        assert any(o is not None and abs(o) < 1.5 for o in samples), samples
        print(f"clock strobe on n{node}: offsets {samples}")
        await stop()
        after = []
        for _ in range(5):
            after.append((await offsets_of_every_node([cluster.node(node)]))[node])
            await asyncio.sleep(0.2)
        assert all(abs(o) < 1.0 for o in after), after
    asyncio.run(scenario())


def test_packet_loss_drops_some_traffic_and_healing_restores_it(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, **{"packet-loss": {"probability": 0.5}})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "packet-loss", "one", 5))
        node = rows(history, "start-packet-loss")[0]["value"]["nodes"][0]
        other = next(n for n in (1, 2, 3) if n != node)
        ok = await asyncio.to_thread(connects, cluster, other, node, 100)
        assert 10 <= ok <= 90, f"{ok}/100 connections with half the packets dropped"
        print(f"packet loss p=0.5 on n{node}: {ok}/100 connections from n{other} within 0.3 s")
        await stop()
        ok = await asyncio.to_thread(connects, cluster, other, node, 50, 1.0)
        assert ok == 50, f"{ok}/50 connections after healing"
    asyncio.run(scenario())


def test_partition_cuts_traffic_and_healing_restores_it(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path)

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "partition", "isolate-one", 5))
        grudge = rows(history, "start-partition")[0]["value"]["grudge"]
        node = next(int(n) for n, drops in grudge.items() if len(drops) == 2)
        other = next(n for n in (1, 2, 3) if n != node)
        assert await asyncio.to_thread(connects, cluster, other, node, 10) == 0
        await stop()
        assert await asyncio.to_thread(connects, cluster, other, node, 10, 1.0) == 10
    asyncio.run(scenario())


def test_a_one_way_partition_lets_one_direction_through(cluster, tmp_path):
    """deaf: the target hears no one, and everyone still hears it; the undo restores both."""
    c, history = campaign(cluster, tmp_path)

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "one-way", "one", 5, "deaf"))
        try:  # the module's cluster serves the next tests: never leave it deaf
            node = rows(history, "start-one-way")[0]["value"]["nodes"][0]
            other = next(n for n in (1, 2, 3) if n != node)
            heard = await asyncio.to_thread(datagrams_heard, cluster, other, node)
            told = await asyncio.to_thread(datagrams_heard, cluster, node, other)
        finally:
            await stop()
        print(f"one-way deaf n{node}: hears {heard}/20 from n{other}, is heard {told}/20")
        assert (heard, told) == (0, 20)
        assert await asyncio.to_thread(datagrams_heard, cluster, other, node) == 20
    asyncio.run(scenario())


def test_a_bandwidth_cap_holds_the_targets_sends_to_its_rate(cluster, tmp_path):
    """A token bucket lets nothing through faster than its rate (the burst aside): the
    target's sends take at least as long as the cap says; lifted, they go at bridge speed."""
    c, history = campaign(cluster, tmp_path, bandwidth={"rate_kbit": 2000, "burst_kb": 16})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "bandwidth", "one", 5))
        node = rows(history, "start-bandwidth")[0]["value"]["nodes"][0]
        other = next(n for n in (1, 2, 3) if n != node)
        capped = await asyncio.to_thread(kbit_per_s, cluster, node, other)
        incoming = await asyncio.to_thread(kbit_per_s, cluster, other, node)
        await stop()
        lifted = await asyncio.to_thread(kbit_per_s, cluster, node, other)
        print(f"bandwidth cap 2000 kbit/s on n{node}: sends at {capped:.0f} kbit/s, receives "
              f"at {incoming:.0f}; lifted: {lifted:.0f} kbit/s")
        # 400 kB through a 16 kB burst: at most 400/384 of the rate, and some for the TCP
        # and IP headers that the bucket counts too
        assert capped <= 2000 * 1.1, capped
        assert incoming > 2000 * 1.1 and lifted > 2000 * 1.1, (incoming, lifted)
    asyncio.run(scenario())


def test_delay_adds_its_latency_and_jitter_reorders(cluster, tmp_path):
    """What the target receives comes delay_ms late (the round trip's median within 20% of
    the setting above the undelayed one), out of order where the jitter exceeds the gap
    between packets; lifted, the round trips are back."""
    c, history = campaign(cluster, tmp_path, delay={"delay_ms": 200, "jitter_ms": 60})

    async def scenario():
        base, _ = await asyncio.to_thread(pings, cluster, 1, 2, 20, 0.05)
        stop = await c.start_fault(FaultStep(0, 0, "delay", "one", 30))
        node = rows(history, "start-delay")[0]["value"]["nodes"][0]
        other = next(n for n in (1, 2, 3) if n != node)
        slow, order = await asyncio.to_thread(pings, cluster, other, node, 60, 0.01)
        await stop()
        after, _ = await asyncio.to_thread(pings, cluster, other, node, 20, 0.05)
        return base, slow, order, after
    base, slow, order, after = asyncio.run(scenario())
    median = statistics.median
    added = median(slow) - median(base)
    inversions = sum(1 for a, b in zip(order, order[1:]) if b < a)
    print(f"delay 200±60 ms: round trip median {median(base):.1f} -> {median(slow):.1f} ms "
          f"(+{added:.1f}), {inversions} of 59 neighbours out of order; after: "
          f"{median(after):.1f} ms")
    assert -1 not in slow and sorted(order) == list(range(60)), (slow, order)
    assert 160 <= added <= 240, added
    assert inversions > 0, order
    assert median(after) < 100, after


def test_duplication_delivers_copies_until_it_stops(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, duplicate={"probability": 0.5})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "duplicate", "one", 30))
        node = rows(history, "start-duplicate")[0]["value"]["nodes"][0]
        other = next(n for n in (1, 2, 3) if n != node)
        _, during = await asyncio.to_thread(pings, cluster, other, node, 200, 0.002)
        await stop()
        _, after = await asyncio.to_thread(pings, cluster, other, node, 100, 0.002)
        return during, after
    during, after = asyncio.run(scenario())
    copies = len(during) - len(set(during))
    print(f"duplicate p=0.5: {copies} copies of 200 datagrams; after: "
          f"{len(after) - len(set(after))} of 100")
    assert set(during) == set(range(200)) and 40 <= copies <= 160, copies
    assert sorted(after) == list(range(100))


def test_kill_stops_the_node_until_it_is_started(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path)

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "kill", "one", 5))
        node = rows(history, "kill")[0]["value"]["nodes"][0]
        assert status(cluster, node)["running"] is False
        await stop()
        assert status(cluster, node)["running"] is True
    asyncio.run(scenario())


def test_corruption_is_detected_by_crc_and_the_node_catches_up(cluster, tmp_path):
    c, history = campaign(cluster, tmp_path, corrupt={"files": ["metadata"]})

    async def scenario():
        stop = await c.start_fault(FaultStep(0, 0, "corrupt", "one", 5, "bitflip"))
        value = rows(history, "corrupt")[0]["value"]
        node = value["nodes"][0]
        damage = value["damage"][str(node)]
        assert damage and damage[0]["file"].endswith(".log") and len(damage[0]["flipped"]) == 3
        assert status(cluster, node)["running"] is False, "files are corrupted while it is down"
        await stop()
        deadline = time.monotonic() + 60
        while True:
            log = cluster.exec(node, ["cat", "/var/log/chaoskraft/node.log"])[1]
            described = await describe_all(cluster.nodes, 2.0)
            hwm = max((d.high_watermark for d in described.values()), default=-1)
            mine = described.get(node)
            if "recovery:" in log and mine is not None and mine.log_end_offset >= hwm > 0:
                break
            assert time.monotonic() < deadline, (log[-2000:], described)
            await asyncio.sleep(0.5)
        segment = damage[0]["file"].rsplit("/", 1)[1]
        assert any("recovery:" in s and segment in s and "truncated at byte" in s
                   for s in log.splitlines()), log[-2000:]
    asyncio.run(scenario())


def test_corrupt_truncate_cuts_the_newest_segment_tail(tmp_path):
    """The corruption script itself, on a local directory shaped like a node's."""
    import subprocess
    import sys
    for name in ("queue-0", "__cluster_metadata-0"):
        d = tmp_path / name
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(b"x" * 10_000)
        (d / "00000000000000000100.log").write_bytes(b"y" * 5_000)
    cmd = corrupt_script(str(tmp_path), "truncate", "partitions", "s1")
    out = subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, check=True)
    done = json.loads(out.stdout)
    assert len(done) == 1 and done[0]["file"].endswith("queue-0/00000000000000000100.log")
    cut = done[0]["truncated_bytes"]
    assert 1 <= cut <= 4096
    assert (tmp_path / "queue-0" / "00000000000000000100.log").stat().st_size == 5_000 - cut
    assert (tmp_path / "__cluster_metadata-0" / "00000000000000000100.log").stat().st_size == 5_000
