"""A simulated node's clock: its own offset and drift (ppm) against simulated time, drawn
from the seed. The node's cores read it for their timers (``local``); the simulator turns
a core's deadline back into simulated time (``to_sim``), and the wall clock (the Raft
timers, LogAppendTime) is ``WALL_EPOCH_MS`` plus the same reading plus ``step_ms`` (what
a clock step moves, as the clock package moves a container's through libfaketime) plus
what a rate other than 1 has added since it was set (``set_rate``: the wall clock runs that
many times as fast as the node's own clock, as under libfaketime's speed factor with the
monotonic clock left alone)."""
from __future__ import annotations

import random

# A simulated node's wall clock: this instant plus its own drifting clock's reading.
WALL_EPOCH_MS = 1_800_000_000_000


class NodeClock:
    def __init__(self, offset: int = 0, ppm: int = 0) -> None:
        self.offset = offset
        self.ppm = ppm
        self.step_ms = 0
        self.rate = 1.0
        self._rate_from = 0  # the local reading when the rate was set
        self._rate_ms = 0  # what earlier rates added to the wall clock

    @staticmethod
    def draw(rng: random.Random, max_drift_ppm: int) -> "NodeClock":
        ppm = rng.randint(-max_drift_ppm, max_drift_ppm) if max_drift_ppm else 0
        return NodeClock(rng.randrange(1_000_000_000), ppm)

    def local(self, t: int) -> int:
        return self.offset + t * (1_000_000 + self.ppm) // 1_000_000

    def to_sim(self, local: int) -> int:
        return -((-(local - self.offset) * 1_000_000) // (1_000_000 + self.ppm))

    def wall(self, t: int) -> int:
        local = self.local(t)
        if self.rate == 1.0:
            return WALL_EPOCH_MS + local + self.step_ms + self._rate_ms
        return (WALL_EPOCH_MS + local + self.step_ms + self._rate_ms
                + int((self.rate - 1) * (local - self._rate_from)))

    def set_rate(self, t: int, rate: float) -> None:
        """From simulated time ``t`` the wall clock runs at ``rate`` (it does not jump)."""
        assert rate > 0, rate
        local = self.local(t)
        self._rate_ms += int((self.rate - 1) * (local - self._rate_from))
        self._rate_from, self.rate = local, rate

    def reset(self) -> None:
        """Back to the node's own time: no step, rate 1, nothing a rate added."""
        self.step_ms = 0
        self.rate, self._rate_ms = 1.0, 0
