"""Faults that act on a cluster backend: partitions by iptables, and process kills.

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

Kills SIGKILL the node process through the container's supervisor
(``ck-ctl kill``) and keep it down until ``ck-ctl start``. Targets: one,
minority, all, active-controller, partition-leader. A power loss is a kill of
a node whose un-fsynced writes live only in its memory (the nodes run with
``chaoskraft.power.loss.enable=true`` when the power-loss package is on).

Scenarios aim a short sequence of these faults at one partition of the
queue's topic, chosen from the cluster's metadata when the scenario fires:

- strand-replica: one follower is cut from the partition's other replicas
  until the leader drops it from the ISR (``replica.lag.time.max.ms``) while
  acknowledged writes go on; then the ISR's members are killed and the cut
  healed, so the only live replica is the one without those writes. Kafka
  must leave the partition offline (no unclean election) until an ISR
  member returns. The killed replicas never hold a majority of controllers.
- depose-leader: the leader (its preferred replica, where one leads) is cut
  from every other node while clients still reach it, long enough to be
  fenced and replaced; the records it appended alone are uncommitted. After
  healing it must truncate them (leader epochs) before it follows, and the
  preferred-leader election then makes it the leader again.
"""
from __future__ import annotations

import random

PARTITION_SHAPES = ("isolate-one", "halves", "majorities-ring", "bridge", "isolate-controller",
                    "isolate-partition-leader")
KILL_TARGETS = ("one", "minority", "all", "active-controller", "partition-leader")


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


def apply_grudge(backend, g: dict[int, set[int]]) -> None:
    addr = {n.node_id: n.address for n in backend.nodes}
    for node, drops in g.items():
        for other in sorted(drops):
            backend.exec(node, ["iptables", "-A", "INPUT", "-s", addr[other], "-j", "DROP"])


def heal_partitions(backend, node_ids: list[int] | None = None) -> None:
    for n in backend.nodes:
        if node_ids is None or n.node_id in node_ids:
            backend.exec(n.node_id, ["iptables", "-F", "INPUT"], check=False)


def kill_targets(target: str, ids: list[int], rng: random.Random,
                 controller: int | None = None, leader: int | None = None) -> list[int]:
    ids = sorted(ids)
    if target == "one":
        return [ids[rng.randrange(len(ids))]]
    if target == "minority":
        k = max(1, (len(ids) - 1) // 2)
        return sorted(rng.sample(ids, k))
    if target == "all":
        return ids
    if target in ("active-controller", "partition-leader"):
        aimed = controller if target == "active-controller" else leader
        return [aimed] if aimed is not None else [ids[rng.randrange(len(ids))]]
    raise ValueError(f"unknown kill target {target!r}; known: {', '.join(KILL_TARGETS)}")


# (partition, leader, replicas, isr), as the topic's metadata tells it.
PartitionInfo = tuple[int, int, list[int], list[int]]


def strand_choice(partitions: list[PartitionInfo], controllers: set[int],
                  rng: random.Random) -> tuple[int, int, list[int]] | None:
    """(partition, the replica to strand, the replicas to kill later) or None when no
    partition has a full ISR whose other members can die without the controller quorum."""
    order = sorted(partitions)
    rng.shuffle(order)
    for partition, leader, replicas, isr in order:
        if leader < 0 or len(replicas) < 2 or sorted(isr) != sorted(replicas):
            continue
        followers = sorted(r for r in replicas if r != leader)
        rng.shuffle(followers)
        for stranded in followers:
            others = sorted(r for r in replicas if r != stranded)
            if len(controllers) - len(controllers & set(others)) > len(controllers) // 2:
                return partition, stranded, others
    return None


def depose_choice(partitions: list[PartitionInfo],
                  rng: random.Random) -> tuple[int, int] | None:
    """(partition, its leader): a partition led by its preferred replica where there is one
    (the preferred-leader election brings it back), or None when no partition has a leader."""
    led = sorted(p for p in partitions if p[1] >= 0)
    preferred = [p for p in led if p[2] and p[2][0] == p[1]]
    pool = preferred or led
    if not pool:
        return None
    partition, leader, _, _ = pool[rng.randrange(len(pool))]
    return partition, leader
