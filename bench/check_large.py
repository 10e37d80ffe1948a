"""``chaoskraft check`` on a generated register history of 1,000,000 operations.

    python bench/check_large.py [--ops 1000000] [--keys 5000] [--processes 50] [--no-spark]

Generates a history recorded from a real cas-register per key (each
operation takes effect at one point between its invoke and completion;
1% of clients crash and are replaced, leaving indeterminate operations).
Keys hold about 200 operations each, as Jepsen's independent keys and
chaoskraft's ``ops_per_key`` bound them: every operation that never returns
doubles the configurations of the rest of its key, so a violation late in a
key of thousands of such operations is out of reach of any WGL search
(Knossos's and Porcupine's included), and comes out "unknown", never valid.
The history is
then a copy with one stale read planted near its end. Each is checked in
this process (``--engine local``: the native kernel, keys on threads) and
through Spark (``--engine spark``, local[2]); prints the seconds of each
phase, the verdicts (which must agree: valid, then invalid) and peak RSS.
"""
import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.history import read_history  # noqa: E402
from workloads.register_check import run_check  # noqa: E402


def generate(path: Path, n_ops: int, n_keys: int, n_procs: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    values = {f"r{k}": 0 for k in range(n_keys)}
    procs = list(range(n_procs))
    state: dict[int, list] = {p: None for p in procs}  # p -> [row, applied, completion]
    next_proc, index, invoked = n_procs, 0, 0
    with open(path, "w") as f:
        def emit(row):
            nonlocal index
            row["index"], row["time"] = index, index
            index += 1
            f.write(json.dumps(row) + "\n")
        while invoked < n_ops or any(state.values()):
            p = procs[rng.randrange(len(procs))]
            cur = state[p]
            if cur is None:
                if invoked >= n_ops:
                    continue
                invoked += 1
                key = f"r{rng.randrange(n_keys)}"
                fn = rng.choice(("read", "read", "write", "cas"))
                v = None if fn == "read" else (rng.randrange(5) if fn == "write"
                                               else [rng.randrange(5), rng.randrange(5)])
                row = {"process": p, "type": "invoke", "f": fn, "key": key, "value": v}
                emit(dict(row))
                state[p] = [row, False, None]
            elif not cur[1]:
                row = cur[0]
                k, fn, v = row["key"], row["f"], row["value"]
                if fn == "read":
                    cur[2] = ("ok", values[k])
                elif fn == "write":
                    values[k], cur[2] = v, ("ok", v)
                elif values[k] == v[0]:
                    values[k], cur[2] = v[1], ("ok", v)
                else:
                    cur[2] = ("fail", v)
                cur[1] = True
            else:
                row = cur[0]
                if rng.random() < 0.01:  # the client crashes: indeterminate, process replaced
                    emit({**row, "type": "info"})
                    procs.remove(p)
                    del state[p]
                    procs.append(next_proc)
                    state[next_proc] = None
                    next_proc += 1
                    continue
                typ, out = cur[2]
                emit({**row, "type": typ, "value": out})
                state[p] = None


def plant_stale_read(src: Path, dst: Path) -> int:
    """Copy with the last ok read of r0 made to return a value no one wrote there."""
    lines = src.read_text().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        r = json.loads(lines[i])
        if r["type"] == "ok" and r["f"] == "read" and r["key"] == "r0":
            r["value"] = 99
            lines[i] = json.dumps(r)
            dst.write_text("\n".join(lines) + "\n")
            return r["index"]
    raise SystemExit("no read of r0 to plant on")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1_000_000)
    p.add_argument("--keys", type=int, default=5000)
    p.add_argument("--processes", type=int, default=50)
    p.add_argument("--no-spark", action="store_true")
    a = p.parse_args()
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} on {os.cpu_count()} cores"
          + (" (machine loaded: figures below are not clean)" if load > 1.0 else ""), flush=True)
    with tempfile.TemporaryDirectory(prefix="chaoskraft-bench-") as d:
        good, bad = Path(d) / "good.jsonl", Path(d) / "bad.jsonl"
        t = time.perf_counter()
        generate(good, a.ops, a.keys, a.processes)
        planted = plant_stale_read(good, bad)
        print(f"generated {a.ops:,} operations ({good.stat().st_size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t:.1f} s; stale read planted at index {planted}", flush=True)
        engines = ["local"] + ([] if a.no_spark else ["spark"])
        for name, path, want in (("linearizable", good, True), ("stale read", bad, False)):
            t = time.perf_counter()
            rows = read_history(path)
            print(f"{name}: read {len(rows):,} rows in {time.perf_counter() - t:.1f} s", flush=True)
            for engine in engines:
                t = time.perf_counter()
                r = run_check(rows, "cas-register", engine=engine, initial=0, nil_read="value",
                              budget_s=600)
                took = time.perf_counter() - t
                bad_keys = [k.key for k in r.keys if k.valid is False]
                print(f"{name}: --engine {engine}: verdict {r.valid} in {took:.1f} s "
                      f"({len(r.keys)} keys, {sum(k.explored for k in r.keys):,} configurations; "
                      f"invalid keys {bad_keys}); peak RSS {rss_mb():.0f} MB", flush=True)
                assert r.valid is want, f"{engine} said {r.valid} on the {name} history"
    print("verdicts agree across engines")


if __name__ == "__main__":
    main()
