"""The runner against the loopback stub: waiting, retries, headers, the result file, the CLI."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from openjev.client.retry import header_int, retry_after_seconds
from openjev.listen import free_port
from openjev.smoke import cli
from openjev.smoke.runner import (
    EXIT_FAILED,
    EXIT_NOT_READY,
    EXIT_OK,
    SmokeOptions,
    SmokeResult,
    run_smoke,
)
from tests.smoke.smoke_stub import STUB_MODEL, StubServer

SEMANTIC = {"obvious_yes", "obvious_no", "obvious_choice_first", "obvious_choice_last"}
Start = Callable[..., Awaitable[tuple[StubServer, str]]]


@pytest.fixture
async def stub() -> AsyncIterator[Start]:
    servers: list[StubServer] = []

    async def start(**knobs: object) -> tuple[StubServer, str]:
        server = StubServer(**knobs)  # type: ignore[arg-type]
        servers.append(server)
        return server, await server.start(free_port())

    yield start
    for server in servers:
        await server.stop()


def failed(result: SmokeResult) -> set[str]:
    return {c.name for c in result.checks if not c.ok}


def check(result: SmokeResult, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in result.checks if c.name == name)


async def test_a_correct_server_passes_and_the_file_says_so(stub: Start, tmp_path: Path) -> None:
    _, url = await stub()
    out = tmp_path / "deep" / "smoke-result.json"
    result = await run_smoke(SmokeOptions(url=url, out=out))
    assert result.ok, [(c.name, c.reason) for c in result.checks if not c.ok]
    assert result.exit_code == EXIT_OK
    saved = json.loads(out.read_text())
    assert saved["url"] == url
    assert saved["ok"] is True
    assert saved["server_model"] == STUB_MODEL
    assert saved["request_model"] == "jev-latest"
    assert saved["startup_wait_seconds"] < 5
    names = [c["name"] for c in saved["checks"]]
    assert names[:5] == ["startup", "models", "all_types", "choice_64", "choice_65_refused"]
    assert "catalog_model_accepted" in names
    assert set(names) >= SEMANTIC
    posts = [c for c in saved["checks"] if c["call"] and c["call"]["method"] == "POST"]
    for c in posts:
        if c["call"]["status"] == 200:
            assert c["call"]["prefix_tokens"] == 42
            assert c["call"]["cached_tokens"] is None  # header absent: null, never 0
            assert c["call"]["request_id"].startswith("req-")
        assert c["call"]["latency_seconds"] > 0
    assert saved["checks"][-1]["answers"]["q"]["type"] == "choice"  # semantic checks keep their answers


async def test_a_reported_zero_stays_zero(stub: Start) -> None:
    _, url = await stub(cached_tokens_header=True)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    call = check(result, "all_types").call
    assert call is not None
    assert call.cached_tokens == 0


async def test_a_swapped_label_mapping_fails(stub: Start) -> None:
    _, url = await stub(swap=True)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    assert result.exit_code == EXIT_FAILED
    bad = failed(result)
    assert bad <= SEMANTIC
    assert bad & {"obvious_yes", "obvious_no"}
    assert bad & {"obvious_choice_first", "obvious_choice_last"}


async def test_a_server_accepting_65_options_fails_that_check_only(stub: Start) -> None:
    _, url = await stub(max_options=100)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    assert failed(result) == {"choice_65_refused"}
    assert "got 200" in check(result, "choice_65_refused").reason


async def test_a_bad_shape_is_named(stub: Start) -> None:
    _, url = await stub(break_shape=True)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    assert "noul is not a probability" in check(result, "all_types").reason


async def test_waits_through_503_honouring_retry_after(stub: Start) -> None:
    server, url = await stub(waking_requests=2, retry_after="1")
    result = await run_smoke(SmokeOptions(url=url, out=None, poll_interval=0.05))
    assert result.ok
    assert 1.9 <= result.startup_wait_seconds < 6  # two 1 s hints, not the 0.05 s default
    assert "3 poll(s)" in check(result, "startup").reason
    assert server.seen[:3] == ["GET /health"] * 3


async def test_waits_through_the_edge_404s_of_a_route_not_live_yet(stub: Start) -> None:
    """Modal's edge answers 404 before a new deployment's route is live: that is waiting, not ready."""
    server, url = await stub(edge_not_found=3, waking_requests=1, retry_after="1")
    result = await run_smoke(SmokeOptions(url=url, out=None, poll_interval=0.05))
    assert result.ok, [(c.name, c.reason) for c in result.checks if not c.ok]
    assert "5 poll(s)" in check(result, "startup").reason  # 3 edge 404s, one 503, then 200
    assert server.seen[:5] == ["GET /health"] * 5


async def test_a_404_for_the_whole_budget_is_not_ready(stub: Start) -> None:
    _, url = await stub(edge_not_found=10_000)
    result = await run_smoke(SmokeOptions(url=url, out=None, startup_timeout=1.0, poll_interval=0.05))
    assert result.exit_code == EXIT_NOT_READY
    assert [c.name for c in result.checks] == ["startup"]
    assert "GET /health answered 404" in result.checks[0].reason


async def test_the_servers_own_refusal_of_health_means_it_is_up(stub: Start) -> None:
    """A 4xx with the server's own error body is an answer: the checks then run and say what is wrong."""
    _, url = await stub(health_refusal=401)
    result = await run_smoke(SmokeOptions(url=url, out=None, startup_timeout=5.0))
    startup = check(result, "startup")
    assert startup.ok
    assert "1 poll(s) (GET /health answered 401)" in startup.reason


