"""End to end: `openjev serve --connect URL` against the SGLang emulator, with the real Qwen3 tokenizer.

Marked `integration`: the tokenizer is a fetched test asset (scripts/fetch-test-assets).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from openjev.http.openapi_docs import EXAMPLE_REQUEST
from openjev.listen import free_port
from tests.assets import qwen3_tokenizer_dir
from tests.sglang.launching import OPENJEV, clean_env, health_status, http, wait_until
from tests.sglang_emulator import EmulatorConfig, EmulatorThread, logprob_of

pytestmark = [pytest.mark.integration, pytest.mark.needs_test_assets]

REQUEST_TIMEOUT = 5.0
# The spec example with a third option (null description) and a fourth level.
REQUEST: dict[str, Any] = {
    **EXAMPLE_REQUEST,
    "questions": {
        **EXAMPLE_REQUEST["questions"],
        "department": {
            **EXAMPLE_REQUEST["questions"]["department"],
            "criteria": {"billing": "Payments and refunds", "technical": "Software bugs", "sales": None},
        },
        "urgency": {
            **EXAMPLE_REQUEST["questions"]["urgency"],
            "criteria": ["Routine", "Soon", "Urgent", "Emergency"],
        },
    },
}
OPTIONS = {"refund": 2, "department": 3, "urgency": 4}


@contextlib.contextmanager
def openjev_connected(url: str, log: Path) -> Iterator[str]:
    port = free_port()
    env = clean_env({"OPENJEV_TOKENIZER": str(qwen3_tokenizer_dir()), "OPENJEV_REQUEST_TIMEOUT": str(REQUEST_TIMEOUT)})
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(OPENJEV), "serve", "--connect", url, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    api = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: health_status(api) == 200 or process.poll() is not None, 60, "openjev to be ready")
        assert process.poll() is None, log.read_text()
        yield api
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorThread]:
    with EmulatorThread(EmulatorConfig()) as thread:
        yield thread


@pytest.fixture(scope="module")
def api(emu: EmulatorThread, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with openjev_connected(emu.url, tmp_path_factory.mktemp("e2e") / "serve.log") as url:
        yield url


@pytest.fixture
def fresh(emu: EmulatorThread) -> Iterator[EmulatorThread]:
    """The shared emulator with its records and cache cleared, and its default behaviour back after."""
    emu.emulator.reset()
    yield emu
    emu.emulator.config = EmulatorConfig()


def softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def test_a_warm_up_then_one_batch_on_token_ids_with_exact_labels_and_usage(api: str, fresh: EmulatorThread) -> None:
    status, headers, body = http("POST", api + "/v1/systemone", REQUEST)
    assert status == 200, body
    emulator = fresh.emulator
    requests = emulator.generate_bodies()
    assert len(requests) == 2  # the warm-up, then every branch in one batched /generate
    batch = requests[1]
    assert len(batch["input_ids"]) == len(batch["rid"]) == len(batch["token_ids_logprob"]) == len(OPTIONS)
    assert (batch["return_logprob"], batch["logprob_start_len"]) == (True, -1)
    calls = emulator.generate_items()
    assert len(calls) == len(OPTIONS) + 1
    warm, branches = calls[0], calls[1:]
    assert "token_ids_logprob" not in warm  # the warm-up comes first and asks for no label
    assert all("text" not in c and all(isinstance(t, int) for t in c["input_ids"]) for c in calls)
    prefix = warm["input_ids"]
    assert all(b["input_ids"][: len(prefix)] == prefix for b in branches)
    assert sorted(len(b["token_ids_logprob"]) for b in branches) == sorted(OPTIONS.values())
    for branch in branches:
        assert branch["sampling_params"] == {"max_new_tokens": 1, "temperature": 0}
        assert len(set(branch["token_ids_logprob"])) == len(branch["token_ids_logprob"])
    # The answers are the softmax of exactly what the backend returned for those ids.
    by_size = {len(b["token_ids_logprob"]): b for b in branches}
    choice = by_size[3]
    expected = softmax([logprob_of(choice["input_ids"], t) for t in choice["token_ids_logprob"]])
    got = body["answers"]["department"]["probabilities"]
    assert list(got) == ["billing", "technical", "sales"]
    assert list(got.values()) == pytest.approx(expected, abs=1e-9)
    # Usage and headers come from what SGLang reported.
    assert body["usage"] == {"input_tokens": sum(len(c["input_ids"]) for c in calls), "output_tokens": 4}
    assert int(headers["x-openjev-prefix-tokens"]) == len(prefix)
    branch_cached = sum(emulator.replies[b["rid"]]["cached_tokens"] for b in branches)
    assert branch_cached >= len(prefix) * len(branches)
    assert int(headers["x-openjev-cached-tokens"]) == branch_cached


def test_cached_tokens_header_is_absent_when_the_backend_does_not_report_them(api: str, fresh: EmulatorThread) -> None:
    fresh.emulator.config.cached_tokens = False
    status, headers, body = http("POST", api + "/v1/systemone", REQUEST)
    assert status == 200, body
    assert "x-openjev-cached-tokens" not in headers
    assert "x-openjev-prefix-tokens" in headers
    assert body["usage"]["input_tokens"] == sum(len(c["input_ids"]) for c in fresh.emulator.generate_items())


def test_a_slow_backend_times_out_with_504_and_every_branch_is_aborted(api: str, fresh: EmulatorThread) -> None:
    fresh.emulator.config.slow = 60.0
    fresh.emulator.config.slow_scoring_only = True
    status, _, body = http("POST", api + "/v1/systemone", REQUEST, timeout=30)
    assert status == 504, body
    assert body["detail"]["error_type"] == "timeout"
    branch_rids = {b["rid"] for b in fresh.emulator.generate_items() if "token_ids_logprob" in b}
    assert len(branch_rids) == len(OPTIONS)
    fresh.run(fresh.emulator.wait_idle(), timeout=10)  # the aborts ended them long before 60 s
    assert branch_rids <= set(fresh.emulator.aborted)


def test_a_client_that_disconnects_cancels_and_aborts_its_branches(api: str, fresh: EmulatorThread) -> None:
    fresh.emulator.config.slow = 60.0
    fresh.emulator.config.slow_scoring_only = True

    async def disconnect_midway() -> None:
        async with aiohttp.ClientSession() as session:
            request = asyncio.ensure_future(session.post(api + "/v1/systemone", json=REQUEST))
            await asyncio.wrap_future(fresh.submit(fresh.emulator.wait_in_flight(len(OPTIONS))))
            request.cancel()  # closes the connection: the client is gone
            with contextlib.suppress(asyncio.CancelledError):
                await request

    asyncio.run(disconnect_midway())
    fresh.run(fresh.emulator.wait_idle(), timeout=REQUEST_TIMEOUT / 2)  # well before the request deadline
    branch_rids = {b["rid"] for b in fresh.emulator.generate_items() if "token_ids_logprob" in b}
    assert branch_rids <= set(fresh.emulator.aborted)


@pytest.mark.parametrize(
    ("knob", "value", "status", "error_type"),
    [("fail", 500, 502, "backend_error"), ("malformed", True, 502, "backend_error"),
     ("close", True, 503, "backend_unavailable")],
)  # fmt: skip
def test_backend_failures_are_clean_502_and_503(
    api: str, fresh: EmulatorThread, knob: str, value: object, status: int, error_type: str
) -> None:
    setattr(fresh.emulator.config, knob, value)
    got, _, body = http("POST", api + "/v1/systemone", REQUEST)
    assert got == status, body
    assert body["detail"]["error_type"] == error_type


def test_backend_going_away_and_coming_back(tmp_path: Path) -> None:
    port = free_port()
    emulator = EmulatorThread(port=port).__enter__()
    first: EmulatorThread | None = emulator
    try:
        with openjev_connected(emulator.url, tmp_path / "serve.log") as api:
            assert http("POST", api + "/v1/systemone", REQUEST)[0] == 200
            emulator.__exit__(None, None, None)
            first = None
            status, _, body = http("POST", api + "/v1/systemone", REQUEST)
            assert status == 503, body
            assert body["detail"]["error_type"] == "backend_unavailable"
            status, _, report = http("GET", api + "/health")
            assert status == 503
            assert report["backend_ok"] is False
            with EmulatorThread(port=port):
                wait_until(lambda: health_status(api) == 200, 10, "openjev to see SGLang again")
                status, _, body = http("POST", api + "/v1/systemone", REQUEST)
                assert status == 200, body
    finally:
        if first is not None:
            first.__exit__(None, None, None)
