"""``chaoskraft sim``: seeds of the deterministic simulator, a stored run's twin, shrinking."""
from __future__ import annotations

import json
import sys

from node_image.bugs import BUGS


def cmd_sim(args) -> int:
    from ..simulate import (load_twin, option_values, print_outcome, run_seed, shrink,
                            stored_verdict)
    bugs = frozenset(args.bug)
    twin = None
    try:
        overrides = option_values(args.option)
        if args.from_run is not None:
            if args.shrink or args.bug or args.option:
                raise ValueError("--from takes the stored run's cluster, bugs and plan: "
                                 "--shrink, --bug and --option do not apply")
            twin = load_twin(args.from_run)
            if args.seed is None and args.seeds is None:
                args.seed = twin.cfg.seed
            cfg = twin.cfg
            print(f"twin of {args.from_run}: {cfg.workload} workload, {cfg.nodes} nodes, "
                  f"{cfg.time_limit_s:g} s, {len(twin.steps)} fault steps, "
                  f"{sum(map(len, twin.ops.values()))} generated operations for "
                  f"{cfg.concurrency} processes" + (f", bugs {cfg.bugs}" if cfg.bugs else ""))
            print(f"the Docker run: {stored_verdict(args.from_run)}")
        elif args.seed is None and args.seeds is None:
            raise ValueError("give --seed N, --seeds A-B or --from RUN_DIR")
        for bug in sorted(bugs):
            for key, value in BUGS[bug].sim_options if bug in BUGS else ():
                if key not in overrides:
                    print(f"note: {bug} shows only with --option {key}={json.dumps(value)}; "
                          f"without it, only the seeds that draw it can catch it")
        if args.shrink:
            if args.seed is None:
                raise ValueError("--shrink takes one --seed")
            found = shrink(args.seed, args.nodes, args.duration_s, bugs, args.workload,
                           overrides)
            if found is None:
                print(f"seed {args.seed} holds: nothing to shrink")
                return 0
            o, nodes, duration_s, overrides = found
            if args.journal is not None:
                o = run_seed(args.seed, nodes, duration_s, bugs, overrides, args.workload,
                             args.journal)
            print_outcome(o, nodes, duration_s, bugs, verbose=True, overrides=overrides)
            return 1
        seeds = [args.seed] if args.seed is not None else list(args.seeds)
        failed = []
        by_invariant: dict[str, int] = {}
        for seed in seeds:
            o = run_seed(seed, args.nodes, args.duration_s, bugs, overrides,
                         workload=args.workload, journal_dir=args.journal, twin=twin)
            print_outcome(o, args.nodes, args.duration_s, bugs,
                          verbose=len(seeds) == 1 or args.verbose, overrides=overrides,
                          twin=twin)
            sys.stdout.flush()
            if not o.ok:
                failed.append(o)
                by_invariant[o.invariant] = by_invariant.get(o.invariant, 0) + 1
    except ValueError as exc:  # a bad option or cluster, named by the simulator
        print(f"chaoskraft sim: {exc}", file=sys.stderr)
        return 64
    if len(seeds) > 1:
        print(f"summary: {len(seeds) - len(failed)} of {len(seeds)} seeds held"
              + (f"; failures by invariant: {by_invariant}" if failed else ""))
        if failed:
            print("failing seeds: " + " ".join(str(o.seed) for o in failed))
    return 1 if failed else 0