async def test_retry_after_as_an_http_date(stub: Start) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=2), usegmt=True)
    _, url = await stub(waking_requests=1, retry_after=when)
    result = await run_smoke(SmokeOptions(url=url, out=None, poll_interval=0.05))
    assert result.ok
    assert result.startup_wait_seconds >= 0.9


async def test_a_busy_answer_to_a_check_is_retried(stub: Start) -> None:
    _, url = await stub(busy_posts=1, retry_after="1")
    result = await run_smoke(SmokeOptions(url=url, out=None))
    first = check(result, "all_types")
    assert first.ok
    assert first.call is not None
    assert first.call.attempts == 2


async def test_waits_through_refused_connections() -> None:
    port = free_port()
    server = StubServer()
    task = asyncio.create_task(run_smoke(SmokeOptions(url=f"http://127.0.0.1:{port}", out=None)))
    await asyncio.sleep(1.5)
    try:
        await server.start(port)
        result = await asyncio.wait_for(task, 30)
    finally:
        await server.stop()
    assert result.ok
    assert result.startup_wait_seconds >= 1.4


async def test_a_server_that_never_wakes_exits_2_and_still_writes(stub: Start, tmp_path: Path) -> None:
    _, url = await stub(waking_requests=10_000, retry_after="1")
    out = tmp_path / "r.json"
    began = time.monotonic()
    result = await run_smoke(SmokeOptions(url=url, out=out, startup_timeout=2.5))
    assert time.monotonic() - began < 5
    assert result.exit_code == EXIT_NOT_READY
    assert [c.name for c in result.checks] == ["startup"]
    assert "GET /health answered 503" in result.checks[0].reason
    assert json.loads(out.read_text())["ok"] is False


async def test_the_bearer_key_is_sent(stub: Start) -> None:
    _, url = await stub(key="s3cret")
    without = await run_smoke(SmokeOptions(url=url, out=None))
    assert "401" in check(without, "all_types").reason
    assert not without.ok
    assert (await run_smoke(SmokeOptions(url=url, out=None, key="s3cret"))).ok


def test_header_and_retry_after_parsing() -> None:
    assert header_int({"x": "12"}, "x") == 12
    assert header_int({"x": "0"}, "x") == 0
    assert header_int({}, "x") is None
    assert header_int({"x": "-1"}, "x") is None
    assert header_int({"x": "1.5"}, "x") is None
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert retry_after_seconds(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


async def test_cli_registers_and_runs(
    stub: Start, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENJEV_API_KEY", raising=False)
    _, url = await stub()
    parser = argparse.ArgumentParser(prog="openjev")
    cli.register(parser.add_subparsers(dest="command"))
    out = tmp_path / "result.json"
    args = parser.parse_args(["smoke", url, "--out", str(out), "--startup-timeout", "20", "--model", "jev-latest"])
    assert args.startup_timeout == 20.0
    code = await asyncio.to_thread(args.run, args)
    assert code == 0
    printed = capsys.readouterr().out
    assert "PASS  obvious_no" in printed
    assert "all checks passed" in printed
    assert json.loads(out.read_text())["ok"] is True
    with pytest.raises(SystemExit):
        parser.parse_args(["smoke", url, "--startup-timeout", "0"])


DECISIONS = {
    "decisions_all_types",
    "decisions_choice_64",
    "decisions_choice_65_refused",
    "decisions_unknown_model",
    "decisions_obvious_yes",
    "decisions_obvious_no",
}


async def test_both_routes_are_checked_and_a_server_without_decisions_fails_those_checks_only(stub: Start) -> None:
    _, url = await stub()
    names = {c.name for c in (await run_smoke(SmokeOptions(url=url, out=None))).checks}
    assert names >= DECISIONS | SEMANTIC
    _, url = await stub(decisions=False)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    assert failed(result) == DECISIONS
    assert "404" in check(result, "decisions_all_types").reason


async def test_a_swapped_mapping_on_the_decisions_route_fails_its_semantic_pair(stub: Start) -> None:
    _, url = await stub(decisions_swap=True)
    result = await run_smoke(SmokeOptions(url=url, out=None))
    assert failed(result) == {"decisions_obvious_yes", "decisions_obvious_no"}
