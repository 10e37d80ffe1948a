"""Request bookkeeping of a KRaft replica (Kafka's RequestManager): at most one request in
flight per destination, its timeout, and the back-off before the next. Pure: time comes in
as ``now`` in milliseconds."""
from __future__ import annotations

class RequestManager:
    """One request in flight per destination, with timeouts and back-off."""

    def __init__(self, request_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.inflight: dict[int, tuple[int, int]] = {}
        self.backoff_until: dict[int, int] = {}

    def ready(self, dest: int, now: int) -> bool:
        sent = self.inflight.get(dest)
        if sent is not None:
            if now < sent[1] + self.request_timeout_ms:
                return False
            del self.inflight[dest]
            self.backoff_until[dest] = now
        return now >= self.backoff_until.get(dest, 0)

    def sent(self, dest: int, correlation_id: int, now: int) -> None:
        self.inflight[dest] = (correlation_id, now)

    def matches(self, dest: int, correlation_id: int) -> bool:
        sent = self.inflight.get(dest)
        if sent is None or sent[0] != correlation_id:
            return False
        del self.inflight[dest]
        return True

    def backoff(self, dest: int, now: int, ms: int | None = None) -> None:
        self.backoff_until[dest] = now + (self.retry_backoff_ms if ms is None else ms)

    def reset(self) -> None:
        self.inflight.clear()
        self.backoff_until.clear()

    def next_deadline(self, now: int) -> int | None:
        times = [t + self.request_timeout_ms for _, t in self.inflight.values()]
        times += list(self.backoff_until.values())
        times = [t for t in times if t > now]
        return min(times) if times else None
