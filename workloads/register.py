"""The register workload: read / write / cas on rotating keys, Jepsen style.

The generator is pure: process p's operation sequence depends only on the
seed and p (never on responses or timing), so a re-run from the same seed
issues the same operations. Every written value is unique
(``process * 1000000 + seq``), so a value read names the one write that
produced it and a lost acknowledged write cannot be explained away by
another write of the same value; a cas expects the value the process itself
last wrote to that key. As in Jepsen, process p always talks to node
``p mod n`` (a client bound to a node keeps talking to it when it is
partitioned away or deposed); nodes that are not the active controller
forward to it.

Keys come in windows of ``ops_per_key`` operations per process, one key per
node in each window: key ``r{window * n + i}`` is written (write, cas) only
by the processes bound to the i-th node, and read by every process. Every
key's history stays small enough to check, and what a cut-off controller
acknowledges alone (a write its successor never has) cannot hide behind
other nodes' writes to the same key: every other process reads that key
through the next controller while only the cut-off node's processes could
overwrite it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

# Half reads, a quarter writes, a quarter cas: writes and cas answer at once where a cut-off
# controller acknowledges what it cannot commit, while its reads wait for a barrier that never
# commits (until the operation times out), so every process makes writes often.
OPS = ("read", "read", "write", "cas")


@dataclass(frozen=True, slots=True)
class Op:
    process: int
    seq: int
    f: str
    key: str
    value: object
    node: int


class RegisterGenerator:
    def __init__(self, seed: int, nodes: list[int], ops_per_key: int = 30) -> None:
        if not nodes:
            raise ValueError("the register workload needs at least one node")
        self.seed = seed
        self.nodes = sorted(nodes)
        self.ops_per_key = ops_per_key

    def ops(self, process: int) -> Iterator[Op]:
        rng = random.Random(f"{self.seed}-register-{process}")
        n = len(self.nodes)
        home = process % n
        seq = 0
        last_written: dict[str, int] = {}
        while True:
            f = rng.choice(OPS)
            window = seq // self.ops_per_key
            key = f"r{window * n + (rng.randrange(n) if f == 'read' else home)}"
            value: object = None
            unique = process * 1_000_000 + seq
            if f == "write":
                value = unique
                last_written[key] = unique
            elif f == "cas":
                # Expect what this process itself last wrote to the key (or the initial
                # empty register): deterministic, and it succeeds when nobody wrote since.
                value = [last_written.get(key), unique]
                last_written[key] = unique
            yield Op(process, seq, f, key, value, self.nodes[home])
            seq += 1
