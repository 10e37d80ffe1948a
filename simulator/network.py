"""The simulated network between nodes: seeded loss, duplication and delay on every
node-to-node message, and the links a partition blocks (``blocked``: (from, to) pairs).
Clients' messages travel as on TCP: never lost, duplicated or blocked; after the faults
end (``heal_all``) neither are the nodes'.

A stored Docker run replayed here (``simulator.twin``) adds what its fault packages do to a
node's incoming traffic (``inbound``): packets lost at random, which TCP turns into
retransmissions (the message arrives, late: 200 ms, then twice as long per loss again, as
the kernel's retransmission timer), and a fixed delay with jitter; and the nodes that
refuse clients (``refused``: a TCP reset on the Kafka port)."""
from __future__ import annotations

import random
from dataclasses import dataclass

from node_image import messages as m

RTO_MS = 200  # Linux's minimum retransmission timeout
MAX_RETRANSMISSIONS = 6


@dataclass
class Inbound:
    """What a node's incoming links do to node-to-node messages while a fault lasts."""
    loss: float = 0.0  # each packet lost with this probability (TCP sends it again)
    delay_ms: int = 0
    jitter_ms: int = 0


class SimNetwork:
    def __init__(self, rng: random.Random, drop_rate: float, duplicate_rate: float,
                 max_delay_ms: int, stats: dict) -> None:
        self.rng = rng
        self.drop_rate = drop_rate
        self.duplicate_rate = duplicate_rate
        self.max_delay_ms = max_delay_ms
        self.stats = stats
        self.blocked: set[tuple[int, int]] = set()
        # the links fault packages' steps cut (simulator.twin), apart from the seeded ones
        self.plan_blocked: set[tuple[int, int]] = set()
        self.inbound: dict[int, Inbound] = {}
        self.refused: set[int] = set()
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
        extra = 0
        fault = self.inbound.get(dest) if not client else None
        if fault is not None:
            extra = fault.delay_ms + (self.rng.randint(-fault.jitter_ms, fault.jitter_ms)
                                      if fault.jitter_ms else 0)
            rto = RTO_MS
            for _ in range(MAX_RETRANSMISSIONS):
                if not fault.loss or self.rng.random() >= fault.loss:
                    break
                extra += rto
                rto *= 2
        return [max(1, 1 + self.rng.randrange(self.max_delay_ms) + extra)
                for _ in range(copies)]

    def passes(self, src, dest) -> bool:
        """Does a message from ``src`` reach ``dest`` now (a client's always does)?"""
        return isinstance(src, tuple) or ((src, dest) not in self.blocked
                                          and (src, dest) not in self.plan_blocked)

    def heal(self) -> None:
        self.blocked = set()

    def heal_all(self) -> None:
        """The end of the faults: no partition, and no loss or duplication from now on."""
        self.healed = True
        self.blocked = set()
        self.plan_blocked = set()
        self.inbound = {}
        self.refused = set()
