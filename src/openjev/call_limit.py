"""The process-wide limit on backend calls in flight (`CallLimit`), shared by every request's branches."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class CallLimit:
    """The process-wide limit on backend calls in flight, where a batch of n calls holds n.

    A batch waits until all its n places are free and takes them at once, so two batches never hold
    part of the limit each while waiting for the rest; waiters are served first come, first served,
    so a large batch is not starved by single calls. `hold(n)` needs n <= total.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        await self._acquire(n)
        try:
            yield
        finally:
            self._release(n)

    async def _acquire(self, n: int) -> None:
        if n > self.total:
            raise ValueError(f"a batch of {n} calls cannot fit a limit of {self.total}")
        if not self._waiters and self._free >= n:
            self._free -= n
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (n, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(n)  # granted, then cancelled before it could run: give the places back
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                self._wake()  # a waiter behind this one may fit now
            raise

    def _release(self, n: int) -> None:
        self._free += n
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._free:
            n, waiter = self._waiters.popleft()
            if waiter.done():  # cancelled while queued: its task takes itself out
                continue
            self._free -= n
            waiter.set_result(None)
