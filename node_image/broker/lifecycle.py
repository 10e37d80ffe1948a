"""BrokerLifecycleManager: registration, heartbeats, fencing and controlled shutdown.

States, as Kafka's BrokerState: STARTING (not registered) -> RECOVERY
(registered, fenced, catching up on metadata) -> RUNNING (unfenced) ->
PENDING_CONTROLLED_SHUTDOWN (asked to shut down; the controller moves its
leaderships away) -> SHUTTING_DOWN (the controller agreed; safe to exit).

Rules
-----
- One incarnation id per process start; the registration goes to the
  active controller (the Raft leader) and is retried until accepted. The
  broker epoch it returns goes into every later request.
- A heartbeat every ``broker.heartbeat.interval.ms``, carrying the offset of
  the metadata this broker has applied; one is sent at once when the broker
  is fenced and has just caught up, so unfencing does not wait a period.
- The controller decides fencing: a heartbeat answer saying "fenced" moves a
  RUNNING broker back to RECOVERY. STALE_BROKER_EPOCH means the controller no
  longer knows this registration: register again.
- No active controller known (the quorum is electing, or this broker is cut
  off from it): look again every ``retry.backoff.ms``, as Kafka's channel to
  the controller does, not at every wake-up (a broker that polled at once
  kept its process busy for as long as the quorum had no leader).
- Pure: requests go to ``outbox``; time comes in as ``now``.
"""
from __future__ import annotations

import uuid
from typing import Callable

from .. import messages as m

STARTING, RECOVERY, RUNNING = "STARTING", "RECOVERY", "RUNNING"
PENDING_CONTROLLED_SHUTDOWN, SHUTTING_DOWN = "PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN"


class BrokerLifecycleManager:
    def __init__(self, broker_id: int, endpoints: tuple, rack: str | None, *,
                 heartbeat_interval_ms: int, request_timeout_ms: int, retry_backoff_ms: int, rng,
                 outbox: list, next_correlation: Callable[[], int],
                 on_event: Callable[[str], None]) -> None:
        self.broker_id = broker_id
        self.endpoints = endpoints
        self.rack = rack
        self.incarnation_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.outbox = outbox
        self._next_correlation = next_correlation
        self._on_event = on_event
        self.state = STARTING
        self.broker_epoch = -1
        self.fenced = True
        self.want_shutdown = False
        self._in_flight: tuple[int, int] | None = None  # (correlation id, deadline)
        self._next_send_ms = 0
        self._registration_offset = -1
        # the broker epoch of a clean shutdown before this start, else -1 (Kafka's
        # PreviousBrokerEpoch): the controller takes a crashed broker out of every ELR
        self.previous_broker_epoch = -1

    def caught_up(self, metadata_offset: int) -> bool:
        return self.broker_epoch >= 0 and metadata_offset > self.broker_epoch

    def begin_controlled_shutdown(self, now: int) -> None:
        if self.state in (STARTING, RECOVERY):
            self.state = SHUTTING_DOWN  # nothing to move away
            return
        if self.state == RUNNING:
            self.state = PENDING_CONTROLLED_SHUTDOWN
            self.want_shutdown = True
            self._next_send_ms = now
            self._on_event("controlled shutdown: asking the controller to move leadership away")

    def poll(self, now: int, controller_id: int | None, metadata_offset: int) -> None:
        if self._in_flight is not None:
            if now < self._in_flight[1]:
                return
            self._in_flight = None  # lost; send again
        if now < self._next_send_ms or self.state == SHUTTING_DOWN:
            return
        if controller_id is None:
            self._next_send_ms = now + self.retry_backoff_ms
            return
        corr = self._next_correlation()
        if self.state == STARTING:
            msg = m.BrokerRegistrationRequest(corr, self.broker_id, self.incarnation_id,
                                              self.endpoints, self.rack,
                                              self.previous_broker_epoch)
        else:
            msg = m.BrokerHeartbeatRequest(corr, self.broker_id, self.broker_epoch,
                                           metadata_offset - 1, False, self.want_shutdown)
        self._in_flight = (corr, now + self.request_timeout_ms)
        self.outbox.send(controller_id, msg)

    def metadata_advanced(self, now: int, metadata_offset: int) -> None:
        if self.state == RECOVERY and self.caught_up(metadata_offset) and self._in_flight is None:
            self._next_send_ms = min(self._next_send_ms, now)

    def next_deadline_ms(self) -> int | None:
        if self.state == SHUTTING_DOWN:
            return None
        if self._in_flight is not None:
            return self._in_flight[1]
        return self._next_send_ms

    def _answered(self, correlation_id: int) -> bool:
        if self._in_flight is None or self._in_flight[0] != correlation_id:
            return False
        self._in_flight = None
        return True

    def handle_registration_response(self, resp: m.BrokerRegistrationResponse, now: int) -> None:
        if not self._answered(resp.correlation_id):
            return
        if resp.error != m.NONE:
            self._next_send_ms = now + (self.heartbeat_interval_ms // 4 if resp.error == m.NOT_CONTROLLER
                                        else self.heartbeat_interval_ms)
            self._on_event(f"registration refused: {m.ERROR_NAMES.get(resp.error, resp.error)}; retrying")
            return
        self.broker_epoch = resp.broker_epoch
        self.state = RECOVERY
        self.fenced = True
        self._next_send_ms = now
        self._on_event(f"registered as broker {self.broker_id} with broker epoch {resp.broker_epoch}")

    def handle_heartbeat_response(self, resp: m.BrokerHeartbeatResponse, now: int) -> None:
        if not self._answered(resp.correlation_id):
            return
        if resp.error == m.STALE_BROKER_EPOCH:
            self._on_event(f"controller does not know broker epoch {self.broker_epoch}: registering again")
            self.state = STARTING
            self.broker_epoch = -1
            self.fenced = True
            self._next_send_ms = now
            return
        if resp.error != m.NONE:
            self._next_send_ms = now + (50 if resp.error == m.NOT_CONTROLLER
                                        else self.heartbeat_interval_ms)
            return
        self._next_send_ms = now + self.heartbeat_interval_ms
        if resp.is_fenced != self.fenced:
            self._on_event(f"broker {self.broker_id} is now {'fenced' if resp.is_fenced else 'unfenced'}")
        self.fenced = resp.is_fenced
        if self.state == PENDING_CONTROLLED_SHUTDOWN:
            if resp.should_shut_down:
                self.state = SHUTTING_DOWN
                self._on_event("controlled shutdown: the controller moved our leadership away")
            else:
                self._next_send_ms = now + 100
        elif self.state == RECOVERY and not resp.is_fenced:
            self.state = RUNNING
        elif self.state == RUNNING and resp.is_fenced:
            self.state = RECOVERY
