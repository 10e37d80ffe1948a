"""The harness's time, injectable (trio's Clock and MockClock): the nemesis executor and the
fault packages read ``clock.monotonic()`` and wait with ``await clock.sleep(s)``, so a test
runs a campaign's fault timeline against a recording backend in virtual time.

``MockClock`` jumps as trio's does with ``autojump_threshold=0``: whenever nothing else can
run (no callback ready in the event loop, no call of ``asyncio.to_thread`` in flight), its
time moves to the earliest deadline of a sleeper and wakes every sleeper due. A timeline of
minutes takes milliseconds, and the same every time.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


REAL_CLOCK = RealClock()


class MockClock:
    """Virtual time for one event loop; ``run(coro)`` runs a coroutine under it."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future]] = []
        self._seq = itertools.count()
        self._in_threads = 0
        self.jumps = 0

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    def run(self, coro):
        """``asyncio.run(coro)`` with this clock driving time; calls of ``to_thread`` (a
        backend's exec) are counted so that time stands still while one runs."""
        async def main():
            loop = asyncio.get_running_loop()
            original = loop.run_in_executor

            def counted(executor, func, *args):
                fut = original(executor, func, *args)
                self._in_threads += 1
                fut.add_done_callback(lambda _f: self._thread_done())
                return fut
            loop.run_in_executor = counted
            driver = asyncio.create_task(self._drive(loop))
            try:
                return await coro
            finally:
                driver.cancel()
                loop.run_in_executor = original
        return asyncio.run(main())

    def _thread_done(self) -> None:
        self._in_threads -= 1

    async def _drive(self, loop) -> None:
        while True:
            await asyncio.sleep(0)
            # Our own step is running, so the loop's ready queue holds the others' only.
            busy = bool(getattr(loop, "_ready", ()))
            if busy:
                continue
            if self._in_threads or not self._sleepers:
                await asyncio.sleep(0.0005)  # real time: a thread is working, or nobody sleeps
                continue
            self._jump()

    def _jump(self) -> None:
        while self._sleepers and self._sleepers[0][2].cancelled():
            heapq.heappop(self._sleepers)
        if not self._sleepers:
            return
        self._now = max(self._now, self._sleepers[0][0])
        self.jumps += 1
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
