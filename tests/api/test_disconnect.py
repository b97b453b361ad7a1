"""A client that goes away cancels its evaluation (ClientGone, 499); nothing else is cancelled by it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar.types import ReceiveMessage

from openjev.http.errors import ClientGone
from openjev.http.orchestration import _unless_disconnected


class Client:
    """An ASGI `receive` that blocks until `leave()`, then says the client disconnected."""

    def __init__(self) -> None:
        self._gone = asyncio.Event()

    def leave(self) -> None:
        self._gone.set()

    async def receive(self) -> ReceiveMessage:
        await self._gone.wait()
        return {"type": "http.disconnect"}


async def work(ended: asyncio.Event, result: Any = "answer", seconds: float = 30.0) -> Any:
    try:
        await asyncio.sleep(seconds)
        return result
    finally:
        ended.set()


async def test_an_evaluation_that_ends_first_is_the_answer_and_the_watcher_stops() -> None:
    client, ended = Client(), asyncio.Event()
    answer: Any = await _unless_disconnected(client.receive, work(ended, seconds=0))
    assert answer == "answer"
    await asyncio.sleep(0)
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


async def test_a_client_that_leaves_cancels_the_evaluation_with_client_gone() -> None:
    client, ended = Client(), asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, client.leave)
    with pytest.raises(ClientGone):
        await _unless_disconnected(client.receive, work(ended))
    assert ended.is_set()  # the evaluation's own clean-up (its aborts) ran before the answer
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    await asyncio.sleep(0.01)  # and this task is not cancelled afterwards


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    client, ended = Client(), asyncio.Event()
    task = asyncio.ensure_future(_unless_disconnected(client.receive, work(ended)))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended.is_set()


async def test_a_disconnect_just_after_the_answer_cancels_nothing() -> None:
    client, ended = Client(), asyncio.Event()

    async def answer_then_leave() -> Any:
        client.leave()  # the watcher ends in the same loop turn as the evaluation
        await asyncio.sleep(0)
        return "answer"

    answer: Any = await _unless_disconnected(client.receive, answer_then_leave())
    assert answer == "answer"
    await asyncio.sleep(0.01)  # the watcher's callback must not cancel what this task does next
    assert not ended.is_set()
