"""The context length behind SGLang's real router (sglang-router 0.3.2), with no setting: its workers say.

The router's /v1/models has no max_model_len and it has no /server_info, so start-up asks the router
for its workers (`GET /workers`) and each worker for its limit, and takes the smallest.
OPENJEV_CONTEXT_LENGTH overrides it (no worker is asked). What the router and its workers are
when that fails, start-up says, with the URL and the setting to use instead.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
from aiohttp import web

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.control import ControlClient
from openjev.adapters.sglang.peer import ListedWorker, listed_workers
from openjev.domain.errors import BackendUnavailable, StartupError
from openjev.listen import free_port
from tests.sglang.launching import http, wait_until
from tests.sglang.router import Router, readiness, router_process, start_router
from tests.sglang_emulation.generate_input import max_req_input_len
from tests.sglang_emulator import EmulatorConfig, EmulatorThread

LONG, SHORT = EmulatorConfig(context_length=8192), EmulatorConfig(context_length=4096)
INFO_ROUTES = ("/server_info", "/get_server_info", "/v1/models", "/model_info")


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[EmulatorThread, EmulatorThread]]:
    with EmulatorThread(LONG) as long, EmulatorThread(SHORT) as short:
        yield long, short


@pytest.fixture(scope="module")
def router(
    workers: tuple[EmulatorThread, EmulatorThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Router]:
    with router_process([w.url for w in workers], tmp_path_factory.mktemp("router") / "router.log") as running:
        yield running


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


@asynccontextmanager
async def control(url: str) -> AsyncIterator[ControlClient]:
    client = ControlClient(url, api_key=None, connections=4)
    client.open()
    try:
        yield client
    finally:
        await client.close()


def test_the_routers_worker_list_is_what_the_adapter_reads(
    router: Router, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    reply = get(router.url + "/workers")
    assert {"workers", "total"} <= set(reply) and reply["total"] == 2, reply
    assert all({"url", "is_healthy", "model_id"} <= set(entry) for entry in reply["workers"]), reply
    assert sorted(listed_workers(reply) or [], key=lambda w: w.url) == sorted(
        (ListedWorker(w.url, True) for w in workers), key=lambda w: w.url
    )
    assert listed_workers({"data": []}) is None  # a worker's 404 or another gateway's reply: not a list


async def test_without_the_setting_the_smaller_of_the_workers_context_lengths_is_used(router: Router) -> None:
    client = SGLangBackend(router.url, startup_timeout=10)
    try:
        with structlog.testing.capture_logs() as logs:
            await client.start()
        assert client.peer == "router"
        assert client.context_tokens() == max_req_input_len(SHORT)  # what the worker admits, as a worker's
        [said] = [e for e in logs if e["event"] == "sglang_router_context"]
        assert sorted(said["workers"].values()) == [max_req_input_len(SHORT), max_req_input_len(LONG)]
    finally:
        await client.close()


async def test_the_setting_overrides_and_no_worker_is_asked(
    router: Router, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    for worker in workers:
        worker.emulator.reset()
    client = SGLangBackend(router.url, context_length=6000, startup_timeout=10)
    try:
        await client.start()
        assert client.context_tokens() == 6000  # larger than one worker's: the setting is the operator's word
        asked = [r.path for w in workers for r in w.emulator.requests if r.path in INFO_ROUTES]
        assert asked == []
    finally:
        await client.close()


async def test_a_worker_that_refuses_is_named_with_the_setting_to_use_instead(
    router: Router, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    """The router's health checks pass (/health needs no key) while the worker's info routes want one."""
    long, _ = workers
    long.emulator.config.api_key = "worker-key"
    try:
        async with control(router.url) as client:
            with pytest.raises(StartupError) as refused:
                await client.router_context()
    finally:
        long.emulator.config.api_key = None
    message = refused.value.message
    assert f"cannot read the context length of worker {long.url}" in message, message
    assert "refused GET /server_info with 401" in message and "set OPENJEV_CONTEXT_LENGTH" in message


async def test_a_worker_that_cannot_be_reached_is_named_with_the_setting_to_use_instead() -> None:
    """A router that lists a worker openjev cannot reach (here: nothing listens at its port)."""
    gone = f"http://127.0.0.1:{free_port()}"

    async def workers(_: web.Request) -> web.Response:
        return web.json_response({"workers": [{"url": gone, "is_healthy": True}], "total": 1})

    app = web.Application()
    app.router.add_get("/workers", workers)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    try:
        async with control(f"http://127.0.0.1:{port}") as client:
            with pytest.raises(StartupError) as failed:
                await client.router_context()
    finally:
        await runner.cleanup()
    message = failed.value.message
    assert f"cannot read the context length of worker {gone}" in message, message
    assert "did not answer GET /server_info" in message
    assert "Let openjev reach the worker, or set OPENJEV_CONTEXT_LENGTH" in message


async def test_an_unhealthy_worker_is_left_out(tmp_path: Path) -> None:
    with (
        EmulatorThread(LONG) as long,
        EmulatorThread(SHORT) as short,
        router_process([long.url, short.url], tmp_path / "router.log") as router,
    ):
        short.emulator.crashed = "stopped by the test"  # nothing answers there any more
        wait_until(lambda: (readiness(router.url) or {}).get("healthy_workers") == 1, 30, "the router to notice")
        async with control(router.url) as client:
            with structlog.testing.capture_logs() as logs:
                assert await client.router_context() == max_req_input_len(LONG)
    [skipped] = [e for e in logs if e["event"] == "sglang_router_workers_skipped"]
    assert skipped["workers"] == [short.url]


async def test_a_router_with_no_workers_is_waited_for_then_named(tmp_path: Path) -> None:
    router = start_router([], tmp_path / "router.log", wait=False)
    try:
        wait_until(lambda: http("GET", router.url + "/workers")[0] == 200, 30, "the router to answer")
        async with control(router.url) as client:
            with pytest.raises(StartupError, match="lists no workers, so openjev cannot ask them their context"):
                await client.router_context()
        client_ = SGLangBackend(router.url, startup_timeout=1)
        try:
            with pytest.raises(BackendUnavailable, match="No routers with healthy workers available"):
                await client_.start()  # as for a loading SGLang: it waits for a worker, up to the budget
        finally:
            await client_.close()
    finally:
        router.stop()
