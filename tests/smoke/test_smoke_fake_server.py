"""`openjev smoke` against real `openjev serve --backend fake` processes.

The fake's answers are hashes of the prompt: they mean nothing, so its semantic checks pass or fail
by chance (deterministically). What must hold is the structure, the headers, the 65-option limit,
and that a server and its label-swapped twin give exactly mirrored answers — so they can never
both pass (the oracle stub in test_smoke_runner shows a correct server passing and its twin failing).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from openjev.listen import free_port
from openjev.smoke.runner import EXIT_FAILED, EXIT_OK, SmokeOptions, SmokeResult, run_smoke
from tests.smoke.servers import OPENJEV, clean_env, openjev_server

SEMANTIC = ("obvious_yes", "obvious_no", "obvious_choice_first", "obvious_choice_last")
STRUCTURAL = ("startup", "models", "all_types", "choice_64", "choice_65_refused", "catalog_model_accepted")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    """Three fake servers, started together: plain, labels swapped, 100 options allowed."""
    with ExitStack() as stack:
        yield {
            "plain": stack.enter_context(openjev_server("--backend", "fake")),
            "swapped": stack.enter_context(
                openjev_server("--backend", "fake", env={"OPENJEV_FAKE_SWAP_LABELS": "true"})
            ),
            "wide": stack.enter_context(openjev_server("--backend", "fake", env={"OPENJEV_MAX_OPTIONS": "100"})),
        }


async def smoke(url: str, out: Path | None = None) -> SmokeResult:
    return await run_smoke(SmokeOptions(url=url, out=out, startup_timeout=60, poll_interval=0.2))


def by_name(result: SmokeResult) -> dict[str, Any]:
    return {c.name: c for c in result.checks}


async def test_the_fake_server_passes_every_structural_check(servers: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "smoke-result.json"
    result = await smoke(servers["plain"], out)
    checks = by_name(result)
    assert [name for name in STRUCTURAL if not checks[name].ok] == []
    for name in SEMANTIC:  # judged on well-formed answers, whatever the verdict
        assert re.match(r"p\(yes\)=|'.+' (wins|won)", checks[name].reason), checks[name].reason
    assert result.server_model == "openjev/fake"
    assert result.exit_code == (EXIT_OK if all(checks[n].ok for n in SEMANTIC) else EXIT_FAILED)
    saved = json.loads(out.read_text())
    call = next(c for c in saved["checks"] if c["name"] == "all_types")["call"]
    assert isinstance(call["prefix_tokens"], int)
    assert call["prefix_tokens"] > 0
    assert isinstance(call["cached_tokens"], int)  # the fake reports cache hits
    assert re.fullmatch(r"[0-9a-f]{32}", call["request_id"])
    assert call["latency_seconds"] > 0
    models_call = next(c for c in saved["checks"] if c["name"] == "models")["call"]
    assert models_call["cached_tokens"] is None  # no header on that route: null, not 0


async def test_a_label_swapped_twin_answers_in_mirror(servers: dict[str, str]) -> None:
    plain, swapped = await asyncio.gather(smoke(servers["plain"]), smoke(servers["swapped"]))
    a, b = by_name(plain), by_name(swapped)
    assert [name for name in STRUCTURAL if not b[name].ok] == []
    for name in SEMANTIC:
        x, y = a[name].answers["q"], b[name].answers["q"]
        if x["type"] == "noul":
            assert y["noul"] == pytest.approx(1 - x["noul"], abs=1e-9)
        else:
            assert list(y["probabilities"].values()) == pytest.approx(list(x["probabilities"].values())[::-1])
        assert not (a[name].ok and b[name].ok)  # a pair member and its mirror never both pass
        if x["type"] == "noul":
            assert a[name].ok != b[name].ok
    assert not (plain.ok and swapped.ok)
    assert not swapped.ok  # the brief's check: smoke fails against the swapped fake


async def test_a_server_that_accepts_65_options_fails(servers: dict[str, str]) -> None:
    checks = by_name(await smoke(servers["wide"]))
    assert not checks["choice_65_refused"].ok
    assert "expected 422 for 65 options, got 200" in checks["choice_65_refused"].reason
    assert checks["choice_64"].ok


@pytest.fixture
async def waking_proxy(servers: dict[str, str]) -> AsyncIterator[tuple[str, list[int]]]:
    """A proxy in front of the plain fake that answers 503 + Retry-After: 1 to its first 3 requests."""
    upstream = servers["plain"]
    statuses: list[int] = []
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.Response:
        if len(statuses) < 3:
            statuses.append(503)
            body = {"detail": {"error_type": "not_ready", "message": "waking up"}}
            return web.json_response(body, status=503, headers={"Retry-After": "1"})
        async with session.request(
            request.method, upstream + request.path_qs, data=await request.read(), headers=request.headers
        ) as answer:
            statuses.append(answer.status)
            headers = {k: v for k, v in answer.headers.items() if k.lower().startswith("x-")}
            return web.Response(
                body=await answer.read(),
                status=answer.status,
                headers=headers,
                content_type="application/json",
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield f"http://127.0.0.1:{port}", statuses
    await runner.cleanup()
    await session.close()


async def test_waits_through_a_waking_proxy(waking_proxy: tuple[str, list[int]]) -> None:
    url, statuses = waking_proxy
    result = await smoke(url)
    checks = by_name(result)
    assert [name for name in STRUCTURAL if not checks[name].ok] == []
    assert statuses[:4] == [503, 503, 503, 200]
    assert result.startup_wait_seconds >= 2.9  # three Retry-After: 1, not the 0.2 s poll interval
    assert checks["all_types"].call.prefix_tokens > 0  # headers survive the proxy


def test_the_cli_waits_for_a_booting_server(tmp_path: Path) -> None:
    """`openjev smoke` started before `openjev serve` listens: refused connections first, then the checks."""
    out = tmp_path / "result.json"
    port = free_port()
    smoking = subprocess.Popen(
        [str(OPENJEV), "smoke", f"http://127.0.0.1:{port}", "--out", str(out), "--startup-timeout", "60"],
        env=clean_env({}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with socket.create_server(("127.0.0.1", port)) as early:  # the smoke's first try: dropped
            early.settimeout(60)
            early.accept()[0].close()
        with openjev_server("--backend", "fake", port=port):  # refused until it listens
            stdout, _ = smoking.communicate(timeout=90)
    finally:
        if smoking.poll() is None:
            smoking.kill()
    done = subprocess.CompletedProcess(smoking.args, smoking.returncode, stdout, "")
    saved = json.loads(out.read_text())
    names = {c["name"]: c for c in saved["checks"]}
    assert all(names[n]["ok"] for n in STRUCTURAL), done.stdout
    assert saved["startup_wait_seconds"] > 0.2
    assert "start-up wait" in done.stdout
    assert done.returncode == (0 if saved["ok"] else 1)
