"""The ``chaoskraft`` command line."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from checkers.models import MODELS
from core.verdict import exit_code
from node_image.bugs import BUGS
from workloads.registry import WORKLOADS

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


def cmd_sim(args) -> int:
    from .simulate import (load_twin, option_values, print_outcome, run_seed, shrink,
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


def cmd_run(args) -> int:
    from .config import load_campaign, resolve
    from .runner import run
    campaign = load_campaign(args.campaign) if args.campaign else {}
    overrides = {
        "seed": args.seed, "time_limit_s": args.time_limit, "nodes": args.nodes,
        "controllers": args.controllers, "concurrency": args.concurrency, "rate": args.rate,
        "nemesis": None if args.nemesis is None else [p for p in args.nemesis.split(",") if p],
        "bugs": args.bug or None, "backend": args.backend, "engine": args.engine,
        "spark_master": args.spark_master, "test": args.test, "results_dir": args.results_dir,
        "workload": args.workload,
    }
    if args.hosts:
        from .hosts import read_hosts_arg
        overrides.update(read_hosts_arg(args.hosts))
        overrides["backend"] = args.backend or "ssh"
    cfg = resolve(campaign, overrides)
    return run(cfg)


def cmd_campaign(args) -> int:
    """Validate the matrix, build the images once, then let pytest run the cells."""
    import pytest

    from .campaign_matrix import load_matrix
    from .images import build_images
    matrix = load_matrix(args.file)  # a bad file fails here, before any container
    if args.n > 1 and any(c.config.hosts for c in matrix.cells):
        print(f"chaoskraft campaign: {matrix.path}: its cells run on hosts over SSH, one node "
              f"per host on fixed ports, so one cell at a time: leave out -n", file=sys.stderr)
        return EXIT_USAGE
    results = Path(args.results_dir or matrix.cells[0].config.results_dir) / matrix.name
    results.mkdir(parents=True, exist_ok=True)
    junit = Path(args.junit_xml) if args.junit_xml else results / "junit.xml"
    print(f"campaign {matrix.path}: {len(matrix.cells)} cells "
          f"({', '.join(c.id for c in matrix.cells)}); runs in {results}", flush=True)
    build_images(log=print)
    # pytest names cells after the file relative to where it runs: run it beside the file
    results, junit, here = results.resolve(), junit.resolve(), Path.cwd()
    argv = [matrix.path.name, "-p", "harness.pytest_campaign", "-p", "no:cacheprovider",
            "-p", "no:warnings", "--chaoskraft-results", str(results),
            "--chaoskraft-name", matrix.name, f"--junitxml={junit}",
            "-o", f"junit_suite_name={matrix.name}", "-o", "junit_family=xunit2",
            "-v", "--no-header", "-rf", "--rootdir", "."]
    if args.n and args.n > 1:
        argv += ["-n", str(args.n), "--dist", "load"]
    os.chdir(matrix.path.resolve().parent)
    try:
        code = pytest.main(argv)
    finally:
        os.chdir(here)
    print(f"JUnit XML: {junit}")
    if code == pytest.ExitCode.INTERRUPTED:  # a cell's run was interrupted: so is the campaign
        raise KeyboardInterrupt
    return int(code)


def cmd_serve(args) -> int:
    from .serve import serve
    return serve(args.results_dir, args.host, args.port)


def cmd_reproduce(args) -> int:
    from .reproduce import reproduce
    if args.attempts < 1:
        print("chaoskraft reproduce: --attempts must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    return reproduce(Path(args.run_dir), args.attempts, args.results_dir)


def cmd_matrix(args) -> int:
    from .bug_matrix import bug_groups, expected_detection, run_matrix
    groups = bug_groups()
    bugs: list[str | None] = []
    for name in (b.strip() for b in args.bugs.split(",") if b.strip()):
        if name not in groups and name not in BUGS:
            print(f"chaoskraft matrix: unknown bug {name!r}; known: {', '.join(groups)}, "
                  f"{', '.join(sorted(BUGS))}", file=sys.stderr)
            return EXIT_USAGE
        bugs += [b for b in groups.get(name, [name]) if b not in bugs]
    if args.jobs < 1:
        print(f"chaoskraft matrix: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return EXIT_USAGE
    without = tuple(w.strip() for w in (args.without or "").split(",") if w.strip())
    try:
        cells = run_matrix(bugs, list(args.seeds), args.time_limit, args.sim_duration_s,
                           args.results_dir, jobs=args.jobs, campaign=args.campaign,
                           without=without)
    except ValueError as exc:
        print(f"chaoskraft matrix: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # Exit 0 only if every bug was caught in every seed where it must be (not where a package
    # it needs was taken away) and the correct node never flagged.
    ok = all(c.detected == expected_detection(None if c.bug == "none" else c.bug, without)
             and not c.verdict.startswith("error") for c in cells)
    return 0 if ok else 1


def cmd_analyze(args) -> int:
    from .analyze import analyze
    if args.across:
        from .across import across
        across(args.across, spark_master=args.spark_master)
        return 0
    if not args.run_dir:
        print("chaoskraft analyze: give a RUN_DIR, or --across DIR", file=sys.stderr)
        return EXIT_USAGE
    results = analyze(args.run_dir, engine=args.engine, spark_master=args.spark_master,
                      budget_s=args.budget_s)
    print(f"verdict: {results['verdict']}")
    return exit_code(results["valid"])


def cmd_image(args) -> int:
    from .images import build_images
    print(build_images())
    return 0


def cmd_cleanup(args) -> int:
    import docker

    from .backends.docker_backend import remove_labelled
    counts = remove_labelled(docker.from_env(),
                             f"chaoskraft.run={args.run}" if args.run else "chaoskraft=1")
    print(f"removed {counts['containers']} containers, {counts['networks']} networks, "
          f"{counts['volumes']} volumes")
    return 0


def cmd_hosts(args) -> int:
    """check, status or clean the hosts of --hosts (or of a campaign file's hosts)."""
    from .backends.ssh_hosts import SshHosts
    from .config import load_campaign
    from .hosts import parse_hosts, read_hosts_arg
    values = load_campaign(args.campaign) if args.campaign else {}
    if args.hosts:
        values.update(read_hosts_arg(args.hosts))
    if not values.get("hosts"):
        print("chaoskraft hosts: name the hosts with --hosts FILE|h1,h2,... or --campaign FILE",
              file=sys.stderr)
        return EXIT_USAGE
    hosts = parse_hosts(values["hosts"])
    cluster = SshHosts(hosts, "hosts", controllers=1, known_hosts=values.get("known_hosts"),
                       host_key_policy=values.get("host_key_policy", "strict"))
    from .backends import BackendError
    try:
        cluster.check()
        if args.action == "check":
            for n in cluster.nodes:
                print(f"{cluster.name(n.node_id)}: reachable, root, python3 usable")
        elif args.action == "status":
            for i, st in cluster.status().items():
                print(f"{cluster.name(i)}: bundle {st.get('bundle') or 'not installed'}, "
                      f"node {'running' if st.get('running') else 'stopped'}")
        else:
            for i, st in cluster.clean().items():
                print(f"{cluster.name(i)}: " + (f"removed {st['removed']}" if st.get("removed")
                                                 else "nothing of chaoskraft's was there"))
    except BackendError as exc:
        print(f"chaoskraft hosts {args.action}:\n{exc}", file=sys.stderr)
        return 1
    finally:
        cluster.close()
    return 0


def _node_settings(items: list[str]) -> tuple[dict[str, str], dict[int, dict[str, str]]]:
    """``--set [nID:]KEY=VALUE`` items: (properties for every node, per node id)."""
    common: dict[str, str] = {}
    per_node: dict[int, dict[str, str]] = {}
    for item in items or []:
        target, key, value = None, *item.partition("=")[::2]
        m = re.fullmatch(r"n(\d+):(.+)", key)
        if m:
            target, key = int(m.group(1)), m.group(2)
        if not key or "=" not in item:
            raise SystemExit(f"chaoskraft cluster up: --set {item!r}: expected [nID:]KEY=VALUE")
        (common if target is None else per_node.setdefault(target, {}))[key] = value
    return common, per_node


def _cluster_view(run_id: str, nodes, states) -> dict:
    """One cluster as ``cluster up --json`` and ``cluster status --json`` print it."""
    from .nodes import KAFKA_PORT
    rows = []
    for n in nodes:
        s = states.get(n.node_id)
        rows.append({"run": run_id, "node_id": n.node_id, "container": n.name,
                     "address": n.address, "roles": list(n.roles),
                     "up": bool(s and s.answers), "raft_role": s.raft_role if s else None,
                     "epoch": s.epoch if s else None, "leader_id": s.leader_id if s else None,
                     "broker_state": s.broker_state if s else None,
                     "registered": s.registered if s else None,
                     "fenced": s.fenced if s else None,
                     "metadata_brokers": list(s.brokers) if s and s.brokers is not None else None})
    bootstrap = ",".join(f"{n.address}:{KAFKA_PORT}" for n in nodes
                         if "broker" in n.roles and n.address)
    return {"run_id": run_id, "bootstrap_servers": bootstrap, "nodes": rows}


def _print_cluster(view: dict) -> None:
    for r in view["nodes"]:
        broker = ("-" if r["broker_state"] is None else
                  f"{'registered' if r['registered'] else 'unregistered'}/"
                  f"{'fenced' if r['fenced'] else 'unfenced'}")
        print(f"{view['run_id']} n{r['node_id']} {r['address'] or '-':<15} "
              f"{'/'.join(r['roles']):<17} {'up' if r['up'] else 'DOWN':<4} "
              f"{r['raft_role'] or '-':<9} epoch {r['epoch'] if r['epoch'] is not None else '-':<4} "
              f"broker {broker}")
    print(f"{view['run_id']} bootstrap.servers={view['bootstrap_servers']}")


def _cluster_up(args) -> int:
    import asyncio
    import random
    import uuid

    from .backends.docker_backend import DockerCluster
    from .images import build_images
    from .nodes import NotServing, wait_until_serving
    common, per_node = _node_settings(args.set)
    unknown = sorted(set(per_node) - set(range(1, args.nodes + 1)))
    if unknown:
        raise SystemExit(f"chaoskraft cluster up: --set names node n{unknown[0]}, but the "
                         f"cluster has nodes n1..n{args.nodes}")
    say = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    run_id = uuid.uuid4().hex[:8]
    c = DockerCluster(run_id, build_images(log=say), args.nodes, args.controllers, common,
                      node_overrides=per_node, seed=random.SystemRandom().randrange(1 << 31),
                      log=say)
    try:
        c.up()
        say(f"waiting up to {args.timeout:.0f} s for a quorum leader and every broker "
            "registered, unfenced and listing all brokers")
        states = asyncio.run(wait_until_serving(c.nodes, args.timeout, say))
    except NotServing as exc:
        logs = Path(args.results_dir) / "cluster" / run_id
        try:
            c.collect_logs(logs)
        except Exception as err:  # noqa: BLE001 - the error below matters more
            say(f"could not collect node logs: {err}")
        print(f"error: cluster {run_id} did not come up: {exc}", file=sys.stderr)
        for i in exc.culprits:
            log = logs / f"n{i}" / "node.log"
            lines = [line for line in log.read_text(errors="replace").splitlines()
                     if line.strip()] if log.exists() else []
            tail = [line for k, line in enumerate(lines[-20:]) if line not in lines[-20:][k + 1:]][-3:]
            print(f"  n{i}: its log {log} ends:" if tail else f"  n{i}: no node log at {log}",
                  *(f"    {line}" for line in tail), sep="\n", file=sys.stderr)
        print(f"node logs of every node: {logs}; the cluster is removed", file=sys.stderr)
        c.down()
        return 1
    except BaseException:
        c.down()
        raise
    view = _cluster_view(run_id, c.nodes, states)
    if args.json:
        print(json.dumps(view, indent=2))
    else:
        print(f"cluster {run_id} is up: the quorum has a leader and {sum('broker' in n.roles for n in c.nodes)} "
              f"brokers serve; `chaoskraft cluster down {run_id}` removes it")
        print(f"bootstrap.servers={view['bootstrap_servers']}")
    return 0


def cmd_cluster(args) -> int:
    from .backends.docker_backend import DockerCluster, remove_labelled, running_runs
    if args.action == "up":
        return _cluster_up(args)
    if args.action == "down":
        import docker
        label = f"chaoskraft.run={args.run_id}" if args.run_id else "chaoskraft=1"
        remove_labelled(docker.from_env(), label)
        return 0
    runs = running_runs()
    if args.run_id:
        runs = {k: v for k, v in runs.items() if k == args.run_id}
        if not runs:
            print(f"error: no chaoskraft cluster with run id {args.run_id} is running",
                  file=sys.stderr)
            return 1
    import asyncio

    from .nodes import node_states
    views = []
    for run_id in sorted(runs):
        c = DockerCluster.attach(run_id)
        reachable = [n for n in c.nodes if n.address]
        # a node is down when it leaves DescribeQuorum unanswered for 10 s, not one slow second
        states = asyncio.run(node_states(reachable, 3.0, within_s=10.0)) if reachable else {}
        views.append(_cluster_view(run_id, c.nodes, states))
    if args.json:
        print(json.dumps(views, indent=2))
    else:
        for view in views:
            _print_cluster(view)
        if not views:
            print("no chaoskraft cluster is running")
    return 0


def cmd_bugs(args) -> int:
    rows = [{"name": b.name, "layer": b.layer, "rule": b.rule, "description": b.description,
             "detected_by": list(b.expected), "workload": b.workload,
             "needs_faults": list(b.needs_faults), "campaign": b.campaign,
             "sim_options": dict(b.sim_options)} for b in BUGS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            needs = f" (needs {', '.join(r['needs_faults'])}: {r['campaign']})" \
                if r["needs_faults"] else ""
            needs += "".join(f" (simulator: --option {k}={json.dumps(v)})"
                             for k, v in r["sim_options"].items())
            print(f"{r['name']:<24} {r['layer']:<11} {r['workload']:<9} breaks: {r['rule']}{needs}")
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
                   help="replace an option the seed draws (as printed: crash_mean_ms=null, "
                        "clients=1); repeat it")
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
    cl.add_argument("action", choices=["up", "down", "status"])
    cl.add_argument("run_id", nargs="?")
    cl.add_argument("--nodes", type=int, default=5)
    cl.add_argument("--controllers", type=int, default=3)
    cl.add_argument("--json", action="store_true",
                    help="up: the cluster as JSON (run id, bootstrap servers, nodes); status: "
                         "a list of those")
    cl.add_argument("--set", action="append", metavar="[nID:]KEY=VALUE",
                    help="up: a node property for every node, or for node ID only (repeat)")
    cl.add_argument("--timeout", type=float, default=120.0,
                    help="up: seconds to wait for the cluster to serve (default 120)")
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
    from .check_cmd import cmd_check
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
    except HistoryError as exc:
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
