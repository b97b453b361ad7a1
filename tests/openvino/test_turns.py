"""Fair turns: one holder at a time, waiting groups served in rotation, a cancelled waiter forgotten."""

from __future__ import annotations

import asyncio

from openjev.adapters.openvino.turns import FairTurns


async def test_waiting_groups_take_turns_instead_of_first_come_first_served() -> None:
    turns = FairTurns()
    order: list[str] = []
    release = asyncio.Event()

    async def step(group: str, name: str, hold: bool = False) -> None:
        async with turns.turn(group):
            order.append(name)
            if hold:
                await release.wait()

    first = asyncio.create_task(step("big", "big-0", hold=True))
    await asyncio.sleep(0)
    queued = [asyncio.create_task(step("big", f"big-{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    queued.append(asyncio.create_task(step("small", "small-0")))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *queued)
    assert order == ["big-0", "big-1", "small-0", "big-2", "big-3"]


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
