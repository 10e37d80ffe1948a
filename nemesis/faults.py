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
  fenced and replaced; the records it appended alone are uncommitted. Then
  it refuses its clients too (``refuse_script``), so they move to the new
  leader and write where the deposed leader wrote alone. After
  healing it must truncate them (leader epochs) before it follows, and the
  preferred-leader election then makes it the leader again.
"""
from __future__ import annotations

import random

PARTITION_SHAPES = ("isolate-one", "halves", "majorities-ring", "bridge", "isolate-controller",
                    "isolate-partition-leader")
NODE_TARGETS = ("one", "minority", "majority", "all", "active-controller", "partition-leader")
PARTITION_CHAIN = "ck-partition"
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
    raise ValueError(f"unknown target {target!r}; known: {', '.join(NODE_TARGETS)}, leader-of:N")



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
    return f"unknown target {target!r} (known: {', '.join(NODE_TARGETS)}, leader-of:N)"


# ----------------------------------------------------------------- iptables
# Partitions and packet loss live in their own chains, jumped to from INPUT, so that
# healing one leaves the other in place.


def _chain_script(chain: str, rules: list[str]) -> list[str]:
    lines = [f"iptables -N {chain} 2>/dev/null || true",
             f"iptables -C INPUT -j {chain} 2>/dev/null || iptables -A INPUT -j {chain}"]
    lines += [f"iptables -A {chain} {r}" for r in rules]
    return ["sh", "-ec", "\n".join(lines)]


def drop_script(drops: list[str]) -> list[str]:
    """The command that drops every packet from the addresses ``drops``."""
    return _chain_script(PARTITION_CHAIN, [f"-s {a} -j DROP" for a in drops])


def refuse_script(port: int) -> list[str]:
    """The command that answers every new and every open TCP connection to ``port`` with a
    reset, in the partition chain (healing removes it): a node its clients see go away."""
    return _chain_script(PARTITION_CHAIN, [f"-p tcp --dport {port} -j REJECT --reject-with tcp-reset"])


def loss_script(sources: list[str], probability: float) -> list[str]:
    """The command that drops packets from ``sources`` at random with ``probability``."""
    return _chain_script(LOSS_CHAIN, [f"-s {a} -m statistic --mode random "
                                      f"--probability {probability:.4f} -j DROP"
                                      for a in sources])


def flush_script(chain: str) -> list[str]:
    return ["sh", "-c", f"iptables -F {chain} 2>/dev/null; true"]


def netem_probe() -> list[str]:
    """Whether the kernel has sch_netem: add and remove a 1 ms delay on the loopback."""
    return ["sh", "-c", "tc qdisc add dev lo root netem delay 1ms 2>&1 && "
                        "tc qdisc del dev lo root 2>&1"]


# ----------------------------------------------------------------- clock
FAKETIME_FILE = "/etc/chaoskraft/faketime"  # libfaketime reads the node's offset from here


def clock_script(offset_s: float) -> list[str]:
    """Set the node's wall-clock offset (libfaketime re-reads the file on every call);
    written to a temporary file and renamed, so the node never reads half of it."""
    value = f"{offset_s:+.3f}"
    return ["sh", "-c", f"printf '%s' '{value}' > {FAKETIME_FILE}.tmp && "
                        f"mv {FAKETIME_FILE}.tmp {FAKETIME_FILE}"]


def bump_offsets(nodes: list[int], max_skew_s: float, rng: random.Random) -> dict[int, float]:
    """A step of up to ``max_skew_s`` forward or back per node, at least a tenth of it."""
    return {n: round(rng.choice((-1, 1)) * rng.uniform(max_skew_s / 10, max_skew_s), 3)
            for n in nodes}


# ----------------------------------------------------------------- corruption
CORRUPT_MODES = ("bitflip", "truncate")
CORRUPT_FILES = ("partitions", "metadata", "all")
_CORRUPT_PY = r"""
import json, os, random, sys
data_dir, mode, which, seed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rng = random.Random(seed)
done = []
for d in sorted(os.listdir(data_dir)):
    path = os.path.join(data_dir, d)
    if not os.path.isdir(path) or "-" not in d:
        continue
    meta = d.startswith("__cluster_metadata")
    if (which == "partitions" and meta) or (which == "metadata" and not meta):
        continue
    segs = sorted((f for f in os.listdir(path) if f.endswith(".log")), reverse=True)
    segs = [f for f in segs if os.path.getsize(os.path.join(path, f)) > 0]
    if not segs:
        continue
    f = os.path.join(path, segs[0])
    size = os.path.getsize(f)
    if mode == "truncate":
        cut = rng.randint(1, min(size, 4096))
        os.truncate(f, size - cut)
        done.append({"file": f, "size": size, "truncated_bytes": cut})
    else:
        window = min(size, 65536)
        flips = []
        with open(f, "r+b") as fh:
            for _ in range(3):
                pos = size - window + rng.randrange(window)
                fh.seek(pos)
                b = fh.read(1)[0]
                bit = rng.randrange(8)
                fh.seek(pos)
                fh.write(bytes([b ^ (1 << bit)]))
                flips.append([pos, bit])
        done.append({"file": f, "size": size, "flipped": flips})
print(json.dumps(done))
"""


def corrupt_script(data_dir: str, mode: str, which: str, seed: str) -> list[str]:
    """Corrupt the newest segment of each chosen log directory of a stopped node: three bit
    flips in its last 64 KiB, or up to 4 KiB cut off its tail. Prints what it did (JSON)."""
    return ["python3", "-c", _CORRUPT_PY, data_dir, mode, which, seed]


# (partition, leader, replicas, isr), as the topic's metadata tells it.
PartitionInfo = tuple[int, int, list[int], list[int]]


def strand_choice(partitions: list[PartitionInfo], controllers: set[int],
                  rng: random.Random, avoid: set = frozenset()) -> tuple[int, int, list[int]] | None:
    """(partition, the replica to strand, the replicas to kill later) or None when no
    partition has a full ISR whose other members can die without the controller quorum.
    Nodes in ``avoid`` (the active controller) are never the stranded replica."""
    order = sorted(partitions)
    rng.shuffle(order)
    # A partition led by another than its preferred replica is about to get that one back (the
    # preferred-leader election): the replica chosen as a follower here may lead by the time it
    # is cut off. Such partitions come last.
    order.sort(key=lambda p: bool(p[2]) and p[1] != p[2][0])
    for partition, leader, replicas, isr in order:
        if leader < 0 or len(replicas) < 2 or sorted(isr) != sorted(replicas):
            continue
        followers = sorted(r for r in replicas if r != leader)
        rng.shuffle(followers)
        for stranded in followers:
            if stranded in avoid:
                continue
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
