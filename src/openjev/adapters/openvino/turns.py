"""Fair turns on one engine (pure asyncio): one step at a time, granted round-robin over groups.

A group is a request (its branches share a prefix). With one FIFO, a request of 8 questions in
both option orders queues 16 calls, each of several steps, and a small request behind it waits
for all of them; here the small request's next step comes after at most one step of each other
group that is waiting. Steps are at most `engine.PIECE` tokens, so no long prompt holds the engine
in one piece.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class FairTurns:
    def __init__(self) -> None:
        self._waiting: OrderedDict[Hashable, deque[asyncio.Future[None]]] = OrderedDict()
        self._busy = False

    @asynccontextmanager
    async def turn(self, group: Hashable) -> AsyncIterator[None]:
        await self._acquire(group)
        try:
            yield
        finally:
            self._release()

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def _acquire(self, group: Hashable) -> None:
        if not self._busy and not self._waiting:
            self._busy = True
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release()  # the turn was handed over just as the waiter went away: pass it on
            else:
                self._forget(group, granted)
            raise

    def _release(self) -> None:
        while self._waiting:
            group, queue = self._waiting.popitem(last=False)
            granted = queue.popleft()
            if queue:
                self._waiting[group] = queue  # back of the rotation
            if not granted.done():
                granted.set_result(None)
                return
        self._busy = False

    def _forget(self, group: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(group)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self._waiting[group]
