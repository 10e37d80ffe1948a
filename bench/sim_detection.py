"""Planted bugs in the simulator: which seeds catch each, and how fast in wall time.

    python bench/sim_detection.py [--bugs queue|register|all|NAME,...] [--seeds 1-100]
                                  [--duration-s 120] [-j 2]

Each bug runs on every seed of the range in its workload's simulation (register bugs in
the register workload, the data-plane ones in the queue workload, with the simulator
options each needs: transactions for the transaction bugs), with the same checks as
``chaoskraft sim``. Prints one markdown row per bug: the first seed that catches it, how
many of the seeds do, the wall time of a sweep from the first seed until it catches it
(one process), the median wall seconds per seed, and what caught it. Seeds run ``-j`` at
a time; the per-seed wall times are each seed's own.
"""
import argparse
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.simulate import run_seed  # noqa: E402
from node_image.bugs import BUGS  # noqa: E402

def workload_of(bug: str) -> str:
    """The workload whose runs prove the bug (its entry in the bug table)."""
    return BUGS[bug].workload


QUEUE_SIM = {name for name in BUGS if workload_of(name) == "queue"}


def one(job):
    bug, seed, duration_s = job
    started = time.perf_counter()
    o = run_seed(seed, 5, duration_s, frozenset({bug}), dict(BUGS[bug].sim_options),
                 workload=workload_of(bug))
    return bug, seed, (None if o.ok else o.invariant), time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bugs", default="all")
    p.add_argument("--seeds", default="1-100")
    p.add_argument("--duration-s", type=float, default=120)
    p.add_argument("-j", type=int, default=1)
    a = p.parse_args()
    if a.bugs == "all":
        bugs = sorted(BUGS)
    elif a.bugs == "queue":
        bugs = sorted(QUEUE_SIM)
    elif a.bugs == "register":
        bugs = sorted(set(BUGS) - QUEUE_SIM)
    else:
        bugs = a.bugs.split(",")
    lo, hi = (int(x) for x in a.seeds.split("-"))
    seeds = range(lo, hi + 1)
    jobs = [(b, s, a.duration_s) for b in bugs for s in seeds]
    print(f"{len(bugs)} bugs x {len(seeds)} seeds of {a.duration_s:g} simulated s, "
          f"{a.j} at a time", flush=True)
    results: dict[str, dict[int, tuple]] = {b: {} for b in bugs}
    with ProcessPoolExecutor(a.j) as pool:
        for n, (bug, seed, caught, wall) in enumerate(pool.map(one, jobs), 1):
            results[bug][seed] = (caught, wall)
            if n % 50 == 0:
                print(f"  {n}/{len(jobs)} seeds run", file=sys.stderr, flush=True)
    print()
    print("| bug | workload | first seed | caught | sweep wall s to first | median wall s per seed "
          "| caught by |")
    print("|---|---|---|---|---|---|---|")
    for bug in bugs:
        rows = results[bug]
        caught = [s for s in seeds if rows[s][0] is not None]
        first = caught[0] if caught else None
        to_first = sum(rows[s][1] for s in seeds if first is not None and s <= first)
        by = Counter(rows[s][0] for s in caught)
        print(f"| `{bug}` | {workload_of(bug)} | {first if first is not None else '-'} | "
              f"{len(caught)}/{len(seeds)} | {f'{to_first:.1f}' if first is not None else '-'} | "
              f"{statistics.median(r[1] for r in rows.values()):.1f} | "
              f"{', '.join(f'{k} ({v})' for k, v in by.most_common()) or '-'} |")


if __name__ == "__main__":
    main()
