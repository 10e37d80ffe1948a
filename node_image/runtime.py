"""The asyncio runtime: a Node core on TCP, real files and the real clock.

One event loop thread owns the core. Inputs reach it from:
- inbound connections (peers' requests, register clients): each frame is
  decoded and handed to ``Node.handle`` with the connection as ``src``;
- Kafka client connections on the PLAINTEXT listener (brokers only; opened
  once the broker's metadata has caught up): each frame is decoded by
  ``kafka_codec`` and handed to ``Node.handle_kafka``. As in Kafka, a
  connection has one request in flight: the next frame is read only after
  the previous request was answered, so answers come in request order; an
  answer naming a client quota's throttle mutes the connection that long (no
  frame read), and, for a client older than KIP-219, is itself held so long;
- outbound connections to other nodes, voters from the configuration and
  brokers from the metadata (our requests; their responses are handed in
  with the peer's node id as ``src``);
- one timer, re-armed after every input at ``Node.next_deadline_ms()``.
After every input the outbox is drained: replies go to their connection,
requests to the peer's outbound connection (opened on demand; if it cannot
be opened the message is dropped and Raft's request timeout retries).

Time is ``time.monotonic()`` in ms. Nothing here calls ``time.sleep``
(libfaketime in its don't-fake-monotonic mode makes it fail); waits use the
loop. Bad input from the network (oversized, truncated or undecodable
frames, a response where a request belongs) closes that connection and is
logged; it never stops the node. SIGTERM first runs a broker's controlled
shutdown (up to ``CONTROLLED_SHUTDOWN_MS``), then flushes the partitions,
resigns Raft leadership (EndQuorumEpoch) and exits.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import signal
import socket
import time

from . import kafka_codec as kc
from . import messages as m
from .framing import read_frame
from .rpc_journal import RpcJournal, label
from .coverage import Reached
from .config import NodeConfig
from .fs import LogDirFailure, PowerLossFileSystem, RealFileSystem
from .node import Node

logger = logging.getLogger("chaoskraft.node")
KAFKA_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
CONTROLLED_SHUTDOWN_MS = 8000
EXIT_BUG = 70  # EX_SOFTWARE: the node stopped on a bug of its own (see _on_loop_error)
EXIT_LOG_DIR_FAILED = 74  # EX_IOERR: the disk under the log directory failed
EXIT_LISTENER = 71  # EX_OSERR: the Kafka listener's address could not be bound


def halt_on_log_dir_failure(log_dir: str, exc: LogDirFailure) -> None:
    """Kafka halts when its metadata log directory fails; ours holds the metadata log and
    every partition, so any disk error there stops the node at once, before it serves or
    acknowledges anything it may not have written."""
    logger.critical("reached log-dir-failed: stopping: the log directory %s failed: %s. It "
                    "holds the metadata log, so the node halts, as Kafka does when its metadata "
                    "log dir fails; nothing it could not write was acknowledged", log_dir, exc)
    logging.shutdown()
    os._exit(EXIT_LOG_DIR_FAILED)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def wall_ms() -> int:
    """Kafka's ``Time.milliseconds()``: the wall clock, which a clock fault moves."""
    return int(time.time() * 1000)


def _client(peer) -> str:
    return f"client {peer[0]}:{peer[1]}" if isinstance(peer, tuple) else f"client {peer}"


class _Inbound:
    """A connection a peer or client opened to us; the ``src`` token for replies."""

    def __init__(self, writer: asyncio.StreamWriter, journal: RpcJournal | None) -> None:
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.journal = journal
        self.name = _client(self.peer)  # a node's name once its first stamp names it

    def received(self, msg, stamp) -> None:
        if stamp is not None:
            self.name = f"n{stamp[0]}"
        if self.journal is not None:
            self.journal.received(self.name, label(msg), stamp)

    def send(self, msg) -> None:
        if not self.writer.is_closing():
            stamp = None if self.journal is None else self.journal.sent(self.name, label(msg))
            self.writer.write(m.encode(msg, stamp))

    def __repr__(self) -> str:
        return f"<inbound {self.peer}>"


