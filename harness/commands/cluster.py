"""The commands about clusters and hosts: ``cluster up/down/status``, ``image``, ``cleanup``
and ``hosts``."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from core.verdict import EXIT_USAGE


def cmd_image(args) -> int:
    from ..images import build_images
    print(build_images())
    return 0


def cmd_cleanup(args) -> int:
    import docker

    from ..backends.docker_backend import remove_labelled
    counts = remove_labelled(docker.from_env(),
                             f"chaoskraft.run={args.run}" if args.run else "chaoskraft=1")
    print(f"removed {counts['containers']} containers, {counts['networks']} networks, "
          f"{counts['volumes']} volumes")
    return 0


def cmd_hosts(args) -> int:
    """check, status or clean the hosts of --hosts (or of a campaign file's hosts)."""
    from ..backends.ssh_hosts import SshHosts
    from ..config import load_campaign
    from ..hosts import parse_all_hosts, read_hosts_arg
    values = load_campaign(args.campaign) if args.campaign else {}
    if args.hosts:
        values.update(read_hosts_arg(args.hosts))
    if not values.get("hosts"):
        print("chaoskraft hosts: name the hosts with --hosts FILE|h1,h2,... or --campaign FILE",
              file=sys.stderr)
        return EXIT_USAGE
    hosts, spares = parse_all_hosts(values)
    cluster = SshHosts(hosts, "hosts", controllers=1, known_hosts=values.get("known_hosts"),
                       host_key_policy=values.get("host_key_policy", "strict"), spares=spares)
    from ..backends import BackendError
    try:
        cluster.check()
        if args.action == "check":
            for i in cluster.hosts:
                print(f"{cluster.name(i)}: reachable, root, python3 usable"
                      + (" (spare)" if i in cluster.spares else ""))
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
    from workloads.nodes import KAFKA_PORT
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

    from ..backends import log_ends
    from ..backends.docker_backend import DockerCluster
    from ..images import build_images
    from workloads.nodes import NotServing, wait_until_serving
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
        states = asyncio.run(wait_until_serving(c.nodes, args.timeout, say,
                                                stopped=c.refusing_nodes))
    except NotServing as exc:
        logs = Path(args.results_dir) / "cluster" / run_id
        try:
            c.collect_logs(logs)
        except Exception as err:  # noqa: BLE001 - the error below matters more
            say(f"could not collect node logs: {err}")
        print(f"error: cluster {run_id} did not come up: {exc}", file=sys.stderr)
        print(*log_ends(logs, exc.culprits), sep="\n", file=sys.stderr)
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


def _cluster_add_node(args) -> int:
    """A new machine for a running ``cluster up``: a broker under the next unused node id,
    in another container of the same image; waits until every broker lists it."""
    import asyncio

    from ..backends import BackendError
    from ..backends.docker_backend import DockerCluster
    from workloads.nodes import NotServing, wait_until_serving
    if not args.run_id:
        raise SystemExit("chaoskraft cluster add-node: name the cluster's run id "
                         "(`chaoskraft cluster status` lists them)")
    say = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    try:
        c = DockerCluster.attach(args.run_id, log=say)
        info = c.add_node()
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    up = [n for n in c.nodes if n.address and n.node_id != info.node_id and c.is_running(
        n.node_id)]
    try:
        states = asyncio.run(wait_until_serving([*up, info], args.timeout, say))
    except NotServing as exc:
        print(f"error: n{info.node_id} ({info.name}) did not join within {args.timeout:.0f} s: "
              f"{exc}; it stays (`chaoskraft cluster down {args.run_id}` removes the cluster)",
              file=sys.stderr)
        return 1
    view = _cluster_view(args.run_id, [*up, info], states)
    if args.json:
        print(json.dumps(view, indent=2))
    else:
        print(f"n{info.node_id} ({info.name}, {info.address}) joined cluster {args.run_id} as a "
              f"broker; every broker lists it")
        print(f"bootstrap.servers={view['bootstrap_servers']}")
    return 0


def cmd_cluster(args) -> int:
    from ..backends.docker_backend import DockerCluster, remove_labelled, running_runs
    if args.action == "up":
        return _cluster_up(args)
    if args.action == "add-node":
        return _cluster_add_node(args)
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

    from workloads.nodes import node_states
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
