"""What fault packages share: partition grudges, symbolic node targets and iptables chains.

Partitions are grudges: for each node, the set of nodes whose packets it
drops (``iptables -A INPUT -s <ip> -j DROP`` inside its container). Only
node-to-node traffic is dropped; the harness's clients still reach every
node, as Jepsen's control node does. Healing flushes the rules.

Shapes (symbolic; nodes are chosen when the fault fires):
- isolate-one: one node cut from all others;
- halves: a random split into two halves;
- majorities-ring: every node sees only its two neighbours in a random ring,
  so each has a majority view and no two agree;
- bridge: two halves and one node that sees both;
- isolate-controller: the active controller cut from all others;
- isolate-partition-leader: the leader of a partition of the workload's
  topic cut from all others.

Node targets: one, minority, majority, all, active-controller,
partition-leader, leader-of:N (the leader of partition N), node:N (node N).
Each fault is a package in ``nemesis/packages/`` (nemesis.package).
"""
from __future__ import annotations

import random

PARTITION_SHAPES = ("isolate-one", "halves", "majorities-ring", "bridge", "isolate-controller",
                    "isolate-partition-leader")
NODE_TARGETS = ("one", "minority", "majority", "all", "active-controller", "partition-leader")
PARTITION_CHAIN = "ck-partition"
# (partition, leader, replicas, isr), as the topic's metadata tells it.
PartitionInfo = tuple[int, int, list[int], list[int]]
LOSS_CHAIN = "ck-loss"


def grudge(shape: str, ids: list[int], rng: random.Random,
           controller: int | None = None, leader: int | None = None) -> dict[int, set[int]]:
    """For each node, the nodes it will not hear from."""
    ids = sorted(ids)
    g: dict[int, set[int]] = {i: set() for i in ids}

    def cut(a: set[int], b: set[int]) -> None:
        for x in a:
            for y in b:
                g[x].add(y)
                g[y].add(x)
    if shape in ("isolate-one", "isolate-controller", "isolate-partition-leader"):
        aimed = {"isolate-controller": controller, "isolate-partition-leader": leader}.get(shape)
        victim = aimed if aimed is not None else ids[rng.randrange(len(ids))]
        cut({victim}, set(ids) - {victim})
    elif shape == "halves":
        shuffled = ids[:]
        rng.shuffle(shuffled)
        half = set(shuffled[: len(ids) // 2])
        cut(half, set(ids) - half)
    elif shape == "majorities-ring":
        ring = ids[:]
        rng.shuffle(ring)
        n = len(ring)
        for k, x in enumerate(ring):
            near = {ring[(k - 1) % n], ring[(k + 1) % n], x}
            g[x] |= set(ids) - near
    elif shape == "bridge":
        shuffled = ids[:]
        rng.shuffle(shuffled)
        rest = shuffled[1:]
        a = set(rest[: len(rest) // 2])
        cut(a, set(rest) - a)
    else:
        raise ValueError(f"unknown partition shape {shape!r}; known: {', '.join(PARTITION_SHAPES)}")
    return g


def grudge_value(g: dict[int, set[int]]) -> dict[str, list[int]]:
    """A grudge as the history stores it."""
    return {str(k): sorted(v) for k, v in g.items()}


def heal_partitions(backend, node_ids: list[int] | None = None,
                    chains: tuple[str, ...] = (PARTITION_CHAIN, LOSS_CHAIN)) -> None:
    for n in backend.nodes:
        if node_ids is None or n.node_id in node_ids:
            for chain in chains:
                backend.exec(n.node_id, flush_script(chain), check=False)


def node_targets(target: str, ids: list[int], rng: random.Random,
                 controller: int | None = None, leader: int | None = None) -> list[int]:
    """The nodes a symbolic target means now. ``leader``: the leader of the partition the
    target names (``partition-leader`` or ``leader-of:N``), looked up by the caller."""
    ids = sorted(ids)
    if target == "one":
        return [ids[rng.randrange(len(ids))]]
    if target == "minority":
        k = max(1, (len(ids) - 1) // 2)
        return sorted(rng.sample(ids, k))
    if target == "majority":
        return sorted(rng.sample(ids, len(ids) // 2 + 1))
    if target == "all":
        return ids
    if target in ("active-controller", "partition-leader") or target.startswith("leader-of:"):
        aimed = controller if target == "active-controller" else leader
        return [aimed] if aimed is not None else [ids[rng.randrange(len(ids))]]
    if target.startswith("node:") and target[5:].isdigit():
        return [int(target[5:])] if int(target[5:]) in ids else []
    raise ValueError(f"unknown target {target!r}; known: {', '.join(NODE_TARGETS)}, "
                     "leader-of:N, node:N")



def aimed_at(target: str) -> str | None:
    """What a target or shape must look up when its fault fires: "controller" (the active
    controller), "leader" (a partition's leader) or None."""
    if target in ("isolate-controller", "active-controller"):
        return "controller"
    if target in ("isolate-partition-leader", "partition-leader") or target.startswith("leader-of:"):
        return "leader"
    return None


def target_partition(target: str) -> int | None:
    """N of ``leader-of:N``; None for other targets."""
    if target.startswith("leader-of:"):
        return int(target.split(":", 1)[1])
    return None


def check_target(target: str) -> str | None:
    """None when ``target`` is a node target, else what is wrong with it."""
    if target in NODE_TARGETS:
        return None
    if target.startswith("leader-of:"):
        n = target.split(":", 1)[1]
        if n.isdigit():
            return None
        return f"{target!r}: leader-of takes a partition number (leader-of:0)"
    if target.startswith("node:"):
        if target[5:].isdigit():
            return None
        return f"{target!r}: node takes a node id (node:3)"
    return f"unknown target {target!r} (known: {', '.join(NODE_TARGETS)}, leader-of:N, node:N)"


# ----------------------------------------------------------------- iptables
# Partitions and packet loss live in their own chains, jumped to from INPUT, so that
# healing one leaves the other in place. The jump goes first in INPUT: on a host with a
# firewall of its own (ufw, firewalld: an early ACCEPT of established connections), a jump
# appended after its rules would never see the node's traffic.


def chain_script(chain: str, rules: list[str]) -> list[str]:
    lines = [f"iptables -N {chain} 2>/dev/null || true",
             f"iptables -C INPUT -j {chain} 2>/dev/null || iptables -I INPUT 1 -j {chain}"]
    lines += [f"iptables -A {chain} {r}" for r in rules]
    return ["sh", "-ec", "\n".join(lines)]


def drop_script(drops: list[str]) -> list[str]:
    """The command that drops every packet from the addresses ``drops``."""
    return chain_script(PARTITION_CHAIN, [f"-s {a} -j DROP" for a in drops])


def flush_script(chain: str) -> list[str]:
    return ["sh", "-c", f"iptables -F {chain} 2>/dev/null; true"]
