"""Requests a broker forwards to the active controller on a client's behalf (CreateTopics,
DeleteTopics, the config and ACL changes, elections, reassignments, feature and voter
changes), as Kafka's ForwardingManager (KIP-590) keeps them.

Theory of operation
-------------------
A forwarded request is answered once, with the controller's answer or with
REQUEST_TIMED_OUT at the client's deadline. Until then the broker keeps
trying: the controller can move at any moment (an election, a killed or
partitioned controller), and a client that asked a broker should not see
the quorum's internals. So the request waits while no controller is known;
a refusal naming NOT_CONTROLLER (the controller lost the lead, or never had
it) sends it again, ``RETRY_BACKOFF_MS`` later, to whichever controller the
broker then knows; and a request whose controller is no longer the leader,
without an answer, is sent to the new one (the old one may have died with
it). As with Kafka, a request sent twice may take effect once and be
answered for the second sending (CreateTopics then says TOPIC_ALREADY_EXISTS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import messages as m

RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms between two sendings

# where each row of an answer with rows carries its error: the controller refuses a whole
# request it cannot serve with NOT_CONTROLLER in every row
_ROW_ERROR = {m.CreateTopicsResponse: 1, m.CreatePartitionsResponse: 1,
              m.DeleteTopicsResponse: 2, m.AlterConfigsResponse: 2,
              m.ElectLeadersResponse: 2, m.AlterReassignmentsResponse: 2,
              m.CreateAclsResponse: 0, m.DeleteAclsResponse: 0, m.AlterScramResponse: 1,
              m.AlterQuotasResponse: 1}


def refused_as_not_controller(resp) -> bool:
    """Whether ``resp`` refuses the whole request because its sender is not (or no longer)
    the active controller: its error, or the error of every one of its rows, is
    NOT_CONTROLLER."""
    index = _ROW_ERROR.get(type(resp))
    if index is None:
        return getattr(resp, "error", None) == m.NOT_CONTROLLER
    return bool(resp.results) and all(row[index] == m.NOT_CONTROLLER for row in resp.results)


@dataclass(slots=True)
class _Forwarded:
    deadline_ms: int
    reply: Callable  # reply(controller's response or None, error)
    build: Callable  # build(correlation id) -> the request
    sent_to: int | None = None  # the controller it went to last; None: waiting to be sent
    send_at_ms: int = 0


class ControllerForwarding:
    """``controller_id()``: the controller the broker knows, or None. ``send(node, msg)``
    sends; ``next_correlation()`` numbers requests."""

    def __init__(self, controller_id: Callable[[], int | None], send: Callable,
                 next_correlation: Callable[[], int]):
        self._controller_id = controller_id
        self._send = send
        self._next_correlation = next_correlation
        self._sent: dict[int, _Forwarded] = {}  # by correlation id of the last sending
        self._waiting: list[_Forwarded] = []

    def forward(self, now: int, timeout_ms: int, reply: Callable, build: Callable) -> None:
        self._try(_Forwarded(now + timeout_ms, reply, build), now)

    def _try(self, f: _Forwarded, now: int) -> None:
        controller = self._controller_id()
        if controller is None or now < f.send_at_ms:
            self._waiting.append(f)
            return
        corr = self._next_correlation()
        f.sent_to = controller
        self._sent[corr] = f
        self._send(controller, f.build(corr))

    def handle_response(self, resp, now: int) -> bool:
        """False if ``resp`` answers nothing forwarded (a late answer to an earlier sending)."""
        f = self._sent.pop(resp.correlation_id, None)
        if f is None:
            return False
        if refused_as_not_controller(resp) and now < f.deadline_ms:
            f.send_at_ms = now + RETRY_BACKOFF_MS
            self._waiting.append(f)
        else:
            f.reply(resp, m.NONE)
        return True

    def poll(self, now: int) -> None:
        """Time out what is due, send again what waits, and send to the new controller what
        the old one never answered."""
        controller = self._controller_id()
        for corr, f in list(self._sent.items()):
            if now >= f.deadline_ms:
                del self._sent[corr]
                f.reply(None, m.REQUEST_TIMED_OUT)
            elif controller is not None and controller != f.sent_to:
                del self._sent[corr]
                self._waiting.append(f)
        waiting, self._waiting = self._waiting, []
        for f in waiting:
            if now >= f.deadline_ms:
                f.reply(None, m.REQUEST_TIMED_OUT)
            else:
                self._try(f, now)

    def next_deadline_ms(self) -> int | None:
        times = [f.deadline_ms for f in self._sent.values()]
        times += [max(f.send_at_ms, 0) if self._controller_id() is not None else f.deadline_ms
                  for f in self._waiting]
        return min(times) if times else None
