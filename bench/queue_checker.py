"""The queue checkers in Spark on a synthetic history of 10 million operations.

    python bench/queue_checker.py [--ops 10000000] [--keys 64] [--master local[2]]

Generates a queue history (sends acknowledged with offsets, polls that read
the partitions in order, final polls) with planted anomalies of every class
the checkers know, writes it as Parquet in row groups (never all in memory),
runs ``checkers.queue.check_queue`` through Spark and prints the time it
took, whether every planted anomaly was found, and the peak memory of the
driver (this Python process) and of the JVM. No test asserts these numbers.
"""
import argparse
import json
import os
import random
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.parquet import write_parquet  # noqa: E402
from checkers.queue import ANOMALIES, check_queue  # noqa: E402
from checkers.spark import spark_session, stop_session  # noqa: E402

PROCESSES = 32


def synthetic(ops: int, keys: int, seed: int, planted: dict):
    """Rows of a history with ``ops`` operations; ``planted`` collects (anomaly -> key)."""
    rng = random.Random(seed)
    logs = {f"k{k}": [] for k in range(keys)}  # key -> values in offset order
    positions = {}  # (process, key) -> next offset the process's consumer reads
    index = 0
    # Anomalies are planted on their own keys, the last len(ANOMALIES) ones.
    special = {f"k{keys - 1 - i}": a for i, a in enumerate(ANOMALIES)}
    planted.update({a: k for k, a in special.items()})
    seq = [0] * PROCESSES

    def row(process, type_, f, key, value):
        nonlocal index
        r = {"index": index, "time": index * 1000, "process": process, "type": type_, "f": f,
             "key": key, "value": value}
        index += 1
        return r
    for p in range(PROCESSES):
        yield row(p, "invoke", "assign", None, None)
        yield row(p, "ok", "assign", None, sorted(logs))
    normal = [k for k in logs if k not in special]
    for n in range(ops):
        p = rng.randrange(PROCESSES)
        if rng.random() < 0.5:
            key = rng.choice(normal)
            seq[p] += 1
            v = p * 10_000_000 + seq[p]
            yield row(p, "invoke", "send", key, {"value": v})
            logs[key].append(v)
            yield row(p, "ok", "send", key, {"value": v, "offset": len(logs[key]) - 1})
        else:
            key = rng.choice(normal)
            start = positions.get((p, key), 0)
            msgs = [[o, logs[key][o]] for o in range(start, min(len(logs[key]), start + 20))]
            positions[(p, key)] = start + len(msgs)
            yield row(p, "invoke", "poll", None, None)
            yield row(p, "ok", "poll", None, {key: msgs} if msgs else {})
    q = 10**9  # planted values, far from the generated ones

    def send(p, key, v, offset, type_="ok"):
        yield row(p, "invoke", "send", key, {"value": v})
        yield row(p, type_, "send", key, {"value": v, "offset": offset} if type_ == "ok"
                  else {"value": v})

    def poll(p, key, msgs):
        yield row(p, "invoke", "poll", None, None)
        yield row(p, "ok", "poll", None, {key: msgs})
    final = {}
    for key, a in special.items():
        v = [q + i for i in range(4)]
        if a == "inconsistent-offsets":
            yield from send(0, key, v[0], 0)
            yield from poll(1, key, [[0, v[1]]])
            final[key] = [[0, v[0]]]
        elif a == "duplicate":
            yield from send(0, key, v[0], 0)
            yield from poll(1, key, [[0, v[0]], [1, v[0]]])
            final[key] = [[0, v[0]], [1, v[0]]]
        elif a == "G1a":
            yield from send(0, key, v[0], None, "fail")
            yield from poll(1, key, [[0, v[0]]])
            final[key] = [[0, v[0]]]
        elif a == "lost-write":
            yield from send(0, key, v[0], 0)
            yield from send(0, key, v[1], 1)
            yield from poll(1, key, [[1, v[1]]])
            final[key] = [[1, v[1]]]
        elif a == "unseen":
            yield from send(0, key, v[0], 0)
            final[key] = []
        elif a == "durability":
            yield from send(0, key, v[0], 0)
            yield from poll(1, key, [[0, v[0]]])
            final[key] = []
        elif a == "nonmonotonic-send":
            yield from send(0, key, v[0], 1)
            yield from send(0, key, v[1], 0)
            final[key] = [[0, v[1]], [1, v[0]]]
        elif a in ("int-poll-skip", "poll-skip"):
            for i in range(3):
                yield from send(0, key, v[i], i)
            if a == "int-poll-skip":
                yield from poll(1, key, [[0, v[0]], [2, v[2]]])
            else:
                yield from poll(2, key, [[0, v[0]]])
                yield from poll(2, key, [[2, v[2]]])
            final[key] = [[i, v[i]] for i in range(3)]
        elif a in ("int-nonmonotonic-poll", "nonmonotonic-poll"):
            for i in range(2):
                yield from send(0, key, v[i], i)
            if a == "int-nonmonotonic-poll":
                yield from poll(1, key, [[1, v[1]], [0, v[0]]])
            else:
                yield from poll(3, key, [[0, v[0]], [1, v[1]]])
                yield from poll(3, key, [[1, v[1]]])
            final[key] = [[i, v[i]] for i in range(2)]
    for key in normal:
        final[key] = [[o, v] for o, v in enumerate(logs[key])]
    for key, msgs in final.items():  # one final poll per partition, as the runner's reads go
        yield row(1000, "invoke", "final-poll", None, None)
        yield row(1000, "ok", "final-poll", None, {key: msgs})


