"""The fake backend, documented for demos, keeps bounded memory and its heavy work off the event loop."""

from __future__ import annotations

import threading

import pytest

from openjev.adapters.fake.backend import MAX_REMEMBERED_BYTES, OFF_LOOP_TOKENS, FakeBackend
from openjev.adapters.fake.build import build_runtime
from openjev.domain.ports import CallUsage
from openjev.settings import load_settings

pytestmark = pytest.mark.anyio


async def test_a_server_fake_keeps_no_call_log_and_bounded_prompts() -> None:
    backend = build_runtime(load_settings({"OPENJEV_BACKEND": "fake"})).backend
    assert isinstance(backend, FakeBackend)
    await backend.start()
    big = list(range(1_000_000))  # 4 MB packed
    for i in range(12):
        await backend.score(f"c{i}", [i, *big], [1, 2])
    assert backend.calls == [] and backend.call_count == 12
    assert backend.remembered_bytes <= MAX_REMEMBERED_BYTES


async def test_long_prompts_are_compared_off_the_event_loop() -> None:
    threads: list[threading.Thread] = []

    class Watched(FakeBackend):
        def _usage(self, token_ids: list[int]) -> CallUsage:  # type: ignore[override]
            threads.append(threading.current_thread())
            return super()._usage(token_ids)

    backend = Watched()
    await backend.start()
    await backend.warm("short", [1, 2, 3])
    await backend.warm("long", list(range(OFF_LOOP_TOKENS + 1)))
    assert threads[0] is threading.main_thread() and threads[1] is not threading.main_thread()


async def test_cached_tokens_are_still_reported_and_failures_still_injected() -> None:
    backend = FakeBackend(fail_after=2, record_calls=False)
    await backend.start()
    await backend.warm("a", list(range(100)))
    usage = await backend.warm("b", list(range(100)))
    assert usage.cached_tokens == 99
    with pytest.raises(Exception, match="injected"):
        await backend.warm("c", [1])
