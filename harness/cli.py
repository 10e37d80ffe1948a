"""The ``chaoskraft`` command line."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from checkers.models import MODELS
from core.run_dir import RunDirError
from core.verdict import EXIT_USAGE
from node_image.bugs import BUGS
from workloads.registry import WORKLOADS

from .commands.bugs import cmd_bugs
from .commands.cluster import cmd_cleanup, cmd_cluster, cmd_hosts, cmd_image
from .commands.runs import cmd_analyze, cmd_campaign, cmd_matrix, cmd_reproduce, cmd_run, cmd_serve
from .commands.sim import cmd_sim
from .config import RunConfig


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
    g = s.add_mutually_exclusive_group()
    g.add_argument("--seed", type=int, help="one seed")
    g.add_argument("--seeds", type=_seed_range, help="a range of seeds, A-B inclusive")
    s.add_argument("--from", dest="from_run", type=Path, metavar="RUN_DIR",
                   help="replay a stored Docker run in the simulator: its cluster, bugs, "
                        "generated operations and fault plan (the seed, by default the run's, "
                        "moves only the timing)")
    from simulator import DEFAULT_WORKLOAD, WORKLOAD_NAMES
    s.add_argument("--workload", choices=WORKLOAD_NAMES, default=DEFAULT_WORKLOAD,
                   help=f"default {DEFAULT_WORKLOAD}: every node a controller, register "
                        "clients; or the data plane: nodes 1-3 controllers and brokers, the "
                        "rest brokers, Kafka producers and consumers, the queue checker "
                        "(docs/simulator.md)")
    s.add_argument("--nodes", type=int, default=5,
                   help="nodes (default 5): all voters for the register workload, 3 voters and "
                        "the rest brokers for the queue; the seed may add observers")
    s.add_argument("--duration-s", type=float, default=600.0,
                   help="simulated seconds of faults and load (default 600), then 20 s of "
                        "recovery (queue: 75 s)")
    s.add_argument("--bug", type=_bug, action="append", default=[], help="enable a planted bug")
    s.add_argument("--verbose", action="store_true", help="print options and stats for every seed")
    s.add_argument("--option", action="append", metavar="KEY=VALUE",
                   help="replace an option the seed draws (as printed, VALUE as JSON: "
                        "crash_mean_ms=null, clients=1, 'extra_faults={\"clock-rate\": 10000}' "
                        "for a fault no seed draws); repeat it")
    s.add_argument("--shrink", action="store_true",
                   help="with --seed: find a smaller run that fails the same way (shorter, "
                        "fewer nodes, simpler options) and print how to reproduce it")
    s.add_argument("--journal", type=Path, metavar="DIR",
                   help="record every message; a failing seed leaves DIR/seed-N.jsonl and "
                        "DIR/seed-N.html, a sequence diagram of the messages before the failure")
    s.set_defaults(func=cmd_sim)
    c = sub.add_parser("check", help="check a history file for linearizability")
    c.add_argument("file", help="chaoskraft history (.jsonl or .parquet), Jepsen/Knossos/Maelstrom "
                                "EDN, or Jepsen text log (docs/history.md)")
    own = [n for n, w in WORKLOADS.items() if hasattr(w, "check_file")]
    c.add_argument("--model", required=True, choices=MODELS + tuple(own),
                   help="a linearizability model, or a workload that checks its own histories "
                        f"({', '.join(own)}: Kafka's queue anomalies and dependency cycles, "
                        "Jepsen's Kafka workload histories too)")
    c.add_argument("--initial", type=_json_value, default=None,
                   help="initial register value as JSON (default null, Jepsen's nil)")
    c.add_argument("--nil-read", choices=["unknown", "value"], default="unknown",
                   help="register, cas-register: a read of nil is a read of unknown value "
                        "(Knossos; default) or a read of 'no value'")
    ind = c.add_mutually_exclusive_group()
    ind.add_argument("--independent", dest="independent", action="store_true", default=None,
                     help="values are jepsen.independent [key value] tuples (detected by default)")
    ind.add_argument("--no-independent", dest="independent", action="store_false")
    c.add_argument("--no-partition", action="store_true", help="check all keys as one history")
    c.add_argument("--strict", action="store_true",
                   help="a history (or key) with no ok operation is unknown, not vacuously valid")
    c.add_argument("--engine", choices=["auto", "spark", "local"], default="auto",
                   help="auto (default: in this process below 4,000,000 rows, Spark above), "
                        "spark (local[2] unless --spark-master) or local")
    c.add_argument("--spark-master", default=None, help="Spark master URL (default local[2])")
    c.add_argument("--budget-s", type=float, default=300.0, help="search time per key before 'unknown'")
    c.add_argument("--consume", choices=["assign", "subscribe"],
                   help="queue: how consumers took partitions (Jepsen's --sub-via; default "
                        "subscribe when the history has a subscribe operation); subscribe "
                        "allows poll-skip and nonmonotonic-poll")
    c.add_argument("--ww-deps", action="store_true",
                   help="queue: infer write-write edges from the log order (Jepsen's "
                        "--ww-deps); G1c cycles are then allowed")
    c.add_argument("--allow-duplicates", action="store_true",
                   help="queue: producers without idempotence may write a value twice")
    c.add_argument("--allow", action="append", metavar="CLASS",
                   help="queue: an anomaly class that does not fail the check (repeatable)")
    c.add_argument("--semantics", choices=["jepsen", "chaoskraft"],
                   help="queue: whose meaning of positions and offsets to judge by (default "
                        "jepsen for Jepsen's EDN, chaoskraft for chaoskraft's own histories; "
                        "docs/queue.md says where they differ)")
    c.add_argument("--tested-nothing", choices=["unknown", "invalid"], default="unknown",
                   help="queue: the verdict of a history in which no send succeeded and no "
                        "poll read anything (default unknown; Jepsen's checker says invalid: "
                        "its cycle search finds an empty transaction graph)")
    c.set_defaults(func=_cmd_check)
    r = sub.add_parser("run", help="run a campaign against a Docker cluster")
    r.add_argument("--campaign", help="a YAML campaign file (flags override its fields)")
    r.add_argument("--seed", type=int)
    r.add_argument("--time-limit", type=float, help="seconds of workload and faults (default 60)")
    r.add_argument("--nodes", type=int, help="containers (default 5)")
    r.add_argument("--controllers", type=int, help="of which controllers (default 3)")
    r.add_argument("--concurrency", type=int, help="client processes (default 15)")
    r.add_argument("--rate", type=float, help="operations per second per client (default 5)")
    r.add_argument("--workload", choices=list(WORKLOADS),
                   help=f"{' or '.join(WORKLOADS)} (default {RunConfig.workload})")
    r.add_argument("--nemesis", help="comma-separated packages: partition, kill, power-loss, "
                                     "and for the queue strand-replica, depose-leader (default "
                                     "partition,kill; queue: partition,kill,power-loss,depose-leader,"
                                     "strand-replica; '' none)")
    r.add_argument("--bug", type=_bug, action="append", help="enable a planted bug on every node")
    r.add_argument("--backend", choices=["docker", "ssh"])
    r.add_argument("--hosts", metavar="FILE|h1,h2,...",
                   help="run on these hosts over SSH, one node each (a hosts file, or "
                        "[user@]address[:port] or ~/.ssh/config aliases; see docs/hosts.md)")
    r.add_argument("--engine", choices=["auto", "spark", "local"])
    r.add_argument("--spark-master")
    r.add_argument("--test", help="test name (the results/<test>/ folder)")
    r.add_argument("--results-dir")
    r.set_defaults(func=cmd_run)
    cp = sub.add_parser("campaign", help="run a campaign file's cells (workload x nemesis x "
                                         "seed) as pytest tests; JUnit XML and a summary table")
    cp.add_argument("file", help="a YAML campaign file (see docs/campaigns.md)")
    cp.add_argument("-n", type=int, default=1, help="cells in parallel (pytest-xdist; each cell "
                                                    "has its own cluster and network)")
    cp.add_argument("--junit-xml", help="where the JUnit XML goes (default: "
                                        "<results>/<campaign>/junit.xml)")
    cp.add_argument("--results-dir", help="where the runs go (default: the file's results_dir)")
    cp.set_defaults(func=cmd_campaign)
    rp = sub.add_parser("reproduce", help="re-run a stored run with its config and seed; say "
                                          "whether its anomaly came back")
    rp.add_argument("run_dir")
    rp.add_argument("--attempts", type=int, default=1, help="re-runs before giving up (default 1)")
    rp.add_argument("--results-dir", help="where the re-runs go (default: the run's results_dir)")
    rp.set_defaults(func=cmd_reproduce)
    sv = sub.add_parser("serve", help="a local web page listing the stored runs, with links to "
                                      "their reports")
    sv.add_argument("--results-dir", default="results")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8088)
    sv.set_defaults(func=cmd_serve)
    mx = sub.add_parser("matrix", help="run planted bugs (or the correct node) over seeds; print "
                                       "what caught each")
    mx.add_argument("--bugs", default="all",
                    help="comma-separated bug names, 'all', a workload's name (the bugs its "
                         "campaigns are meant to show), 'docker' (the bugs Docker campaigns "
                         "catch) or 'none' (the correct node)")
    mx.add_argument("--seeds", type=_seed_range, default=range(1, 6), help="A-B (default 1-5)")
    mx.add_argument("--time-limit", type=float, default=60.0, help="seconds per Docker campaign")
    mx.add_argument("--sim-duration-s", type=float, default=600.0,
                    help="simulated seconds per simulator seed")
    mx.add_argument("--results-dir", default="results")
    mx.add_argument("-j", "--jobs", type=int, default=1,
                    help="Docker campaigns side by side (default 1; each is a 5-node cluster)")
    mx.add_argument("--campaign", metavar="FILE",
                    help="run every Docker cell under this campaign file instead of the bug's "
                         "own or the workload's default")
    mx.add_argument("--without", metavar="PKG[,PKG]",
                    help="drop these fault packages from the campaign each Docker cell runs; a "
                         "bug that needs one of them (needs_faults) must then go unseen")
    mx.set_defaults(func=cmd_matrix)
    a = sub.add_parser("analyze", help="re-check a stored run, or summarise many in Spark")
    a.add_argument("run_dir", nargs="?")
    a.add_argument("--across", metavar="DIR", help="every run under DIR into Spark tables; print "
                                                   "and save a summary per workload and fault")
    a.add_argument("--engine", choices=["auto", "spark", "local"], default="auto")
    a.add_argument("--spark-master")
    a.add_argument("--budget-s", type=float, default=300.0)
    a.set_defaults(func=cmd_analyze)
    im = sub.add_parser("image", help="build the base and node images")
    im.add_argument("action", choices=["build"])
    im.set_defaults(func=cmd_image)
    cl = sub.add_parser("cluster", help="start, stop or inspect a Docker cluster")
    cl.add_argument("action", choices=["up", "down", "status", "add-node"],
                    help="add-node RUN: a new broker under the next node id, in another "
                         "container of the same image")
    cl.add_argument("run_id", nargs="?")
    cl.add_argument("--nodes", type=int, default=5)
    cl.add_argument("--controllers", type=int, default=3)
    cl.add_argument("--json", action="store_true",
                    help="up: the cluster as JSON (run id, bootstrap servers, nodes); status: "
                         "a list of those")
    cl.add_argument("--set", action="append", metavar="[nID:]KEY=VALUE",
                    help="up: a node property for every node, or for node ID only (repeat)")
    cl.add_argument("--timeout", type=float, default=120.0,
                    help="up, add-node: seconds to wait for the cluster to serve "
                         "(default 120)")
    cl.add_argument("--results-dir", default="results",
                    help="up: node logs go to <results>/cluster/<run id>/ if it fails")
    cl.set_defaults(func=cmd_cluster)
    cu = sub.add_parser("cleanup", help="remove every container, network and volume labelled chaoskraft=1")
    cu.add_argument("--run", metavar="ID", help="only the resources of this run (the id in "
                    "its harness.log: `network chaoskraft-ID created`)")
    cu.set_defaults(func=cmd_cleanup)
    hs = sub.add_parser("hosts", help="check the hosts of an SSH campaign, show what is "
                                      "installed, or remove everything chaoskraft put there")
    hs.add_argument("action", choices=["check", "status", "clean"])
    hs.add_argument("--hosts", metavar="FILE|h1,h2,...")
    hs.add_argument("--campaign", metavar="FILE", help="the hosts of this campaign file")
    hs.set_defaults(func=cmd_hosts)
    b = sub.add_parser("bugs", help="list the planted bugs")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bugs)
    return p


def _cmd_check(args) -> int:
    own = WORKLOADS.get(args.model)
    if own is not None and hasattr(own, "check_file"):  # a workload that checks its own files
        return own.check_file(args)
    from workloads.register_check import cmd_check
    return cmd_check(args)


def main(argv: list[str] | None = None) -> int:
    from checkers.history import HistoryError
    args = build_parser().parse_args(argv)
    if (getattr(args, "nodes", None) or 1) < 1:
        print("chaoskraft: --nodes must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.func in (cmd_run, cmd_campaign, cmd_matrix, cmd_reproduce):
        # SIGINT and SIGTERM interrupt these however they were started (SIGINT may have been
        # ignored at exec): teardown, history kept, exit 130
        from .runner import install_interrupt_handlers
        install_interrupt_handlers()
    try:
        return args.func(args)
    except (HistoryError, RunDirError) as exc:  # a bad input file, named with its line
        print(f"chaoskraft: {exc}", file=sys.stderr)
        return 3
    except Exception as exc:
        from .backends.ssh_hosts import HostError
        from .config import CampaignError
        from .hosts import HostsError
        if isinstance(exc, HostError):
            print(f"chaoskraft: cannot use the hosts:\n{exc}", file=sys.stderr)
            return 4
        if isinstance(exc, (CampaignError, HostsError)):
            print(f"chaoskraft: {exc}", file=sys.stderr)
            return 3
        raise
    except KeyboardInterrupt:
        print("chaoskraft: interrupted", file=sys.stderr)
        if argv is None:  # the program itself, not a caller in the same process
            # CPython 3.11 flags a KeyboardInterrupt raised inside exec() (while a dataclass
            # is made during an import, say) as unhandled even once caught, and then ends the
            # process by SIGINT instead of with this code. Teardown is done: end here.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130


if __name__ == "__main__":
    sys.exit(main())