class _KafkaConnection:
    """A Kafka client connection: the ``src`` token for KafkaResponses."""

    def __init__(self, writer: asyncio.StreamWriter, journal: RpcJournal | None) -> None:
        self.writer = writer
        self.peer = writer.get_extra_info("peername")
        self.answered = asyncio.Event()
        self.journal = journal
        self.name = _client(self.peer)
        self.throttle_ms = 0  # a client quota's: read nothing more of it for this long
        self.held: bytes | None = None  # an answer held for that long (before KIP-219)

    def received(self, req: kc.KafkaRequest) -> None:
        if self.journal is not None:
            self.journal.received(self.name, f"{req.name} #{req.correlation_id}")

    def send(self, resp: kc.KafkaResponse) -> None:
        if resp.body is not None and self.journal is not None:
            self.journal.sent(self.name, f"{resp.request.name} response "
                                         f"#{resp.request.correlation_id}")
        self.throttle_ms = resp.throttle_ms
        if resp.body is not None and not self.writer.is_closing():
            try:
                frame = kc.encode_response(resp.request, resp.body)
                if resp.throttle_ms and not kc.client_throttles(resp.request):
                    self.held = frame
                else:
                    self.writer.write(frame)
            except Exception:
                # Our bug: say so loudly, and do not leave the client waiting.
                logger.exception("cannot encode the answer to %s from %s", resp.request.name,
                                 self.peer)
                self.writer.close()
        self.answered.set()

    def __repr__(self) -> str:
        return f"<kafka client {self.peer}>"


class _Outbound:
    """Our connection to one peer: requests go out, their responses come back on it.

    As Kafka's NetworkClient closes a connection whose request timed out and connects
    again, a connection that has answered nothing for ``stall_ms`` since a request was
    written is aborted at the next send and opened afresh. Without this, a connection
    that lived through a network partition stays silent after the heal until the
    kernel's back-off retransmission gets through (13 s and more)."""

    def __init__(self, runtime: "NodeRuntime", node_id: int, address: tuple[str, int],
                 stall_ms: int, journal: RpcJournal | None = None) -> None:
        self.runtime = runtime
        self.journal = journal
        self.node_id = node_id
        self.address = address
        self.stall_ms = stall_ms
        self.writer: asyncio.StreamWriter | None = None
        self.connecting = False
        self.queue: list[bytes] = []
        self.waiting_since: int | None = None  # first write with no frame read since

    def send(self, msg) -> None:
        journal = self.journal
        frame = m.encode(msg, None if journal is None
                         else journal.sent(f"n{self.node_id}", label(msg)))
        writer = self.writer
        if writer is not None and not writer.is_closing():
            now = now_ms()
            if self.waiting_since is not None and now - self.waiting_since > self.stall_ms:
                logger.info("connection to node %s answered nothing for %d ms; connecting again",
                            self.node_id, now - self.waiting_since)
                self._drop(writer)
            else:
                if self.waiting_since is None:
                    self.waiting_since = now
                writer.write(frame)
                return
        self.queue.append(frame)
        if not self.connecting:
            self.connecting = True
            asyncio.get_running_loop().create_task(self._connect())

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        if self.writer is writer:
            self.writer = None
            self.waiting_since = None
        writer.transport.abort()

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
        if self.queue:
            self.waiting_since = now_ms()
        for frame in self.queue:
            writer.write(frame)
        self.queue.clear()
        try:
            while True:
                body = await read_frame(reader)
                if body is None:
                    break
                if self.writer is writer:
                    self.waiting_since = None
                msg, stamp = m.decode_stamped(body)
                if self.journal is not None:
                    self.journal.received(f"n{self.node_id}", label(msg), stamp)
                self.runtime.deliver(self.node_id, msg)
        except (m.MessageError, OSError, TypeError) as exc:
            logger.warning("closing connection to node %s: %s", self.node_id, exc)
        finally:
            self._drop(writer)


