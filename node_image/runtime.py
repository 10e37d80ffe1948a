"""The asyncio runtime: a Node core on TCP, real files and the real clock.

One event loop thread owns the core. Inputs reach it from:
- inbound connections (peers' requests, register clients): each frame is
  decoded and handed to ``Node.handle`` with the connection as ``src``;
- outbound connections to the voters (our requests; their responses are
  handed in with the peer's node id as ``src``);
- one timer, re-armed after every input at ``Node.next_deadline_ms()``.
After every input the outbox is drained: replies go to their connection,
requests to the peer's outbound connection (opened on demand; if it cannot
be opened the message is dropped and Raft's request timeout retries).

Time is ``time.monotonic()`` in ms. Nothing here calls ``time.sleep``
(libfaketime in its don't-fake-monotonic mode makes it fail); waits use the
loop. Bad input from the network (oversized, truncated or undecodable
frames, a response where a request belongs) closes that connection and is
logged; it never stops the node. SIGTERM resigns leadership (EndQuorumEpoch)
before exiting.
"""
from __future__ import annotations

import asyncio
import logging
import random
import signal
import time

from . import messages as m
from .config import NodeConfig
from .fs import RealFileSystem
from .node import Node

logger = logging.getLogger("chaoskraft.node")


def now_ms() -> int:
    return int(time.monotonic() * 1000)


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame body, or None at a clean end of stream. Raises MessageError on bad framing."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise m.MessageError("connection closed inside a frame length") from None
        return None
    size = int.from_bytes(head, "big")
    if size > m.MAX_FRAME_BYTES:
        raise m.MessageError(f"frame of {size} bytes exceeds the {m.MAX_FRAME_BYTES} byte limit")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise m.MessageError(f"connection closed inside a {size} byte frame") from None


class _Inbound:
    """A connection a peer or client opened to us; the ``src`` token for replies."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.peer = writer.get_extra_info("peername")

    def send(self, msg) -> None:
        if not self.writer.is_closing():
            self.writer.write(m.encode(msg))

    def __repr__(self) -> str:
        return f"<inbound {self.peer}>"


class _Outbound:
    def __init__(self, runtime: "NodeRuntime", node_id: int, address: tuple[str, int]) -> None:
        self.runtime = runtime
        self.node_id = node_id
        self.address = address
        self.writer: asyncio.StreamWriter | None = None
        self.connecting = False
        self.queue: list[bytes] = []

    def send(self, msg) -> None:
        frame = m.encode(msg)
        if self.writer is not None and not self.writer.is_closing():
            self.writer.write(frame)
            return
        self.queue.append(frame)
        if not self.connecting:
            self.connecting = True
            asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*self.address), 2.0)
        except (OSError, asyncio.TimeoutError) as exc:
            logger.debug("cannot reach node %s at %s: %s", self.node_id, self.address, exc)
            self.queue.clear()
            self.connecting = False
            return
        self.writer = writer
        self.connecting = False
        for frame in self.queue:
            writer.write(frame)
        self.queue.clear()
        try:
            while True:
                body = await read_frame(reader)
                if body is None:
                    break
                self.runtime.deliver(self.node_id, m.decode(body))
        except (m.MessageError, OSError, TypeError) as exc:
            logger.warning("closing connection to node %s: %s", self.node_id, exc)
        finally:
            self.writer = None
            writer.close()


class NodeRuntime:
    def __init__(self, config: NodeConfig, seed: int | None = None) -> None:
        self.config = config
        self.rng = random.Random(seed)
        self.node: Node | None = None
        self._peers = {vid: _Outbound(self, vid, addr) for vid, addr in config.voters.items()
                       if vid != config.node_id}
        self._timer: asyncio.TimerHandle | None = None
        self._stop = asyncio.Event()
        self._fs = RealFileSystem()

    def _on_event(self, msg: str) -> None:
        logger.info("%s", msg)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self.node = Node(self.config, self._fs, self.rng, now_ms(), self._on_event)
        host, port = self.config.listener
        server = await asyncio.start_server(self._on_connection, host, port)
        logger.info("node %s listening on %s:%s (roles %s)", self.config.node_id, host, port,
                    ",".join(self.config.roles))
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        self._after_input()
        try:
            await self._stop.wait()
        finally:
            logger.info("shutting down")
            self.node.shutdown(now_ms())
            self._flush()
            await asyncio.sleep(0.2)  # let EndQuorumEpoch reach the voters
            server.close()
            self._fs.close()

    def stop(self) -> None:
        self._stop.set()

    def deliver(self, src, msg) -> None:
        self.node.handle(src, msg, now_ms())
        self._after_input()

    def _flush(self) -> None:
        out, self.node.outbox[:] = list(self.node.outbox), []
        for dest, msg in out:
            if isinstance(dest, int):
                peer = self._peers.get(dest)
                if peer is not None:
                    peer.send(msg)
            else:
                dest.send(msg)

    def _after_input(self) -> None:
        self._flush()
        delay_ms = max(1, self.node.next_deadline_ms() - now_ms())
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.node.poll(now_ms())
        self._after_input()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Inbound(writer)
        try:
            while True:
                body = await read_frame(reader)
                if body is None:
                    break
                msg = m.decode(body)
                if not type(msg).__name__.endswith("Request"):
                    raise m.MessageError(f"{type(msg).__name__} is not a request")
                self.deliver(conn, msg)
        except (m.MessageError, ConnectionError) as exc:
            logger.warning("closing connection from %s: %s", conn.peer, exc)
        finally:
            writer.close()
