"""A backend that sends a huge, endless, stalled or misframed reply: the call fails as a backend error
(502, never 503), its connection is closed, memory stays bounded, and nothing escapes the protocol."""

from __future__ import annotations

import asyncio
import tracemalloc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.control import CONTROL_REPLY_BYTES, ControlClient
from openjev.domain.errors import BackendError, BackendUnavailable
from tests.sglang.hostile_backend import MODES, hostile_backend

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
LABELS = [32, 33, 34]
CAP = 1024 * 1024
GIVE_UP = 10.0  # seconds: without a cap, an endless reply would still be arriving (and growing) then


@contextmanager
def peak_memory() -> Iterator[list[int]]:
    """The peak of Python allocations within the block, in bytes (one-element list, filled at the end)."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
        peak[0] = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@contextmanager
def loop_errors() -> Iterator[list[dict[str, Any]]]:
    """What reaches the event loop's exception handler (a failed protocol callback does)."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: seen.append(context))
    try:
        yield seen
    finally:
        loop.set_exception_handler(previous)


@pytest.mark.parametrize("mode", MODES)
async def test_a_hostile_generate_reply_is_a_bounded_backend_error(mode: str) -> None:
    with loop_errors() as errors:
        async with hostile_backend(mode) as (url, hostile):
            client = SGLangBackend(url, startup_timeout=5, reply_cap=CAP, read_timeout=0.5)
            try:
                await client.start()  # its label check meets the hostile /generate: a warning, and on
                with peak_memory() as peak, pytest.raises(BackendError) as raised:
                    async with asyncio.timeout(GIVE_UP):
                        await client.score(uuid.uuid4().hex, PROMPT, LABELS)
            finally:
                await client.close()
    assert not isinstance(raised.value, BackendUnavailable)  # 502: the backend answered, wrongly
    assert peak[0] < 4 * CAP, peak[0]
    assert hostile.sent.get("/generate", 0) < 16 * CAP  # the connection was closed, not drained
    assert errors == []


CONTROL_CASES = [
    ("/health", "endless-chunked"),
    ("/health", "huge-length"),
    ("/server_info", "unframed"),
    ("/abort_request", "endless-chunked"),
]


@pytest.mark.parametrize(("route", "mode"), CONTROL_CASES)
async def test_the_control_routes_cap_what_they_read(route: str, mode: str) -> None:
    async with hostile_backend(mode, route) as (url, hostile):
        control = ControlClient(url, api_key=None, connections=2)
        control.open()
        try:
            with peak_memory() as peak:
                async with asyncio.timeout(GIVE_UP):
                    if route == "/health":
                        problem = await control.probe_health(5.0)
                        assert problem is not None and "sent too much" in problem
                    elif route == "/server_info":
                        with pytest.raises(BackendError, match="too much"):
                            await control.read_info(expected_model=None, configured_context=None)
                    else:
                        await control.abort(["rid"])  # best effort: never raises
        finally:
            await control.close()
    assert peak[0] < 4 * CONTROL_REPLY_BYTES, peak[0]
    assert hostile.sent.get(route, 0) < 16 * CONTROL_REPLY_BYTES
