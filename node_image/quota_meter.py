"""Client byte-rate quotas enforced, as Kafka's ClientQuotaManager enforces them (KIP-13,
KIP-55, KIP-219): a core without I/O that a broker asks, per Produce and per Fetch, how long
the client is to be throttled.

Theory of operation
-------------------
- Which quota: the most specific entity of the image (``client_quotas.py``) that names the
  key for this user and client id, in Kafka's order: (user, client id), (user, default client
  id), user, (default user, client id), (default user, default client id), default user,
  client id, default client id. A client that matches none is not metered.
- Who shares it: the quota's sensor is named by the components of the entity that matched,
  filled with the client's own names (Kafka's metric tags): clients of one user under a user
  quota share one rate; under a client-id quota, or a default one, each client id has its
  own.
- The rate: bytes summed over ``quota.window.num`` samples of ``quota.window.size.seconds``
  each (Kafka's SampledStat and Rate): a sample starts at the first record after the last
  one ended, a sample older than all the windows together is emptied, and the rate divides
  by the time since the oldest sample began, but never by less than the windows but one (so
  a new client's first bytes are measured over ten seconds by default, not one).
- The throttle: when the rate with this request's bytes passes the quota Q, the client is
  held X = (rate - Q) / Q * window ms, the delay that brings the rate back to Q if nothing
  more is sent (Kafka's QuotaUtils.throttleTime, not bounded for byte rates).
- A throttled Fetch is answered empty and its bytes taken back (``unrecord``), as Kafka's;
  a Fetch never asks for more than the quota allows in the windows but one
  (:meth:`QuotaMeter.max_bytes`), so one answer alone cannot be throttled forever.

The broker (``broker/apis/produce.py``, ``fetch.py``) puts the throttle in the answer's
``throttle_time_ms`` and the runtime mutes the connection for that long: no further request
of it is read until the time has passed (from Produce v6 and Fetch v8, KIP-219, the answer is
sent at once and the client waits too; before, the answer itself is held).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .client_quotas import CLIENT_ID, USER

PRODUCE, FETCH = "producer_byte_rate", "consumer_byte_rate"
EXPIRY_MS = 3_600_000  # a client's rate idle this long is forgotten, as Kafka's sensors
# the user every client is to the quotas: the node has no SASL listener, so every client is
# User:ANONYMOUS, and a quota applies by client id, the default user's or ANONYMOUS's own
QUOTA_USER = "ANONYMOUS"


def _precedence(user: str, client_id: str) -> list[tuple[tuple, tuple[str, str]]]:
    """(entity, the sensor's tags (user, client id)) in Kafka's order of precedence."""
    both = (user, client_id)
    return [
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    ]


def resolve(quotas: dict, key: str, user: str, client_id: str | None):
    """(quota, sensor tags) of the client for ``key``, or None where no entity sets it."""
    if not quotas:  # the common case: no quota anywhere, nothing to look up
        return None
    client_id = client_id or ""
    for entity, tags in _precedence(user, client_id):
        value = quotas.get(entity, {}).get(key)
        if value is not None:
            return value, tags
    return None


@dataclass(slots=True)
class Rate:
    """Kafka's Rate over a SampledStat: ``samples`` windows of ``window_ms``."""
    samples: int
    window_ms: int
    starts: list = field(default_factory=list)  # each sample's start (ms)
    values: list = field(default_factory=list)  # each sample's sum
    current: int = 0

    def record(self, value: float, now: int) -> None:
        if not self.starts:
            self.starts.append(now)
            self.values.append(0.0)
        if now - self.starts[self.current] >= self.window_ms:
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.starts):
                self.starts.append(now)
                self.values.append(0.0)
            else:
                self.starts[self.current], self.values[self.current] = now, 0.0
        self.values[self.current] += value

    def _purge(self, now: int) -> None:
        for i, start in enumerate(self.starts):
            if now - start >= self.samples * self.window_ms:
                self.starts[i], self.values[i] = now, 0.0

    def window_size(self, now: int) -> int:
        """The milliseconds the rate is taken over."""
        self._purge(now)
        elapsed = now - min(self.starts, default=now)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def measure(self, now: int) -> float:
        """Per second."""
        size = self.window_size(now)
        return sum(self.values) / (size / 1000)


class QuotaMeter:
    """One broker's byte rates of clients under a quota, and their throttles."""

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._rates: dict[tuple, Rate] = {}  # (key, tags) -> its rate
        self._used: dict[tuple, int] = {}  # (key, tags) -> when it last recorded
        self._swept_ms = 0
        self.throttled = 0  # answers that carried a throttle

    def _sweep(self, now: int) -> None:
        """Forget the rates of clients idle for an hour (Kafka's sensor expiry), so that
        client ids coming and going under a default quota do not pile up."""
        if now - self._swept_ms < EXPIRY_MS:
            return
        self._swept_ms = now
        for k in [k for k, t in self._used.items() if now - t >= EXPIRY_MS]:
            del self._rates[k], self._used[k]

    def record(self, quotas: dict, key: str, user: str, client_id: str | None, value: float,
               now: int) -> int:
        """Record ``value`` bytes of the client; the milliseconds it is to be throttled (0:
        within its quota, or none applies)."""
        found = resolve(quotas, key, user, client_id)
        if found is None:
            return 0
        bound, tags = found
        self._sweep(now)
        rate = self._rates.get((key, tags))
        if rate is None:
            rate = self._rates[(key, tags)] = Rate(self.samples, self.window_ms)
        self._used[(key, tags)] = now
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        self.throttled += 1
        if bound <= 0:
            return self.samples * self.window_ms  # a quota of 0: nothing may pass
        return round((observed - bound) / bound * rate.window_size(now))

    def unrecord(self, quotas: dict, key: str, user: str, client_id: str | None, value: float,
                 now: int) -> None:
        """Take back bytes recorded for an answer that was not sent (a throttled Fetch)."""
        found = resolve(quotas, key, user, client_id)
        if found is not None and (key, found[1]) in self._rates:
            self._rates[(key, found[1])].record(-value, now)

    def max_bytes(self, quotas: dict, key: str, user: str, client_id: str | None) -> int | None:
        """The most one answer may carry without being throttled for it alone (Kafka's
        getMaxValueInQuotaWindow), or None without a quota."""
        found = resolve(quotas, key, user, client_id)
        if found is None:
            return None
        return int(found[0] * (self.samples - 1) * self.window_ms / 1000)
