"""What the app does for the server process's CPU: a cheap key check (no thread hop, no handler copy), a frozen heap."""

from __future__ import annotations

import asyncio
import gc
import inspect
from collections.abc import Iterator
from typing import Any

import litestar.utils.sync
import pytest
from litestar.testing import AsyncTestClient

from openjev.http import app as app_module
from openjev.http.app import app_factory, create_app
from openjev.http.routes import bearer_check
from openjev.settings import load_settings
from tests.api.conftest import LOCAL


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """`gc.freeze` is process-wide: start and end every test here with nothing frozen."""
    gc.unfreeze()
    yield
    gc.unfreeze()


async def test_the_key_check_is_a_coroutine_middleware_and_never_uses_the_thread_pool(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_threads(*_: Any, **__: Any) -> Any:
        raise AssertionError("a guard ran in Litestar's thread pool")

    monkeypatch.setattr(litestar.utils.sync, "sync_to_thread", no_threads)
    [middleware] = bearer_check("s3cret")
    assert inspect.iscoroutinefunction(middleware(lambda *_: None))  # type: ignore[arg-type]
    assert bearer_check(None) == []  # no key: nothing runs at all
    async with server(api_key="s3cret") as client:
        right = await client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        wrong = await client.get("/v1/models", headers={"Authorization": "Bearer nope"})
        missing = await client.get("/v1/models")
    assert right.status_code == 200
    assert wrong.status_code == missing.status_code == 401
    assert wrong.json()["detail"]["error_type"] == "authentication_error"


async def _ready_freeze_count(freeze_heap: bool) -> int:
    app = create_app(load_settings({"OPENJEV_BACKEND": "fake"}), freeze_heap=freeze_heap)
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if (await client.get("/health")).status_code == 200:
                return gc.get_freeze_count()
            await asyncio.sleep(0.01)
    raise AssertionError("the app never became ready")


@pytest.mark.usefixtures("unfrozen")
async def test_the_start_up_heap_is_frozen_once_ready_only_when_asked() -> None:
    assert await _ready_freeze_count(freeze_heap=False) == 0
    assert await _ready_freeze_count(freeze_heap=True) > 0


def test_the_server_process_asks_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    app = create_app(load_settings({"OPENJEV_BACKEND": "fake"}))

    def fake_create_app(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return app

    monkeypatch.setattr(app_module, "create_app", fake_create_app)
    assert app_factory() is app
    assert seen == {"exit_on_failure": True, "freeze_heap": True}
