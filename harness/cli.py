"""The ``chaoskraft`` command line."""
from __future__ import annotations

import argparse
import json
import sys

from node_image.bugs import BUGS


def _seed_range(text: str) -> range:
    try:
        if "-" in text:
            a, b = text.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes A-B, got {text!r}") from None
    if hi < lo or lo < 0:
        raise argparse.ArgumentTypeError(f"--seeds {text}: need 0 <= A <= B")
    return range(lo, hi + 1)


def _bug(name: str) -> str:
    if name not in BUGS:
        raise argparse.ArgumentTypeError(
            f"unknown bug {name!r}; known: {', '.join(sorted(BUGS))}")
    return name


def cmd_sim(args) -> int:
    from .simulate import print_outcome, run_seed
    bugs = frozenset(args.bug)
    seeds = [args.seed] if args.seed is not None else list(args.seeds)
    failed = []
    by_invariant: dict[str, int] = {}
    for seed in seeds:
        o = run_seed(seed, args.nodes, args.duration_s, bugs)
        print_outcome(o, args.nodes, args.duration_s, bugs, verbose=len(seeds) == 1 or args.verbose)
        sys.stdout.flush()
        if not o.ok:
            failed.append(o)
            by_invariant[o.invariant] = by_invariant.get(o.invariant, 0) + 1
    if len(seeds) > 1:
        print(f"summary: {len(seeds) - len(failed)} of {len(seeds)} seeds held"
              + (f"; failures by invariant: {by_invariant}" if failed else ""))
        if failed:
            print("failing seeds: " + " ".join(str(o.seed) for o in failed))
    return 1 if failed else 0


def cmd_bugs(args) -> int:
    rows = [{"name": b.name, "layer": b.layer, "rule": b.rule, "description": b.description,
             "detected_by": list(b.expected)} for b in BUGS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<24} {r['layer']:<11} breaks: {r['rule']}")
    return 0


EXIT_USAGE = 64  # 0, 1, 2 mean valid, invalid, unknown


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _json_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="chaoskraft", description="Jepsen-style chaos testing of a KRaft cluster")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sim", help="run the deterministic simulator")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--seed", type=int, help="one seed")
    g.add_argument("--seeds", type=_seed_range, help="a range of seeds, A-B inclusive")
    s.add_argument("--nodes", type=int, default=5, help="voters (default 5); the seed may add observers")
    s.add_argument("--duration-s", type=float, default=600.0,
                   help="simulated seconds of faults and load (default 600), then 20 s of recovery")
    s.add_argument("--bug", type=_bug, action="append", default=[], help="enable a planted bug")
    s.add_argument("--verbose", action="store_true", help="print options and stats for every seed")
    s.set_defaults(func=cmd_sim)
    c = sub.add_parser("check", help="check a history file for linearizability")
    c.add_argument("file", help="chaoskraft history (.jsonl or .parquet), Jepsen EDN, or Jepsen text log")
    c.add_argument("--model", required=True, choices=["register", "cas-register", "etcd", "kv"])
    c.add_argument("--initial", type=_json_value, default=None,
                   help="initial register value as JSON (default null, Jepsen's nil)")
    c.add_argument("--no-partition", action="store_true", help="check all keys as one history")
    c.add_argument("--engine", choices=["spark", "local"], default="spark",
                   help="spark (default; local[2] unless --spark-master) or local (in this process)")
    c.add_argument("--spark-master", default=None, help="Spark master URL (default local[2])")
    c.add_argument("--budget-s", type=float, default=300.0, help="search time per key before 'unknown'")
    c.set_defaults(func=_cmd_check)
    b = sub.add_parser("bugs", help="list the planted bugs")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bugs)
    return p


def _cmd_check(args) -> int:
    from .check_cmd import cmd_check
    return cmd_check(args)


def main(argv: list[str] | None = None) -> int:
    from checkers.history import HistoryError
    args = build_parser().parse_args(argv)
    if getattr(args, "nodes", 1) < 1:
        print("chaoskraft: --nodes must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args.func(args)
    except HistoryError as exc:
        print(f"chaoskraft: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("chaoskraft: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