def jvm_peak_kb() -> int | None:
    """VmHWM of the Spark JVM (a child of this process)."""
    best = None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"java" in cmd and b"spark" in cmd.lower():
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    kb = int(line.split()[1])
                    best = max(best or 0, kb)
    return best


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--master", default=None)
    ap.add_argument("--out", help="keep the generated history here (reused if it exists)")
    args = ap.parse_args()
    planted: dict = {}
    keys = [f"k{args.keys - 1 - i}" for i in range(len(ANOMALIES))]
    with tempfile.TemporaryDirectory(prefix="chaoskraft-bench-") as d:
        path = Path(args.out) if args.out else Path(d) / "history.parquet"
        if path.exists():
            planted.update(dict(zip(ANOMALIES, keys)))
            print(f"reusing {path} ({path.stat().st_size / 1e6:.0f} MB)", flush=True)
        else:
            t = time.monotonic()
            write_parquet(synthetic(args.ops, args.keys, args.seed, planted), path,
                          rows_per_group=100_000)
            print(f"generated {args.ops:,} operations ({2 * args.ops:,} rows) as Parquet: "
                  f"{path.stat().st_size / 1e6:.0f} MB in {time.monotonic() - t:.0f} s",
                  flush=True)
        spark = spark_session(args.master)
        peak = [0]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], jvm_peak_kb() or 0)
                time.sleep(1)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t = time.monotonic()
        result = check_queue(spark, str(path))
        took = time.monotonic() - t
        stop.set()
        sampler.join()
        found = {a: planted[a] in {e.get("key") for e in result["anomalies"].get(a, {}).get(
            "examples", [])} for a in ANOMALIES}
        print(f"check_queue on {args.master or 'local[2]'}: {took:.0f} s; verdict "
              f"{result['valid']}; planted anomalies found: {sum(found.values())}/{len(found)}")
        for a in ANOMALIES:
            n = result["anomalies"].get(a, {}).get("count", 0)
            print(f"  {a:<22} planted on {planted[a]:<5} found {n} {'ok' if found[a] else 'MISSED'}")
        driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak memory: driver (Python) {driver_mb:.0f} MB, Spark JVM {peak[0] / 1024:.0f} MB")
        print(json.dumps(result["stats"]))
        stop_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
