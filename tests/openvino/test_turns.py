"""Fair turns: one holder at a time, waiting groups served in rotation, a cancelled waiter forgotten."""

from __future__ import annotations

import asyncio

from openjev.adapters.openvino.turns import FairTurns


class Clock:
    """Engine time that advances only when a step says it worked."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_group_that_used_the_engine_least_goes_next() -> None:
    clock = Clock()
    turns = FairTurns(clock)
    order: list[str] = []
    release = asyncio.Event()

    async def step(group: str, name: str, cost: float, hold: bool = False) -> None:
        async with turns.turn(group):
            order.append(name)
            if hold:
                await release.wait()
            clock.now += cost

    first = asyncio.create_task(step("big", "big-0", 5.0, hold=True))
    await asyncio.sleep(0)
    queued = [asyncio.create_task(step("big", f"big-{i}", 5.0)) for i in range(1, 4)]
    await asyncio.sleep(0)

    async def small_request() -> None:
        for i in range(3):  # one step after another, as a request's calls come
            await step("small", f"small-{i}", 1.0)

    small = asyncio.create_task(small_request())
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, small, *queued)
    # The small request waits for the step that was running, then passes every later big step.
    assert order[:4] == ["big-0", "small-0", "small-1", "small-2"]
    assert order[4:] == ["big-1", "big-2", "big-3"]


async def test_a_waiter_that_goes_away_does_not_stall_the_others() -> None:
    turns = FairTurns()
    release = asyncio.Event()
    ran: list[str] = []

    async def holder() -> None:
        async with turns.turn("a"):
            await release.wait()

    async def waiter(group: str) -> None:
        async with turns.turn(group):
            ran.append(group)

    held = asyncio.create_task(holder())
    await asyncio.sleep(0)
    leaving, staying = asyncio.create_task(waiter("b")), asyncio.create_task(waiter("c"))
    await asyncio.sleep(0)
    leaving.cancel()
    release.set()
    await asyncio.gather(held, staying)
    assert ran == ["c"] and turns.waiting() == 0
    async with asyncio.timeout(1):
        await waiter("d")  # free again
