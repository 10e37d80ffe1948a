"""The simulated network between nodes: seeded loss, duplication and delay on every
node-to-node message, and the links a partition blocks (``blocked``: (from, to) pairs).
Clients' messages travel as on TCP: never lost, duplicated or blocked; after the faults
end (``heal_all``) neither are the nodes'."""
from __future__ import annotations

import random

from node_image import messages as m


class SimNetwork:
    def __init__(self, rng: random.Random, drop_rate: float, duplicate_rate: float,
                 max_delay_ms: int, stats: dict) -> None:
        self.rng = rng
        self.drop_rate = drop_rate
        self.duplicate_rate = duplicate_rate
        self.max_delay_ms = max_delay_ms
        self.stats = stats
        self.blocked: set[tuple[int, int]] = set()
        self.healed = False

    def delays(self, src, dest, msg) -> list[int]:
        """The delays (ms) after which copies of ``msg`` arrive: none if it is lost."""
        client = isinstance(dest, tuple) or isinstance(src, tuple)
        copies = 1
        if not client and not self.healed:
            if self.rng.random() < self.drop_rate:
                self.stats["dropped"] += 1
                return []
            # Raft RPCs must survive duplicates; a forwarded client request, like the
            # client's own, travels on a connection that does not duplicate (TCP).
            if self.rng.random() < self.duplicate_rate and not isinstance(
                    msg, (m.ForwardRegisterRequest, m.ForwardRegisterResponse)):
                copies = 2
        return [1 + self.rng.randrange(self.max_delay_ms) for _ in range(copies)]

    def passes(self, src, dest) -> bool:
        """Does a message from ``src`` reach ``dest`` now (a client's always does)?"""
        return isinstance(src, tuple) or (src, dest) not in self.blocked

    def heal(self) -> None:
        self.blocked = set()

    def heal_all(self) -> None:
        """The end of the faults: no partition, and no loss or duplication from now on."""
        self.healed = True
        self.blocked = set()
