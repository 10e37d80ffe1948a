"""Simulator speed: simulated seconds per wall second for a 5-node cluster.

    python bench/sim_speed.py [--seeds 0-9] [--duration-s 300] [--workload register|queue]

Prints one line per seed (events, simulated s, wall s, ratio) and the total. The
history's check (linearizability for the register, the queue checker for the queue) is
timed separately.
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulator import DEFAULT_WORKLOAD, WORKLOAD_NAMES  # noqa: E402
from simulator.cluster import Simulation  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="0-9")
    p.add_argument("--duration-s", type=float, default=300)
    p.add_argument("--nodes", type=int, default=5)
    p.add_argument("--workload", choices=WORKLOAD_NAMES, default=DEFAULT_WORKLOAD)
    a = p.parse_args()
    lo, hi = (int(x) for x in a.seeds.split("-"))
    tot_sim = tot_wall = tot_check = 0.0
    tot_events = 0
    for seed in range(lo, hi + 1):
        t0 = time.perf_counter()
        r = Simulation(seed, a.nodes, a.duration_s, workload=a.workload).run()
        t1 = time.perf_counter()
        r.check_history()
        t2 = time.perf_counter()
        sim_s = r.sim_ms / 1000
        tot_sim += sim_s
        tot_wall += t1 - t0
        tot_check += t2 - t1
        tot_events += r.events
        print(f"seed {seed}: {r.events} events, {sim_s:.0f} simulated s in {t1 - t0:.2f} wall s "
              f"= {sim_s / (t1 - t0):.0f}x; {len(r.history)} history rows checked in {t2 - t1:.2f} s")
    print(f"total: {tot_events} events, {tot_sim:.0f} simulated s in {tot_wall:.1f} wall s: "
          f"{tot_sim / tot_wall:.0f} simulated s per wall s, {tot_events / tot_wall:.0f} events/s; "
          f"history checks {tot_check:.1f} s")


if __name__ == "__main__":
    main()
