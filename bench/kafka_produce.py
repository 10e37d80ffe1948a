"""Produce throughput and latency on the 5-node Docker cluster, and leader fail-over time.

    python bench/kafka_produce.py [--seconds 20] [--size 1024] [--kills 3]

confluent-kafka (librdkafka) producer, acks=all, idempotence on, a topic of 6
partitions with replication factor 3 and min.insync.replicas=2. Prints:
- throughput: messages/s and MB/s acknowledged with the producer sending as
  fast as it can (latency then is mostly time queued in the client);
- latency: p50/p99 from produce() to the delivery report at a fixed rate of
  ``--rate`` messages/s;
- for each of ``--kills`` rounds: the time from SIGKILL of partition 0's
  leader to the acknowledgement of the first write to partition 0 *sent
  after* the kill (then the node is restarted and the cluster heals).
The cluster carries the label chaoskraft=1 and is removed at the end.

``--journal both`` (the default) measures throughput and latency twice, on a cluster whose
nodes journal every message (``chaoskraft.journal.path``, on by default in Docker and over
SSH) and on one whose nodes do not, and prints the two side by side: the journal's cost.
``on`` / ``off`` measure one of them (the kills run on the first cluster only).
"""
import argparse
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from harness.backends.docker_backend import DockerCluster  # noqa: E402
from harness.images import build_images  # noqa: E402

TOPIC = "bench"
PARTITIONS = 6


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


def metadata(bootstrap):
    md = AdminClient({"bootstrap.servers": bootstrap, "error_cb": lambda e: None}).list_topics(
        TOPIC, timeout=10)
    t = md.topics[TOPIC]
    return len(md.brokers), {p.id: (p.leader, list(p.replicas), list(p.isrs))
                             for p in t.partitions.values()} if t.error is None else {}


def wait_healthy(bootstrap, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            n, parts = metadata(bootstrap)
            if n == 5 and len(parts) == PARTITIONS and all(
                    sorted(i) == sorted(r) for _, r, i in parts.values()):
                return parts
        except Exception:  # noqa: BLE001 - still starting
            pass
        time.sleep(0.3)
    raise TimeoutError("cluster did not become healthy")


class Load:
    """A producer sending continuously; records send and ack times."""

    def __init__(self, bootstrap, size, rate=None):
        self.rate = rate
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "error_cb": lambda e: None})
        self.payload = b"x" * size
        self.latencies = []
        self.acks = []  # (ack time, send time, partition)
        self.errors = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self):
        i = 0
        start = time.monotonic()
        while not self.stop.is_set():
            if self.rate and i > (time.monotonic() - start) * self.rate:
                self.p.poll(0.001)
                continue
            sent = time.perf_counter()
            sent_mono = time.monotonic()

            def cb(err, msg, sent=sent, sent_mono=sent_mono):
                now = time.perf_counter()
                if err is None:
                    self.latencies.append(now - sent)
                    self.acks.append((time.monotonic(), sent_mono, msg.partition()))
                else:
                    self.errors += 1
            try:
                self.p.produce(TOPIC, value=self.payload, partition=i % PARTITIONS, on_delivery=cb)
                i += 1
            except BufferError:
                self.p.poll(0.01)
            self.p.poll(0)
        self.p.flush(120)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000, help="messages/s for the latency pass")
    ap.add_argument("--journal", choices=("both", "on", "off"), default="both",
                    help="the nodes' message journal on, off, or one cluster of each")
    args = ap.parse_args()
    image = build_images(log=lambda m: None)
    figures = {}
    for n, journal in enumerate({"both": ["on", "off"]}.get(args.journal, [args.journal])):
        print(f"-- cluster with the message journal {journal}")
        figures[journal] = measure(args, image, journal == "on", kills=args.kills if n == 0 else 0)
    if len(figures) == 2:
        (on_rate, on_p50, on_p99), (off_rate, off_p50, off_p99) = figures["on"], figures["off"]
        print(f"journal cost: throughput {on_rate:,.0f} msg/s with it, {off_rate:,.0f} without "
              f"({(on_rate / off_rate - 1) * 100:+.1f} %); latency p50 {on_p50:.1f} vs "
              f"{off_p50:.1f} ms, p99 {on_p99:.1f} vs {off_p99:.1f} ms")
    return 0


def measure(args, image: str, journal: bool, kills: int) -> tuple[float, float, float]:
    """(throughput msg/s, latency p50 ms, p99 ms) on a fresh cluster, then ``kills`` rounds."""
    cluster = DockerCluster("b" + uuid.uuid4().hex[:7], image, nodes=5, controllers=3,
                            log=lambda m: None,
                            overrides={} if journal else {"chaoskraft.journal.path": ""})
    try:
        cluster.up()
        bootstrap = ",".join(f"{n.address}:9092" for n in cluster.nodes)
        deadline = time.monotonic() + 60
        while True:
            try:
                admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": lambda e: None})
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={
                    "min.insync.replicas": "2"})])[TOPIC].result(30)
                break
            except Exception:  # noqa: BLE001 - brokers still registering
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        wait_healthy(bootstrap)
        with Load(bootstrap, args.size) as load:
            time.sleep(2)  # warm-up
            n0, t0 = len(load.latencies), time.monotonic()
            time.sleep(args.seconds)
            n1, t1 = len(load.latencies), time.monotonic()
            window = load.latencies[n0:n1]
        rate = (n1 - n0) / (t1 - t0)
        print(f"throughput: acks=all, RF=3, min ISR 2, {args.size} B messages, idempotent, "
              f"{args.seconds:.0f} s flat out: {rate:,.0f} msg/s, {rate * args.size / 1e6:.2f} MB/s "
              f"(p50 {pct(window, 0.5):.1f} ms, p99 {pct(window, 0.99):.1f} ms incl. client "
              f"queueing), errors {load.errors}")
        with Load(bootstrap, args.size, args.rate) as load:
            time.sleep(2)
            n0 = len(load.latencies)
            time.sleep(args.seconds)
            window = load.latencies[n0:]
        print(f"latency at {args.rate:,.0f} msg/s: p50 {pct(window, 0.5):.1f} ms, "
              f"p99 {pct(window, 0.99):.1f} ms ({len(window)} messages), errors {load.errors}")
        latency = (pct(window, 0.5), pct(window, 0.99))
        for k in range(kills):
            parts = wait_healthy(bootstrap)
            victim = parts[0][0]
            with Load(bootstrap, args.size, args.rate) as load:
                time.sleep(2)
                cluster.kill_node(victim)  # returns once the process is dead
                killed = time.monotonic()

                def first_after():
                    return next((t for t, sent, p in load.acks if sent > killed and p == 0), None)
                deadline = killed + 120
                while time.monotonic() < deadline and first_after() is None:
                    time.sleep(0.05)
                after = first_after()
                cluster.start_node(victim)
            took = f"{after - killed:.2f} s" if after else "no ack within 120 s"
            print(f"kill {k + 1}: SIGKILL of node {victim} (leader of {TOPIC}-0) -> next acked "
                  f"write to {TOPIC}-0 after {took}")
        return rate, *latency
    finally:
        cluster.down()


if __name__ == "__main__":
    sys.exit(main())
