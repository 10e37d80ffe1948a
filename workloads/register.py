"""The register workload: read / write / cas on rotating keys, Jepsen style.

The generator is pure: process p's operation sequence depends only on the
seed and p (never on responses or timing), so a re-run from the same seed
issues the same operations. Every written value is unique
(``process * 1000000 + seq``), so a value read names the one write that
produced it and a lost acknowledged write cannot be explained away by
another write of the same value; a cas expects the value the process itself
last wrote to that key. Each process moves to a fresh key every
``ops_per_key`` operations, so every key's history stays small enough to
check. As in
Jepsen, process p always talks to node ``p mod n`` (a client bound to a
node keeps talking to it when it is partitioned away or deposed); nodes
that are not the active controller forward to it.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator


@dataclass(frozen=True, slots=True)
class Op:
    process: int
    seq: int
    f: str
    key: str
    value: object
    node: int


class RegisterGenerator:
    def __init__(self, seed: int, nodes: list[int], ops_per_key: int = 30, values: int = 5) -> None:
        if not nodes:
            raise ValueError("the register workload needs at least one node")
        self.seed = seed
        self.nodes = sorted(nodes)
        self.ops_per_key = ops_per_key
        self.values = values

    def ops(self, process: int) -> Iterator[Op]:
        rng = random.Random(f"{self.seed}-register-{process}")
        seq = 0
        last_written: dict[str, int] = {}
        while True:
            f = rng.choice(("read", "read", "read", "write", "cas"))
            key = f"r{seq // self.ops_per_key}"
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
            yield Op(process, seq, f, key, value, self.nodes[process % len(self.nodes)])
            seq += 1
