"""Bad input, hostile clients and failing backends get clear 4xx answers, never a 5xx or a stall."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from dataclasses import replace
from typing import Any

import pytest
from backports import zstd
from litestar.testing import AsyncTestClient
from litestar.types import ReceiveMessage

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.build import build_runtime
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.decision import Decision
from openjev.domain.errors import BackendError, BackendUnavailable
from openjev.domain.ports import BackendHealth, LabelScores
from openjev.evaluation import Evaluator, Prepared
from openjev.http import body
from openjev.http.app import create_app
from openjev.http.body import MAX_MEMBERS, inflate, read_body
from openjev.http.errors import BadBody, BadEncoding, BodyTimeout
from openjev.settings import load_settings
from tests.api.conftest import LOCAL, Client
from tests.assets import CountingCodec

pytestmark = pytest.mark.anyio
BODY = json.dumps(EXAMPLE_REQUEST).encode()


# -- 415: JSON only (a web page cannot send JSON without a CORS preflight) --------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ],
)
async def test_non_json_content_types_are_415_naming_the_header(client: Client, content_type: str | None) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = await client.post("/v1/systemone", content=BODY, headers=headers)
    assert response.status_code == 415
    detail = response.json()["detail"]
    assert detail["error_type"] == "unsupported_media_type"
    assert "Content-Type: application/json" in detail["message"]


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"],
)
async def test_json_content_types_are_accepted(client: Client, content_type: str) -> None:
    response = await client.post("/v1/systemone", content=BODY, headers={"content-type": content_type})
    assert response.status_code == 200


# -- Host check on loopback (DNS rebinding) -------------------------------------------------


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "10.0.0.1", "127.0.0.1.nip.io"])
async def test_a_loopback_server_refuses_other_host_names(client: Client, host: str) -> None:
    for method, path in [("POST", "/v1/systemone"), ("GET", "/v1/models"), ("GET", "/health")]:
        response = await client.request(
            method, path, content=BODY, headers={"host": host, "content-type": "application/json"}
        )
        assert response.status_code == 400, (method, path)
        assert response.json()["detail"]["error_type"] == "invalid_host"


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:9", "[::1]:8000", "api.localhost"])
async def test_a_loopback_server_answers_loopback_host_names(client: Client, host: str) -> None:
    assert (await client.get("/v1/models", headers={"host": host})).status_code == 200


async def test_a_server_on_every_interface_accepts_any_host(server: Any) -> None:
    async with server(host="0.0.0.0") as client:
        assert (await client.get("/v1/models", headers={"host": "api.example.com"})).status_code == 200


# -- API key bytes -----------------------------------------------------------------------------


async def test_a_non_ascii_key_works_when_sent_as_utf8(server: Any) -> None:
    key = "clé-🔑-secret"
    async with server(api_key=key) as client:
        ok = await client.get("/v1/models", headers=[(b"authorization", b"Bearer " + key.encode())])
        wrong = await client.get("/v1/models", headers=[(b"authorization", b"Bearer " + key.encode("utf-16"))])
    assert (ok.status_code, wrong.status_code) == (200, 401)


async def test_a_key_from_a_secret_file_with_a_newline_still_works(server: Any) -> None:
    async with server({"OPENJEV_API_KEY": "s3cret\n"}) as client:
        response = await client.get("/v1/models", headers={"authorization": "Bearer s3cret"})
    assert response.status_code == 200


# -- Body reading: early end is 400, trickling is 408, inflation is linear and capped ---------


def messages(*items: Any, delay: float = 0.0) -> Any:
    queue = list(items)

    async def receive() -> ReceiveMessage:
        if delay:
            await asyncio.sleep(delay)
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    return receive


async def test_a_body_that_ends_early_is_400() -> None:
    receive = messages({"type": "http.request", "body": b'{"mod', "more_body": True})
    with pytest.raises(BadBody):
        await read_body(receive, None, "100", 1000)


async def test_a_body_that_does_not_arrive_in_time_is_408() -> None:
    never = asyncio.Event()

    async def receive() -> ReceiveMessage:
        await never.wait()
        raise AssertionError

    started = time.monotonic()
    with pytest.raises(BodyTimeout):
        await read_body(receive, None, None, 1000, within=0.2)
    assert time.monotonic() - started < 1


async def test_a_trickle_below_the_minimum_rate_is_408() -> None:
    clock = [0.0]

    async def receive() -> ReceiveMessage:
        await asyncio.sleep(0)
        clock[0] += 1.0  # one byte a second
        return {"type": "http.request", "body": b"x", "more_body": True}

    with pytest.raises(BodyTimeout, match="bytes/s"):
        await read_body(receive, None, None, 10_000, within=1000, min_rate=100, clock=lambda: clock[0])
    assert clock[0] < 10  # refused once the grace is over, not after the whole deadline


def empty_zstd_frames(n: int) -> bytes:
    return zstd.compress(b"") * n


def empty_gzip_members(n: int) -> bytes:
    return gzip.compress(b"") * n


@pytest.mark.parametrize(("encoding", "frames"), [("zstd", empty_zstd_frames), ("gzip", empty_gzip_members)])
def test_many_tiny_frames_are_refused_at_once(encoding: str, frames: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused after MAX_MEMBERS decompressors, not after 100,000 (13-20 s before, each frame copied)."""
    data = frames(100_000)
    created = [0]

    def counting(factory: Any) -> Any:
        def new(*args: Any, **kwargs: Any) -> Any:
            created[0] += 1
            return factory(*args, **kwargs)

        return new

    if encoding == "gzip":
        monkeypatch.setattr(zlib, "decompressobj", counting(zlib.decompressobj))
    else:
        monkeypatch.setattr(body, "ZstdDecompressor", counting(zstd.ZstdDecompressor))
    with pytest.raises(BadEncoding, match=f"more than {MAX_MEMBERS}"):
        inflate(data, encoding, 2 * 1024 * 1024)
    assert created[0] == MAX_MEMBERS


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_several_members_up_to_the_cap_are_inflated(encoding: str) -> None:
    parts = [json.dumps({"part": i}).encode() * 1000 for i in range(MAX_MEMBERS)]
    compress = zstd.compress if encoding == "zstd" else gzip.compress
    assert inflate(b"".join(compress(p) for p in parts), encoding, 10**8) == b"".join(parts)


