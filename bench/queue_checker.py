"""The queue checker on a synthetic history of 10 million operations.

    python bench/queue_checker.py [--ops 10000000] [--keys 64] [--master URL]
        [--engines spark,spark-shuffle,local] [--out FILE]
    python bench/queue_checker.py --ops 10000000 --run-dir DIR [--analyze]

Generates a queue history (sends acknowledged with offsets, polls that read
the partitions in order, final polls) with an anomaly of every class the
checker knows planted on a key of its own, with numpy, straight into the
typed Parquet file (``checkers.queue.history``) in row groups, a million
operations at a time (consumers' positions and keys' offsets carried from
one to the next, values computed from key and offset), so 100 million
operations take no more memory than one million. Then, per
engine: the check's time, whether every planted anomaly was found, and the
peak memory of the driver (this Python process) and of the Spark JVM; for
Spark also the session's start and, as a floor, the time of a plain full
read of the same file (and the same read again after the check, in a warm
JVM). No test asserts these numbers.

On a standalone cluster (``--master spark://HOST:PORT``) the check takes the
shared-directory way where ``CHAOSKRAFT_QUEUE_SCRATCH`` names a directory the
driver and every executor see, else Spark's shuffle.

``--run-dir DIR`` writes the history as a stored queue run instead
(``DIR/queue.parquet`` and ``DIR/config.yaml``), for ``chaoskraft analyze
DIR``; ``--analyze`` then runs that, end to end (check, report, timeline),
and prints its time and the peak memory it reports for its own process.
Measured on 2 cores at 10,000,000 operations (20M rows, 683 MB written in
23 s): `chaoskraft analyze` in 57.9 s end to end (the check in Spark about
25 s, the report and the timeline from one read about 22 s: 2,501 chunks),
17/17 planted anomalies, peak memory of its Python process 379 MB (before
the pages shared one read: 272 s, report about 100 s, timeline about 115 s).
At 100,000,000: docs/queue.md "100 million operations". With the
transactional classes and the cycle pass (17 classes planted), on a quiet
machine (load 1.3): check_queue in Spark 61.5 s (driver 130 MB, Spark JVM
3.1 GB; a plain read of the file 10.5 s), in process 55.0 s (7.4 GB); 17/17
found by both. Its operations are sequential, so its only backward edges are
the planted cycles' (bench/queue_cycles.py measures the search itself).
"""
import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.queue import ANOMALIES, check_queue  # noqa: E402
from checkers.queue.spark import check_spark, shared_scratch  # noqa: E402
from checkers.spark import spark_session, stop_session  # noqa: E402

PROCESSES = 32
# Every class is planted but the write cycles, which need ww edges (ww_deps, off by default).
PLANTED = tuple(a for a in ANOMALIES if not a.startswith("G0"))
TICK_NS = 100_000  # one history row every 100 us: 10M operations span about 2,000 s
PLANTED_VALUES = 10**12  # the planted anomalies' values start here, above every generated one


CHUNK_OPS = 1_000_000  # operations generated at a time: memory is bounded by this


def value_of(key, offset, normal: int):
    """The value sent to a normal key at an offset: unique, computed rather than stored (a
    poll in one chunk reads what sends of earlier chunks wrote)."""
    return offset * normal + key + 1