def resolve_advertised(config: NodeConfig) -> NodeConfig:
    """An empty advertised host becomes this host's address (a container's own IP)."""
    host, port = config.broker.advertised
    if host:
        return config
    try:
        host = socket.gethostbyname(socket.gethostname())
    except OSError:
        host = "127.0.0.1"
    return dataclasses.replace(config, broker=dataclasses.replace(config.broker,
                                                                  advertised=(host, port)))


class NodeRuntime:
    def __init__(self, config: NodeConfig, seed: int | None = None) -> None:
        config = resolve_advertised(config)
        self.config = config
        self.rng = random.Random(seed)
        self.node: Node | None = None
        self._peers: dict[int, _Outbound] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._stop = asyncio.Event()
        self._fs = PowerLossFileSystem() if config.power_loss else RealFileSystem()
        self._kafka_server: asyncio.base_events.Server | None = None
        self._kafka_opening = False
        # The longest a peer may take to answer a request: a parked fetch plus the retry
        # timeout. A connection silent for longer is dead (see _Outbound).
        self._stall_ms = max(config.raft.request_timeout_ms,
                             config.broker.replica_fetch_wait_max_ms + config.broker.rpc_timeout_ms)
        self.journal = (RpcJournal(config.journal_path, config.node_id)
                        if config.journal_path else None)

    def _on_event(self, msg: str) -> None:
        if isinstance(msg, Reached):  # counted from the log (node_image.coverage)
            logger.info("reached %s: %s", msg.event, msg)
        else:
            logger.info("%s", msg)

    def _on_loop_error(self, loop, context) -> None:
        """An exception no connection or timer caught. A peer that went away (OSError) is
        asyncio's to log; anything else is a bug of the node (a SafetyViolation, an
        AssertionError raised while handling a message): the node stops at once, loudly,
        rather than run on in a state its rules no longer hold for."""
        exc = context.get("exception")
        if isinstance(exc, LogDirFailure):
            halt_on_log_dir_failure(self.config.log_dir, exc)
            return
        if exc is None or isinstance(exc, (OSError, asyncio.CancelledError, asyncio.TimeoutError)):
            loop.default_exception_handler(context)
            return
        logger.critical("stopping: a bug in the node (%s): %s: %s", context.get("message"),
                        type(exc).__name__, exc, exc_info=exc)
        logging.shutdown()
        os._exit(EXIT_BUG)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(self._on_loop_error)
        self.node = Node(self.config, self._fs, self.rng, now_ms(), self._on_event,
                         wall_clock=wall_ms)
        host, port = self.config.listener
        server = await asyncio.start_server(self._on_connection, host, port)
        logger.info("node %s listening on %s:%s (roles %s); log dir %s, %s", self.config.node_id,
                    host, port, ",".join(self.config.roles), self.config.log_dir,
                    "un-fsynced data in this process's memory (power loss seam on)"
                    if self.config.power_loss else "writes go to the file system")
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
            self.node.begin_shutdown(now_ms())
            self._after_input()
            deadline = loop.time() + CONTROLLED_SHUTDOWN_MS / 1000
            while not self.node.shutdown_ready and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if not self.node.shutdown_ready:
                logger.warning("controlled shutdown did not finish in %d ms; stopping anyway",
                               CONTROLLED_SHUTDOWN_MS)
            self.node.shutdown(now_ms())
            self._flush()
            await asyncio.sleep(0.2)  # let EndQuorumEpoch reach the voters
            server.close()
            if self.journal is not None:
                self.journal.close()
            if self._kafka_server is not None:
                self._kafka_server.close()
            self._fs.close()

    def stop(self) -> None:
        self._stop.set()

    def deliver(self, src, msg) -> None:
        self.node.handle(src, msg, now_ms())
        self._after_input()

    def _peer(self, node_id: int) -> _Outbound | None:
        address = self.node.peer_address(node_id)
        if address is None:
            return None
        peer = self._peers.get(node_id)
        if peer is None or peer.address != address:
            peer = self._peers[node_id] = _Outbound(self, node_id, address, self._stall_ms,
                                                        self.journal)
        return peer

    def _flush(self) -> None:
        for dest, msg in self.node.ready():
            if isinstance(msg, m.DescribeQuorumResponse):
                msg = dataclasses.replace(msg, wall_clock_ms=wall_ms())
            if isinstance(dest, int):
                peer = self._peer(dest)
                if peer is not None:
                    peer.send(msg)
            else:
                dest.send(msg)
        broker = self.node.broker
        if broker is not None and broker.ready and self._kafka_server is None \
                and not self._kafka_opening:
            self._kafka_opening = True
            asyncio.get_running_loop().create_task(self._open_kafka_listener())

    async def _open_kafka_listener(self) -> None:
        host, port = self.config.kafka_listener
        try:
            self._kafka_server = await asyncio.start_server(self._on_kafka_connection, host, port)
        except OSError as exc:
            # A broker no client can reach must not run on as if it served: stop, saying why
            logger.critical("stopping: cannot open the Kafka listener on %s:%s (listeners): %s",
                            host, port, exc)
            logging.shutdown()
            os._exit(EXIT_LISTENER)
        logger.info("Kafka listener open on %s:%s (advertised %s:%s)", host, port,
                    *self.node.broker.advertised)

    async def _on_kafka_connection(self, reader: asyncio.StreamReader,
                                   writer: asyncio.StreamWriter) -> None:
        conn = _KafkaConnection(writer, self.journal)
        try:
            while not self._stop.is_set():
                body = await read_frame(reader, KAFKA_MAX_REQUEST_BYTES)
                if body is None:
                    break
                try:
                    req = kc.decode_request(body)
                except kc.RequestError as exc:
                    if exc.response is not None:  # answered; the client goes on
                        logger.debug("Kafka client %s: %s", conn.peer, exc)
                        writer.write(exc.response)
                        await writer.drain()
                        continue
                    logger.warning("Kafka client %s: %s; closing the connection", conn.peer, exc)
                    break
                conn.answered.clear()
                conn.received(req)
                self.node.handle_kafka(conn, req, now_ms())
                self._after_input()
                await conn.answered.wait()
                await writer.drain()
                if conn.throttle_ms:  # muted, as Kafka mutes a throttled client's channel
                    await asyncio.sleep(conn.throttle_ms / 1000)
                    conn.throttle_ms = 0
                if conn.held is not None:
                    writer.write(conn.held)
                    conn.held = None
                    await writer.drain()
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away, or the node is stopping
        except (m.MessageError, ConnectionError) as exc:
            logger.warning("closing Kafka connection from %s: %s", conn.peer, exc)
        finally:
            writer.close()

    def _after_input(self) -> None:
        self._flush()
        if self.journal is not None:
            self.journal.maybe_flush(now_ms())
        delay_ms = max(1, self.node.next_deadline_ms() - now_ms())
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.node.poll(now_ms())
        self._after_input()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Inbound(writer, self.journal)
        try:
            while True:
                body = await read_frame(reader)
                if body is None:
                    break
                msg, stamp = m.decode_stamped(body)
                if not type(msg).__name__.endswith("Request"):
                    raise m.MessageError(f"{type(msg).__name__} is not a request")
                conn.received(msg, stamp)
                self.deliver(conn, msg)
        except asyncio.CancelledError:
            pass  # the node is stopping
        except (m.MessageError, ConnectionError) as exc:
            logger.warning("closing connection from %s: %s", conn.peer, exc)
        finally:
            writer.close()
