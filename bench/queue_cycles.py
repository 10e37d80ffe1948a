"""The dependency-cycle search (checkers/queue/cycles.py) on concurrent histories that have
backward edges, which the queue checker's other bench (sequential operations) never makes.

    python bench/queue_cycles.py [--ops 1000000] [--concurrency 15] [--back 0.05]
        [--cycles 10]

``--ops`` operations by ``--concurrency`` processes, each one invoked and
completed in turn with random durations, so that operations overlap as a
loaded cluster's do. Half are sends, half polls, as in a run without
transactions; each poll is linked (wr) from a send invoked before it
completed: mostly one that had completed before the poll began, and for
``--back`` of the polls one still running when the poll completed, a
backward edge in completion order, as a poll that saw a send before the
send's acknowledgement makes. Such a history has no cycle of its own.
``--cycles`` reads of a value written after they completed plant G1c-realtime
cycles. Prints the intervals the backward edges make, the search's time and
peak memory, and whether every planted cycle was found. No test asserts these
numbers. Measured at the defaults on 2 cores (load 1.5): 1,000,000
operations, 16,139 intervals holding 23.5% of them (the largest 147), the
search 19.4 s in one process (51,000 operations/s), peak 247 MB, 10/10
planted cycles found.
"""
import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.queue import cycles as qc  # noqa: E402


def history(ops: int, concurrency: int, back: float, cycles: int, seed: int):
    rng = np.random.default_rng(seed)
    proc = rng.integers(0, concurrency, ops)
    dur = rng.exponential(10.0, ops) + 1.0  # in ticks: operations overlap
    gap = rng.exponential(1.0, ops)
    # Each process runs its operations one after the other.
    start = np.empty(ops)
    end = np.empty(ops)
    clock = np.zeros(concurrency)
    for j in range(ops):  # sequential per process, interleaved across processes
        p = proc[j]
        start[j] = clock[p] + gap[j]
        end[j] = start[j] + dur[j]
        clock[p] = end[j]
    # History indexes: invocations and completions in time order.
    times = np.concatenate([start, end])
    order = np.argsort(times, kind="stable")
    index = np.empty(2 * ops, np.int64)
    index[order] = np.arange(2 * ops)
    inv, done = index[:ops], index[ops:]
    by_inv = np.argsort(inv)
    # wr edges, send -> poll: from a send invoked before the poll completed; mostly one that
    # had completed before the poll was invoked (forward), ``back`` of them one still running.
    rank_inv = np.empty(ops, np.int64)
    rank_inv[by_inv] = np.arange(ops)
    is_send = rng.random(ops) < 0.5
    src = np.full(ops, -1, np.int64)
    for j in np.nonzero(~is_send)[0]:
        r = rank_inv[j]
        cand = by_inv[max(0, r - 3 * concurrency):r]
        cand = cand[is_send[cand]]
        if rng.random() < back:
            later = cand[done[cand] > done[j]]
            src[j] = later[rng.integers(len(later))] if len(later) else -1
        else:
            earlier = cand[done[cand] < inv[j]]
            src[j] = earlier[rng.integers(len(earlier))] if len(earlier) else -1
    keep = src >= 0
    e_src, e_dst = done[src[keep]], done[np.nonzero(keep)[0]]
    # Planted: a read of something written after the read completed.
    planted = []
    polls, sends = np.nonzero(~is_send)[0], np.nonzero(is_send)[0]
    for j in rng.choice(polls, cycles, replace=False):
        later = sends[inv[sends] > done[j] + 2 * concurrency]
        w = later[np.argmin(inv[later])] if len(later) else -1
        if w >= 0:
            e_src = np.append(e_src, done[w])
            e_dst = np.append(e_dst, done[j])
            planted.append((int(done[j]), int(done[w])))
    n = len(e_src)
    ops_t = pa.table({"index": done, "invoke": inv, "process": proc.astype(np.int32),
                      "ok": np.ones(ops, bool)}, schema=qc.OPS)
    edges = pa.table({"src": e_src, "dst": e_dst, "rel": np.full(n, qc.WR, np.int8),
                      "key": np.zeros(n, np.int32), "value": np.arange(n)}, schema=qc.EDGES)
    return ops_t, edges, planted


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--concurrency", type=int, default=15)
    ap.add_argument("--back", type=float, default=0.05)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    import os
    load = os.getloadavg()[0]
    t = time.monotonic()
    ops, edges, planted = history(args.ops, args.concurrency, args.back, args.cycles, args.seed)
    print(f"history: {args.ops:,} operations, {edges.num_rows:,} wr edges, concurrency "
          f"{args.concurrency}, {args.back:.0%} backward, {len(planted)} planted cycles; built in "
          f"{time.monotonic() - t:.1f} s; load average {load:.2f}"
          + (" (loaded: figures not comparable)" if load > len(os.sched_getaffinity(0)) else ""),
          flush=True)
    lo, hi = qc.merge_spans(*qc.backward_spans(edges))
    idx = np.sort(ops["index"].to_numpy())
    sizes = np.searchsorted(idx, hi, "right") - np.searchsorted(idx, lo)
    print(f"intervals: {len(lo):,}; operations in them {int(sizes.sum()):,} "
          f"({sizes.sum() / args.ops:.1%}); largest {int(sizes.max(initial=0)):,}", flush=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.monotonic()
    found = qc.cycles(ops, edges, n_examples=10 ** 6)
    took = time.monotonic() - t
    cycles = [{s["index"] for s in ex["cycle"]} for ex in found.get("G1c-realtime", (0, []))[1]]
    hit = sum(any({r, w} <= c for c in cycles) for r, w in planted)
    print(f"cycle search: {took:.1f} s ({args.ops / max(took, 1e-9):,.0f} operations/s); "
          f"peak memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
          f"(before the search {before:.0f} MB); found "
          f"{ {k: v[0] for k, v in found.items()} }; planted cycles found {hit}/{len(planted)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
