"""A simulated node's clock: its own offset and drift (ppm) against simulated time, drawn
from the seed. The node's cores read it for their timers (``local``); the simulator turns
a core's deadline back into simulated time (``to_sim``), and the wall clock (the Raft
timers, LogAppendTime) is ``WALL_EPOCH_MS`` plus the same reading plus ``step_ms``: what
the nemesis's clock steps move, as the clock package moves a container's through
libfaketime."""
from __future__ import annotations

import random

# A simulated node's wall clock: this instant plus its own drifting clock's reading.
WALL_EPOCH_MS = 1_800_000_000_000


class NodeClock:
    def __init__(self, offset: int = 0, ppm: int = 0) -> None:
        self.offset = offset
        self.ppm = ppm
        self.step_ms = 0

    @staticmethod
    def draw(rng: random.Random, max_drift_ppm: int) -> "NodeClock":
        ppm = rng.randint(-max_drift_ppm, max_drift_ppm) if max_drift_ppm else 0
        return NodeClock(rng.randrange(1_000_000_000), ppm)

    def local(self, t: int) -> int:
        return self.offset + t * (1_000_000 + self.ppm) // 1_000_000

    def to_sim(self, local: int) -> int:
        return -((-(local - self.offset) * 1_000_000) // (1_000_000 + self.ppm))

    def wall(self, t: int) -> int:
        return WALL_EPOCH_MS + self.local(t) + self.step_ms