def test_a_large_single_member_is_inflated_in_pieces() -> None:
    raw = bytes(range(256)) * 40_000  # 10 MB, poorly compressible in places
    deflater = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    assert inflate(deflater.compress(raw) + deflater.flush(), "gzip", len(raw)) == raw
    assert inflate(zstd.compress(raw), "zstd", len(raw)) == raw


async def test_too_many_frames_through_the_app_is_a_4xx(client: Client) -> None:
    packed = empty_zstd_frames(MAX_MEMBERS) + zstd.compress(BODY)
    response = await client.post(
        "/v1/systemone", content=packed, headers={"content-type": "application/json", "content-encoding": "zstd"}
    )
    assert response.status_code == 415  # over the member cap
    assert "more than 64 members" in response.json()["detail"]["message"]


# -- Admission covers preparation ------------------------------------------------------------


async def test_prompt_preparation_is_admitted(server: Any) -> None:
    async with server(max_concurrent_requests=1) as client:
        app: Any = client.app
        service = app.state.service
        evaluator: Evaluator = service.evaluator
        seen: list[int] = []
        original = evaluator.prepare

        def prepare(decision: Decision) -> Prepared:
            seen.append(service.admission.active)
            return original(decision)

        evaluator.prepare = prepare  # type: ignore[method-assign]
        assert (await client.post("/v1/systemone", json=EXAMPLE_REQUEST)).status_code == 200
    assert seen == [1]


# -- What cannot fit is refused before its text is tokenized ----------------------------------


@pytest.mark.needs_test_assets
async def test_a_state_that_cannot_fit_is_refused_before_it_is_tokenized() -> None:
    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    codec = CountingCodec()
    app = create_app(settings, replace(build_runtime(settings), load_codec=lambda: codec))
    huge = ("The quick brown fox jumps over the lazy dog. " * 45_000)[:2_000_000]
    fitting = huge[:100_000]  # ~22,000 tokens: under the 32,768 per question
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(500):
            if app.state.service.evaluator is not None:
                break
            await asyncio.sleep(0.01)
        codec.caller_chars = 0
        refused = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "state": huge})
        refused_chars = codec.caller_chars
        answered = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "state": fitting})
    assert refused.status_code == 422
    issue = refused.json()["detail"][0]
    assert issue["type"] == "tokens_exceeded" and issue["loc"][:2] == ["body", "questions"]
    assert "needs at least" in issue["msg"] and "the limit per question is 32768" in issue["msg"]
    assert refused_chars == 0  # not one character of the state (or the questions) was tokenized
    assert answered.status_code == 200, answered.text
    assert codec.caller_chars > len(fitting)


# -- Error texts: no internal URLs or backend stack text to clients --------------------------

LEAKY = "http://10.1.2.3:30000/generate answered 500:\nTraceback (most recent call last):\n  File secret.py"


class _LeakyBackend(FakeBackend):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def score(self, call_id: str, token_ids: Any, label_ids: Any) -> LabelScores:
        raise self.error

    async def health(self) -> BackendHealth:
        return BackendHealth(ok=False, detail=LEAKY)


@pytest.mark.parametrize(("error", "status"), [(BackendError(LEAKY), 502), (BackendUnavailable(LEAKY), 503)])
async def test_backend_failures_do_not_echo_internal_text(error: Exception, status: int) -> None:
    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    app = create_app(settings, replace(build_runtime(settings), backend=_LeakyBackend(error)))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if app.state.service.evaluator is not None:
                break
            await asyncio.sleep(0.01)
        response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        health = await client.get("/health")
    assert response.status_code == status
    for text in (response.text, health.text):
        assert "10.1.2.3" not in text and "Traceback" not in text and "secret.py" not in text
    assert health.status_code == 503


class _FailingStart(FakeBackend):
    async def start(self) -> None:
        raise BackendUnavailable(LEAKY)


async def test_a_failed_start_is_not_echoed_to_clients() -> None:
    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    app = create_app(settings, replace(build_runtime(settings), backend=_FailingStart()))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if app.state.service.phase.value == "failed":
                break
            await asyncio.sleep(0.01)
        response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        health = await client.get("/health")
    assert response.status_code == 503 and health.status_code == 503
    for text in (response.text, health.text):
        assert "10.1.2.3" not in text and "Traceback" not in text
