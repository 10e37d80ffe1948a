"""A client of the register service on a node's internal listener.

One connection per node, one request at a time per :class:`RegisterClient`
(as a Jepsen client process). ``call`` returns the node's
:class:`RegisterResponse`; when no answer comes within the timeout, or the
connection breaks, it raises :class:`Indeterminate`: the caller does not
know whether the operation took effect and must record it as ``info``,
never retry it silently.
"""
from __future__ import annotations

import asyncio
import itertools

from node_image import messages as m
from node_image.framing import read_frame


class Indeterminate(Exception):
    """No answer: the operation may or may not have happened."""


def _id(msg):
    """A request's id, which its reply carries: register and DescribeQuorum messages name it
    request_id, the Raft admin ones (QuorumState, the voter changes) correlation_id."""
    return getattr(msg, "request_id", getattr(msg, "correlation_id", None))


class RegisterClient:
    _ids = itertools.count(1)

    def __init__(self, host: str, port: int, timeout_s: float = 5.0) -> None:
        self.address = (host, port)
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(*self.address), self.timeout_s)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
            self._writer = None

    async def request(self, msg, *, sent=None):
        """Send one request and wait for the reply with the same id."""
        try:
            await self._connect()
        except (OSError, asyncio.TimeoutError) as exc:
            # Nothing was sent: the operation definitely did not happen.
            raise ConnectionRefusedError(f"cannot connect to {self.address}: {exc}") from None
        try:
            self._writer.write(m.encode(msg))
            if sent is not None:
                sent()
            await self._writer.drain()
            while True:
                body = await asyncio.wait_for(read_frame(self._reader), self.timeout_s)
                if body is None:
                    raise ConnectionError("connection closed")
                reply = m.decode(body)
                if _id(reply) == _id(msg):
                    return reply
        except (OSError, asyncio.TimeoutError, m.MessageError) as exc:
            await self.close()
            raise Indeterminate(f"{type(exc).__name__}: {exc}") from None

    async def read(self, key: str) -> m.RegisterResponse:
        return await self.request(m.RegisterRequest(next(self._ids), "read", key))

    async def write(self, key: str, value: int) -> m.RegisterResponse:
        return await self.request(m.RegisterRequest(next(self._ids), "write", key, value))

    async def cas(self, key: str, expected: int, new: int) -> m.RegisterResponse:
        return await self.request(m.RegisterRequest(next(self._ids), "cas", key, new, expected))

    async def describe(self) -> m.DescribeQuorumResponse:
        return await self.request(m.DescribeQuorumRequest(next(self._ids)))
