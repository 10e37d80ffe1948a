"""Controller mutation quotas (KIP-599), as Kafka's ControllerMutationQuotaManager keeps
them: a core without I/O that the active controller asks before it creates topics, adds
partitions or deletes topics for a client.

A client's ``controller_mutation_rate`` quota (the entity that applies as for byte rates,
``quota_meter.resolve``) is R partition mutations a second: creating a topic costs its
partitions, adding partitions the new ones, deleting a topic the partitions it had. Each
client (each sensor, as ``quota_meter`` names them) has a token bucket of R x
``quota.window.num`` x ``quota.window.size.seconds`` tokens, full at first and refilled at R
a second; a mutation takes its cost, and may take the bucket below zero.

- Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+: versions that know the
  error): a topic asked for while the bucket is below zero is refused
  THROTTLING_QUOTA_EXCEEDED, the others go through (each may take the bucket lower).
- Permissive (older versions): every topic goes through.
- Either way the answer's throttle is the time the bucket takes to refill to zero,
  -tokens / R seconds, and the client's connection is muted that long.
"""
from __future__ import annotations

from dataclasses import dataclass

from .quota_meter import resolve

KEY = "controller_mutation_rate"
THROTTLING_QUOTA_EXCEEDED = 89
EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


@dataclass(slots=True)
class _Bucket:
    tokens: float
    last_ms: int


class MutationQuota:
    """The active controller's token buckets."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._buckets: dict[tuple, _Bucket] = {}

    def admit(self, quotas: dict, user: str, client_id: str | None, costs, strict: bool,
              now: int) -> tuple[set, int]:
        """(the names refused, the throttle in ms) for mutations ``costs``: (name,
        partitions) in the request's order."""
        found = resolve(quotas, KEY, user, client_id)
        if found is None:
            return set(), 0
        rate, tags = found
        burst = rate * self.samples * self.window_ms / 1000
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = _Bucket(burst, now)
        bucket.tokens = min(burst, bucket.tokens + rate * max(now - bucket.last_ms, 0) / 1000)
        bucket.last_ms = now
        refused = set()
        for name, cost in costs:
            if strict and bucket.tokens < 0:
                refused.add(name)
            else:
                bucket.tokens -= cost
        if bucket.tokens >= 0:
            return refused, 0
        if rate <= 0:
            return refused, self.samples * self.window_ms  # a quota of 0: nothing refills
        return refused, round(-bucket.tokens / rate * 1000)
