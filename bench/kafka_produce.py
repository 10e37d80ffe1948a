"""Produce throughput and latency on the 5-node Docker cluster, and leader fail-over time.

    python bench/kafka_produce.py [--seconds 20] [--size 1024] [--kills 3]
                                  [--codecs none,lz4,zstd] [--journal both --repeat 3]

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
``on`` / ``off`` measure one of them (the kills run on the first cluster only). With
``--repeat N`` the clusters alternate on, off, on, off, ... N times each and the medians are
compared (one cluster after another shares the machine's state unevenly: the first pass of
a run measured slower than the second whichever it was).

``--codecs`` measures throughput and latency once per producer codec (``compression.type``:
none, gzip, snappy, lz4, zstd) on the same cluster. The payload is text drawn from a small
vocabulary by a fixed seed (compressible about as log lines are, not a run of one byte).
"""
import argparse
import random
import statistics
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


WORDS = ("partition", "leader", "epoch", "offset", "fetch", "produce", "replica", "isr",
         "commit", "abort", "broker", "controller", "record", "batch", "segment", "ok", "info")


def payload(size: int) -> bytes:
    """``size`` bytes of log-like text from a fixed seed: compressible, not trivially."""
    rng = random.Random(7)
    out = []
    n = 0
    while n < size:
        word = f"{rng.choice(WORDS)}={rng.randrange(100000)} "
        out.append(word)
        n += len(word)
    return "".join(out).encode()[:size]


class Load:
    """A producer sending continuously; records send and ack times."""

    def __init__(self, bootstrap, size, rate=None, codec="none"):
        self.rate = rate
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5, "error_cb": lambda e: None, "compression.type": codec})
        self.payload = payload(size)
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
    ap.add_argument("--repeat", type=int, default=1,
                    help="clusters of each journal setting, alternating (medians compared)")
    ap.add_argument("--codecs", default="none",
                    help="comma-separated producer codecs, each measured on every cluster")
    args = ap.parse_args()
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    bad = [c for c in codecs if c not in ("none", "gzip", "snappy", "lz4", "zstd")]
    if bad or args.repeat < 1:
        ap.error(f"--codecs: unknown codec {bad[0]!r}" if bad else "--repeat must be at least 1")
    image = build_images(log=lambda m: None)
    figures: dict[str, list] = {}
    order = {"both": ["on", "off"]}.get(args.journal, [args.journal]) * args.repeat
    for n, journal in enumerate(order):
        print(f"-- cluster {n + 1}/{len(order)}: the message journal {journal}")
        figures.setdefault(journal, []).append(
            measure(args, image, journal == "on", codecs, kills=args.kills if n == 0 else 0))
    for codec in codecs:
        rows = {j: [f[codec] for f in runs] for j, runs in figures.items()}
        for j, runs in rows.items():
            if len(runs) > 1:
                print(f"{codec}, journal {j}: throughput " + ", ".join(
                    f"{r[0]:,.0f}" for r in runs) + " msg/s")
        if len(rows) == 2:
            on = [statistics.median(r[i] for r in rows["on"]) for i in range(3)]
            off = [statistics.median(r[i] for r in rows["off"]) for i in range(3)]
            print(f"journal cost ({codec}{', medians of ' + str(args.repeat) if args.repeat > 1 else ''}): "
                  f"throughput {on[0]:,.0f} msg/s with it, {off[0]:,.0f} without "
                  f"({(on[0] / off[0] - 1) * 100:+.1f} %); latency p50 {on[1]:.1f} vs "
                  f"{off[1]:.1f} ms, p99 {on[2]:.1f} vs {off[2]:.1f} ms")
    return 0


def measure(args, image: str, journal: bool, codecs: list[str],
            kills: int) -> dict[str, tuple[float, float, float]]:
    """codec -> (throughput msg/s, latency p50 ms, p99 ms) on a fresh cluster, then ``kills``
    rounds."""
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
        out = {}
        for codec in codecs:
            out[codec] = passes(args, bootstrap, codec)
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
        return out
    finally:
        cluster.down()


def passes(args, bootstrap: str, codec: str) -> tuple[float, float, float]:
    """The throughput pass (flat out) and the latency pass (at ``--rate``) of one codec."""
    with Load(bootstrap, args.size, codec=codec) as load:
        time.sleep(2)  # warm-up
        n0, t0 = len(load.latencies), time.monotonic()
        time.sleep(args.seconds)
        n1, t1 = len(load.latencies), time.monotonic()
        window = load.latencies[n0:n1]
    rate = (n1 - n0) / (t1 - t0)
    print(f"[{codec}] throughput: acks=all, RF=3, min ISR 2, {args.size} B messages, "
          f"idempotent, {args.seconds:.0f} s flat out: {rate:,.0f} msg/s, "
          f"{rate * args.size / 1e6:.2f} MB/s (p50 {pct(window, 0.5):.1f} ms, p99 "
          f"{pct(window, 0.99):.1f} ms incl. client queueing), errors {load.errors}")
    with Load(bootstrap, args.size, args.rate, codec=codec) as load:
        time.sleep(2)
        n0 = len(load.latencies)
        time.sleep(args.seconds)
        window = load.latencies[n0:]
    print(f"[{codec}] latency at {args.rate:,.0f} msg/s: p50 {pct(window, 0.5):.1f} ms, "
          f"p99 {pct(window, 0.99):.1f} ms ({len(window)} messages), errors {load.errors}")
    return rate, pct(window, 0.5), pct(window, 0.99)


if __name__ == "__main__":
    sys.exit(main())