def synthetic(ops: int, keys: int, seed: int, planted: dict, chunk: int = CHUNK_OPS):
    """The history in typed row groups (``checkers.queue.history.SCHEMA``), built with numpy
    ``chunk`` operations at a time (so 100 million take no more memory than one million).

    ``ops`` operations, each a send (with probability 1/2) or a poll of one normal key;
    each process's consumer reads each key's log in order, 1 to 20 messages a poll, up to
    what was acknowledged before the poll began (each operation completes before the next
    begins: a read of a later send would be a read from the future, a G1c-realtime cycle);
    every anomaly class is planted on a key of its own (the last len(PLANTED) keys); final
    polls read every key. ``planted`` collects anomaly -> key. Yields pyarrow Tables.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from checkers.queue import history as qh
    rng = np.random.default_rng(seed)
    special = {f"k{keys - 1 - i}": a for i, a in enumerate(PLANTED)}
    planted.update({a: k for k, a in special.items()})
    normal = keys - len(special)
    names = qh.KeyNames([f"k{k}" for k in range(keys)])
    sent = np.zeros(normal, np.int64)  # sends of each key so far: its next offset
    at = np.zeros(PROCESSES * normal, np.int64)  # each (process, key) consumer's position
    first = 2 * PROCESSES
    yield pa.Table.from_pylist(
        [r for p in range(PROCESSES) for r in (
            {"index": 2 * p, "time": 2 * p * TICK_NS, "process": p, "type": "invoke", "f": "assign"},
            {"index": 2 * p + 1, "time": (2 * p + 1) * TICK_NS, "process": p, "type": "ok",
             "f": "assign", "extra": json.dumps({"value": [f"k{k}" for k in range(keys)]})})],
        schema=qh.SCHEMA)
    for lo in range(0, ops, chunk):
        n = min(ops, lo + chunk) - lo
        is_send = rng.random(n) < 0.5
        key = rng.integers(0, normal, n).astype(np.int64)
        proc = rng.integers(0, PROCESSES, n).astype(np.int32)
        # Sends of the op's key before it (this chunk's, in op order, then earlier chunks'):
        # a send's offset, and for a poll what it may read.
        order = np.argsort(key, kind="stable")
        k_sorted = key[order]
        starts = np.concatenate([[True], k_sorted[1:] != k_sorted[:-1]])
        cs = np.cumsum(is_send[order])
        base = np.maximum.accumulate(np.where(starts, cs - is_send[order], 0))
        before_sorted = cs - is_send[order] - base
        sends_before = np.empty(n, np.int64)
        sends_before[order] = before_sorted
        sends_before += sent[key]
        sent += np.bincount(key[is_send], minlength=normal)
        # Polls: pos_i = min(pos_{i-1} + want_i, avail_i) per (process, key), from where the
        # consumer stopped (p0): cumwant_i + min(p0, min_{j<=i}(avail_j - cumwant_j)), the
        # running minimum per group by shifting each group below all earlier ones.
        pi = np.nonzero(~is_send)[0]
        want = rng.integers(1, 21, len(pi)).astype(np.int64)
        avail = sends_before[pi]
        group = proc[pi].astype(np.int64) * normal + key[pi]
        g_order = np.argsort(group, kind="stable")
        g_sorted = group[g_order]
        g_first = np.concatenate([[True], g_sorted[1:] != g_sorted[:-1]])
        g_last = np.concatenate([g_sorted[1:] != g_sorted[:-1], [True]])
        csum = np.cumsum(want[g_order])
        gstart = np.maximum.accumulate(np.where(g_first, csum - want[g_order], 0))
        cw = csum - gstart
        gid = np.cumsum(g_first)
        shift = gid.astype(np.int64) * (4 * (int(cw.max(initial=0)) + int(sent.max()) + 1))
        run_min = np.minimum.accumulate(avail[g_order] - cw - shift) + shift
        p0 = at[g_sorted]
        pos = cw + np.minimum(p0, run_min)
        prev = np.concatenate([[0], pos[:-1]])
        prev[g_first] = p0[g_first]
        at[g_sorted[g_last]] = pos[g_last]
        start = np.empty(len(pi), np.int64)
        end = np.empty(len(pi), np.int64)
        start[g_order] = prev
        end[g_order] = np.maximum(pos, prev)
        lens = end - start
        # Reads of the polls, as list arrays (null for sends and invokes).
        p_key = key[pi]
        flat_off = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens - start, lens)
        flat_val = value_of(np.repeat(p_key, lens), flat_off, normal)
        inner = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        structs = pa.StructArray.from_arrays(
            [pa.array(p_key.astype(np.int32), pa.int32()),
             pa.ListArray.from_arrays(pa.array(inner), pa.array(flat_off, pa.int64())),
             pa.ListArray.from_arrays(pa.array(inner), pa.array(flat_val, pa.int64()))],
            fields=list(qh.READS.value_type))
        one = np.arange(len(pi) + 1, dtype=np.int32)
        poll_reads = pa.ListArray.from_arrays(pa.array(one), structs)
        off = np.where(is_send, sends_before, 0)
        val = np.where(is_send, value_of(key, sends_before, normal), 0)
        idx = first + 2 * np.arange(lo, lo + n, dtype=np.int64)
        # Interleave invoke (even) and completion (odd) rows.
        rows_idx = np.empty(2 * n, np.int64)
        rows_idx[0::2], rows_idx[1::2] = idx, idx + 1
        typ = np.empty(2 * n, object)
        typ[0::2], typ[1::2] = "invoke", "ok"
        f = np.where(np.repeat(is_send, 2), "send", "poll").astype(object)
        k2 = np.repeat(key, 2)
        sends2 = np.repeat(is_send, 2)
        done_off = np.zeros(2 * n, bool)
        done_off[1::2] = True
        # reads: for each completion of a poll, its entry; everything else null.
        take = np.full(2 * n, -1, np.int64)
        take[2 * pi + 1] = np.arange(len(pi))
        reads = poll_reads.take(pa.array(np.where(take >= 0, take, 0)))
        reads = pc.if_else(pa.array(take >= 0), reads, pa.nulls(2 * n, reads.type))
        yield pa.table({
            "index": rows_idx, "time": rows_idx * TICK_NS,
            "process": pa.array(np.repeat(proc, 2), pa.int32()), "type": pa.array(typ, pa.string()),
            "f": pa.array(f, pa.string()),
            "key": pa.array(np.where(sends2, k2, 0).astype(np.int32), pa.int32(), mask=~sends2),
            "value": pa.array(np.repeat(val, 2), pa.int64(), mask=~sends2),
            "offset": pa.array(np.repeat(off, 2), pa.int64(), mask=~(sends2 & done_off)),
            "reads": reads, "extra": pa.nulls(2 * n, pa.string()),
            "mop": pa.nulls(2 * n, pa.int16()),
            "invoke": pa.array(rows_idx - 1, pa.int64(), mask=~done_off)}, schema=qh.SCHEMA)
    assert int(value_of(normal - 1, sent.max(initial=0), normal)) < PLANTED_VALUES, \
        "generated values reach the planted ones: fewer operations or keys"
    # The planted anomalies (with their keys' final polls), as rows: few.
    tail = list(_planted(special, first + 2 * ops))
    invokes: dict = {}
    yield pa.Table.from_pylist([t for r in tail for t in qh.typed_rows(r, 0, names, invokes)],
                               schema=qh.SCHEMA)
    # One final poll per normal key, reading its whole log.
    index = first + 2 * ops + len(tail)
    for k in range(normal):
        offs = np.arange(sent[k], dtype=np.int64)
        entry = pa.StructArray.from_arrays(
            [pa.array([k], pa.int32()),
             pa.ListArray.from_arrays(pa.array([0, sent[k]], pa.int32()), pa.array(offs)),
             pa.ListArray.from_arrays(pa.array([0, sent[k]], pa.int32()),
                                      pa.array(value_of(k, offs, normal)))],
            fields=list(qh.READS.value_type))
        reads = pa.ListArray.from_arrays(pa.array([0, 0, 1], pa.int32()), entry)
        yield pa.table({"index": [index, index + 1], "time": [index * TICK_NS, (index + 1) * TICK_NS],
                        "process": pa.array([1000, 1000], pa.int32()),
                        "type": ["invoke", "ok"], "f": ["final-poll", "final-poll"],
                        "key": pa.nulls(2, pa.int32()), "value": pa.nulls(2, pa.int64()),
                        "offset": pa.nulls(2, pa.int64()),
                        "reads": pc_if_else(reads), "extra": pa.nulls(2, pa.string()),
                        "mop": pa.nulls(2, pa.int16()),
                        "invoke": pa.array([None, index])},
                       schema=qh.SCHEMA)
        index += 2


def pc_if_else(reads):
    """The invoke row's reads null, the completion's kept."""
    import pyarrow as pa
    import pyarrow.compute as pc
    return pc.if_else(pa.array([False, True]), reads, pa.nulls(2, reads.type))


def _planted(special: dict, index: int):
    """Rows planting one anomaly per special key, then one final poll per key."""
    def row(process, type_, f, key, value):
        nonlocal index
        r = {"index": index, "time": index * TICK_NS, "process": process, "type": type_, "f": f,
             "key": key, "value": value}
        index += 1
        return r

    q = PLANTED_VALUES  # planted values, far from the generated ones

    def send(p, key, v, offset, type_="ok"):
        yield row(p, "invoke", "send", key, {"value": v})
        yield row(p, type_, "send", key, {"value": v, "offset": offset} if type_ == "ok"
                  else {"value": v})

    def poll(p, key, msgs):
        yield row(p, "invoke", "poll", None, None)
        yield row(p, "ok", "poll", None, {key: msgs})

    def txn(p, mops):
        yield row(p, "invoke", "txn", None, [["send", m[1], m[2][1]] if m[0] == "send"
                                            else ["poll"] for m in mops])
        yield row(p, "ok", "txn", None, mops)
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
        elif a == "int-send-skip":
            yield from send(1, key, v[1], 1)
            yield from txn(0, [["send", key, [0, v[0]]], ["send", key, [2, v[2]]]])
            final[key] = [[i, v[i]] for i in range(3)]
        elif a == "int-nonmonotonic-send":
            yield from txn(0, [["send", key, [1, v[0]]], ["send", key, [0, v[1]]]])
            final[key] = [[0, v[1]], [1, v[0]]]
        elif a == "precommitted-read":
            yield from txn(0, [["send", key, [0, v[0]]], ["poll", {key: [[0, v[0]]]}]])
            final[key] = [[0, v[0]]]
        elif a == "G1c":  # two transactions, each reading what the other sent
            yield from txn(2, [["send", key, [0, v[0]]], ["poll", {key: [[1, v[1]]]}]])
            yield from txn(3, [["send", key, [1, v[1]]], ["poll", {key: [[0, v[0]]]}]])
            final[key] = [[0, v[0]], [1, v[1]]]
        elif a == "G1c-process":  # each process reads what the other sends next
            yield from poll(4, key, [[0, v[0]]])
            yield from send(4, key, v[1], 1)
            yield from poll(5, key, [[1, v[1]]])
            yield from send(5, key, v[0], 0)
            final[key] = [[0, v[0]], [1, v[1]]]
        elif a == "G1c-realtime":  # a read of a value sent after the poll completed
            yield from poll(6, key, [[0, v[0]]])
            yield from send(7, key, v[0], 0)
            final[key] = [[0, v[0]]]
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


def write(ops: int, keys: int, seed: int, path: Path, planted: dict) -> None:
    import pyarrow.parquet as pq

    from checkers.queue import history as qh
    writer = pq.ParquetWriter(str(path), qh.SCHEMA)
    try:
        for t in synthetic(ops, keys, seed, planted):
            writer.write_table(t, row_group_size=1_000_000)
        writer.add_key_value_metadata({qh.KEYS: json.dumps([f"k{k}" for k in range(keys)])})
    finally:
        writer.close()


def write_run(run: Path, args, planted: dict) -> int:
    """The synthetic history as a stored queue run; optionally analysed end to end."""
    import subprocess
    if run.exists():
        print(f"--run-dir {run}: already exists; give a new directory", file=sys.stderr)
        return 2
    run.mkdir(parents=True)
    t = time.monotonic()
    write(args.ops, args.keys, args.seed, run / "queue.parquet", planted)
    (run / "config.yaml").write_text("workload: queue\nidempotent: true\n")
    print(f"wrote a stored queue run of {args.ops:,} operations to {run} "
          f"({(run / 'queue.parquet').stat().st_size / 1e6:.0f} MB) in "
          f"{time.monotonic() - t:.1f} s; planted: {json.dumps(planted)}", flush=True)
    if not args.analyze:
        print(f"analyse it with: chaoskraft analyze {run}")
        return 0
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} on {len(os.sched_getaffinity(0))} cores", flush=True)
    cmd = [sys.executable, "-m", "harness.cli", "analyze", str(run)]
    if args.master:
        cmd += ["--spark-master", args.master]
    t = time.monotonic()
    done = subprocess.run(cmd, cwd=Path(__file__).resolve().parent.parent)
    took = time.monotonic() - t
    results = json.loads((run / "results.json").read_text())
    found = sum(planted[a] in _keys(results["checkers"]["queue"], a) for a in PLANTED)
    print(f"chaoskraft analyze {run}: exit {done.returncode} in {took:.1f} s; verdict "
          f"{results['verdict']}; planted anomalies found: {found}/{len(PLANTED)}; report "
          f"{(run / 'report.html').exists()}, timeline chunks "
          f"{len(list((run / 'timeline').glob('c-*.js')))}")
    return done.returncode


def _keys(result: dict, anomaly: str) -> set:
    """The keys the examples of a class name (a cycle's, in its steps)."""
    out = set()
    for e in result["anomalies"].get(anomaly, {}).get("examples", []):
        out |= {e.get("key")} | {s.get("key") for s in e.get("cycle", ())}
    return out


def plain_read(spark, path: Path) -> float:
    """Seconds of a plain full read of the file in Spark (every column, nothing kept)."""
    t = time.monotonic()
    spark.read.parquet(str(path)).write.format("noop").mode("overwrite").save()
    return time.monotonic() - t


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--master", default=None)
    ap.add_argument("--engines", default="spark,local",
                    help="which to time: spark (local[2] or --master; the key rows through a "
                    "shared directory where there is one), spark-shuffle (through Spark's "
                    "shuffle), local (in process)")
    ap.add_argument("--out", help="keep the generated history here (reused if it exists)")
    ap.add_argument("--run-dir", help="write the history as a stored queue run in this "
                    "directory (which must not exist), for `chaoskraft analyze`")
    ap.add_argument("--analyze", action="store_true",
                    help="with --run-dir: run `chaoskraft analyze` on it and time it")
    args = ap.parse_args()
    if args.keys < len(PLANTED) + 1:
        ap.error(f"--keys must be at least {len(PLANTED) + 1}")
    if args.analyze and not args.run_dir:
        ap.error("--analyze needs --run-dir")
    planted: dict = {}
    if args.run_dir:
        return write_run(Path(args.run_dir), args, planted)
    with tempfile.TemporaryDirectory(prefix="chaoskraft-bench-") as d:
        path = Path(args.out) if args.out else Path(d) / "queue.parquet"
        if path.exists():
            planted.update({a: f"k{args.keys - 1 - i}" for i, a in enumerate(PLANTED)})
            print(f"reusing {path} ({path.stat().st_size / 1e6:.0f} MB)", flush=True)
        else:
            t = time.monotonic()
            write(args.ops, args.keys, args.seed, path, planted)
            print(f"generated {args.ops:,} operations ({2 * args.ops:,} rows) as typed Parquet: "
                  f"{path.stat().st_size / 1e6:.0f} MB in {time.monotonic() - t:.1f} s; "
                  f"driver peak so far {rss_mb():.0f} MB", flush=True)
        load = os.getloadavg()[0]
        print(f"load average {load:.2f} on {len(os.sched_getaffinity(0))} cores"
              + (" (the machine is loaded: figures are not comparable)" if load > len(os.sched_getaffinity(0)) else ""))
        for engine in args.engines.split(","):
            spark = None
            peak = [0]
            stop = threading.Event()
            if engine.startswith("spark"):
                t = time.monotonic()
                spark = spark_session(args.master)
                print(f"spark session: {time.monotonic() - t:.1f} s", flush=True)
                floor = plain_read(spark, path)
                print(f"floor: a plain full read of the file in Spark: {floor:.1f} s",
                      flush=True)

                def sample():
                    while not stop.is_set():
                        peak[0] = max(peak[0], jvm_peak_kb() or 0)
                        time.sleep(0.5)
                threading.Thread(target=sample, daemon=True).start()
            t = time.monotonic()
            progress = lambda line: print(f"  {line}", flush=True)  # noqa: E731
            if spark is not None:
                shuffle = True if engine == "spark-shuffle" else None
                result = check_spark(spark, str(path), progress=progress, shuffle=shuffle)
            else:
                result = check_queue(None, str(path), engine=engine, progress=progress)
            took = time.monotonic() - t
            stop.set()
            found = {a: planted[a] in _keys(result, a) for a in PLANTED}
            where = "in process"
            if spark is not None:
                how = "Spark's shuffle" if engine == "spark-shuffle" or not shared_scratch(
                    spark)[0] else "shared-directory buckets"
                where = f"spark {args.master or 'local[2]'} ({how})"
            print(f"check_queue {where}: {took:.1f} s; verdict {result['valid']}; planted "
                  f"anomalies found: {sum(found.values())}/{len(found)}; peak memory: driver "
                  f"(Python) {rss_mb():.0f} MB"
                  + (f", Spark JVM {peak[0] / 1024:.0f} MB" if engine == "spark" else ""))
            if spark is not None:
                warm = plain_read(spark, path)
                print(f"  {took / floor:.2f}x the floor; the same read again after the check "
                      f"(a warm JVM): {warm:.1f} s, {took / warm:.2f}x that")
            for a in PLANTED:
                n = result["anomalies"].get(a, {}).get("count", 0)
                print(f"  {a:<22} planted on {planted[a]:<5} found {n} "
                      f"{'ok' if found[a] else 'MISSED'}")
            print(json.dumps(result["stats"]), flush=True)
            if spark is not None:
                stop_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
