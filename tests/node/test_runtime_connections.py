"""The node's outbound connections: one that stopped answering is dropped and opened again,
as Kafka's NetworkClient does on a request timeout; one that answers is kept."""
import asyncio

import pytest

from node_image import messages as m
from node_image import runtime
from node_image.framing import read_frame

STALL_MS = 2500


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Recorder:
    """Stands in for the NodeRuntime: records what the connection hands in."""

    def __init__(self) -> None:
        self.delivered: list = []

    def deliver(self, src, msg) -> None:
        self.delivered.append((src, msg))


class Peer:
    """A peer's listener that logs (connection number, request id) for every frame it reads,
    and answers each one only while ``answering`` is set."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, int]] = []
        self.connections = 0
        self.answering = True
        self.got = asyncio.Condition()

    async def serve(self, reader, writer) -> None:
        self.connections += 1
        number = self.connections
        try:
            while (body := await read_frame(reader)) is not None:
                req = m.decode(body)
                async with self.got:
                    self.frames.append((number, req.request_id))
                    self.got.notify_all()
                if self.answering:
                    writer.write(m.encode(req))  # an answer on the same connection
        except (ConnectionError, m.MessageError):
            pass
        finally:
            writer.close()

    async def wait_for(self, count: int) -> list[tuple[int, int]]:
        async with self.got:
            await asyncio.wait_for(self.got.wait_for(lambda: len(self.frames) >= count), 10)
        return list(self.frames)


async def outbound_to_peer(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(runtime, "now_ms", clock)
    peer = Peer()
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    recorder = Recorder()
    out = runtime._Outbound(recorder, 2, ("127.0.0.1", port), STALL_MS)
    return clock, peer, server, recorder, out


async def wait_delivered(recorder: Recorder, count: int) -> None:
    async def poll():
        while len(recorder.delivered) < count:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(poll(), 10)


def test_a_connection_that_stopped_answering_is_opened_again(monkeypatch):
    async def scenario():
        clock, peer, server, recorder, out = await outbound_to_peer(monkeypatch)
        try:
            peer.answering = False
            out.send(m.DescribeQuorumRequest(request_id=1))
            assert await peer.wait_for(1) == [(1, 1)]
            clock.ms += STALL_MS - 1  # still within the time an answer may take
            out.send(m.DescribeQuorumRequest(request_id=2))
            assert await peer.wait_for(2) == [(1, 1), (1, 2)]
            clock.ms += 2  # now silent for longer than any answer takes
            peer.answering = True
            out.send(m.DescribeQuorumRequest(request_id=3))
            assert await peer.wait_for(3) == [(1, 1), (1, 2), (2, 3)]
            await wait_delivered(recorder, 1)
            assert [(src, msg.request_id) for src, msg in recorder.delivered] == [(2, 3)]
        finally:
            server.close()
    asyncio.run(scenario())


def test_a_connection_that_answers_is_kept_however_long_it_idles(monkeypatch):
    async def scenario():
        clock, peer, server, recorder, out = await outbound_to_peer(monkeypatch)
        try:
            for request_id in range(1, 4):
                out.send(m.DescribeQuorumRequest(request_id=request_id))
                await wait_delivered(recorder, request_id)
                clock.ms += 10 * STALL_MS
            assert await peer.wait_for(3) == [(1, 1), (1, 2), (1, 3)]
            assert peer.connections == 1
        finally:
            server.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("raft_ms, fetch_wait_ms, rpc_ms, expected", [
    (2000, 500, 2000, 2500), (5000, 500, 2000, 5000)])
def test_the_stall_limit_is_the_longest_an_answer_may_take(raft_ms, fetch_wait_ms, rpc_ms,
                                                            expected, tmp_path):
    from node_image.config import BrokerConfig, NodeConfig, RaftConfig
    config = NodeConfig(node_id=1, voters={1: ("127.0.0.1", 9093)}, log_dir=str(tmp_path),
                        raft=RaftConfig(request_timeout_ms=raft_ms),
                        broker=BrokerConfig(advertised=("127.0.0.1", 9092),
                                            replica_fetch_wait_max_ms=fetch_wait_ms,
                                            rpc_timeout_ms=rpc_ms))
    assert runtime.NodeRuntime(config)._stall_ms == expected
