"""Fair turns on one engine (pure asyncio): one step at a time, the next to the group that used the least.

A group is a request (its calls share a prefix). With one FIFO, a request of 8 questions in both
option orders queues 16 calls and a small request behind it waits for all of them. Here each group
is charged the engine time its steps took, and a free engine goes to the waiting group charged the
least (fair queuing): a small request's few short steps pass between a large request's long ones,
so it waits for at most the step already running (a finished step's group gets `GRACE_SECONDS` to
ask for its next step before another group is chosen). A group that comes back is charged at least
what the least-charged waiting group has when it was idle for `AWAY_SECONDS`, so being away never
builds up credit. Steps are at most
`engine.PIECE` tokens, so no long prompt holds the engine in one piece.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager

REMEMBERED = 1024  # groups whose charge is kept (least recently served forgotten first)
# After a step, how long its group has to ask for its next one before the engine goes to another:
# a request's next call (its branches after its warm-up) comes a few event-loop turns later.
GRACE_SECONDS = 0.002
AWAY_SECONDS = 1.0  # a group idle this long comes back at the least charge of those waiting


class FairTurns:
    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._waiting: dict[Hashable, deque[tuple[int, asyncio.Future[None]]]] = {}
        self._charged: OrderedDict[Hashable, float] = OrderedDict()
        self._last_step: dict[Hashable, float] = {}
        self._arrivals = itertools.count()
        self._busy = False

    @asynccontextmanager
    async def turn(self, group: Hashable) -> AsyncIterator[None]:
        await self._acquire(group)
        started = self._clock()
        try:
            yield
        finally:
            self._charge(group, self._clock() - started)
            asyncio.get_running_loop().call_later(GRACE_SECONDS, self._release)

    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    async def _acquire(self, group: Hashable) -> None:
        floor = min((self._charged.get(g, 0.0) for g in self._waiting), default=None)
        away = time.monotonic() - self._last_step.get(group, -AWAY_SECONDS)
        if floor is not None and away >= AWAY_SECONDS and self._charged.get(group, 0.0) < floor:
            self._charged[group] = floor  # no credit for the time it was away
        if not self._busy and not self._waiting:
            self._busy = True
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(group, deque()).append((next(self._arrivals), granted))
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release()  # the turn was handed over just as the waiter went away: pass it on
            else:
                self._forget(group, granted)
            raise

    def _charge(self, group: Hashable, seconds: float) -> None:
        self._charged[group] = self._charged.get(group, 0.0) + seconds
        self._charged.move_to_end(group)
        self._last_step[group] = time.monotonic()
        while len(self._charged) > REMEMBERED:
            old, _ = self._charged.popitem(last=False)
            self._last_step.pop(old, None)

    def _release(self) -> None:
        while self._waiting:
            group = min(
                self._waiting,
                key=lambda g: (self._charged.get(g, 0.0), len(self._waiting[g]), self._waiting[g][0][0]),
            )
            queue = self._waiting[group]
            _, granted = queue.popleft()
            if not queue:
                del self._waiting[group]
            if not granted.done():
                granted.set_result(None)
                return
        self._busy = False

    def _forget(self, group: Hashable, granted: asyncio.Future[None]) -> None:
        queue = self._waiting.get(group)
        if queue is None:
            return
        for entry in list(queue):
            if entry[1] is granted:
                queue.remove(entry)
        if not queue:
            del self._waiting[group]
