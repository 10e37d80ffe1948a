"""Register service on a real 3-node cluster (processes on 127.0.0.1-3, real fsync).

    python bench/real_cluster.py [--clients 8] [--seconds 10]

Prints acknowledged writes per second and p50 / p99 latency of writes and reads.
"""
import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.local_cluster import LocalCluster  # noqa: E402
from workloads.register_client import Indeterminate  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


async def run(cluster: LocalCluster, clients: int, seconds: float) -> None:
    leader = await cluster.wait_for_leader()
    lat = {"write": [], "read": []}
    errors = 0
    stop = time.monotonic() + seconds

    async def worker(w: int) -> None:
        nonlocal errors
        c = cluster.client(leader, timeout_s=5)
        i = 0
        try:
            while time.monotonic() < stop:
                f = "write" if i % 2 == 0 else "read"
                t = time.perf_counter()
                try:
                    r = await (c.write(f"k{w}", i) if f == "write" else c.read(f"k{w}"))
                except Indeterminate:
                    errors += 1
                    continue
                if r.outcome == "ok":
                    lat[f].append(time.perf_counter() - t)
                else:
                    errors += 1
                i += 1
        finally:
            await c.close()
    t0 = time.monotonic()
    await asyncio.gather(*(worker(w) for w in range(clients)))
    wall = time.monotonic() - t0
    w, r = lat["write"], lat["read"]
    print(f"3 nodes, {clients} clients, {wall:.1f} s: {len(w) / wall:.0f} writes/s, "
          f"{len(r) / wall:.0f} reads/s, {errors} errors")
    print(f"write latency p50 {pct(w, .5):.2f} ms p99 {pct(w, .99):.2f} ms; "
          f"read latency p50 {pct(r, .5):.2f} ms p99 {pct(r, .99):.2f} ms"
          + (f"; mean write {statistics.mean(w) * 1000:.2f} ms" if w else ""))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--seconds", type=float, default=10)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cluster = LocalCluster(Path(d), nodes=3)
        cluster.start_all()
        try:
            asyncio.run(run(cluster, a.clients, a.seconds))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
