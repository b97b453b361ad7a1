from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from openjev.http.app import create_app
from openjev.settings import load_settings

Client = AsyncTestClient[Litestar]
LOCAL = "http://127.0.0.1"  # the app listens on loopback by default: it answers loopback Host headers only


@asynccontextmanager
async def running(
    env: dict[str, str] | None = None, *, wait_ready: bool = True, **settings: Any
) -> AsyncIterator[Client]:
    app = create_app(load_settings({"OPENJEV_BACKEND": "fake", **(env or {})}, **settings))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        if wait_ready:
            for _ in range(200):
                if (await client.get("/health")).status_code == 200:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the app never became ready")
        yield client


@pytest.fixture
def server() -> Callable[..., AbstractAsyncContextManager[Client]]:
    return running


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with running() as c:
        yield c
