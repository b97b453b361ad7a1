from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from typing import Any

import pytest
from backports import zstd

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from tests.api.conftest import Client, running

pytestmark = pytest.mark.anyio


def example(**changes: Any) -> dict[str, Any]:
    return {**EXAMPLE_REQUEST, **changes}


async def test_the_spec_example_answers_with_the_spec_shapes_and_headers(client: Client) -> None:
    response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "openjev/fake"
    answers = body["answers"]
    assert set(answers) == {"refund", "department", "urgency"}
    assert answers["refund"]["type"] == "noul" and 0 <= answers["refund"]["noul"] <= 1
    dept = answers["department"]
    assert dept["type"] == "choice" and dept["choice"] in ("billing", "technical")
    assert set(dept["probabilities"]) == {"billing", "technical"}
    assert math.fsum(dept["probabilities"].values()) == pytest.approx(1, abs=1e-6)
    assert dept["choice"] == max(dept["probabilities"], key=dept["probabilities"].get)
    urgency = answers["urgency"]
    assert urgency["legend"] == {"0": "Routine", "1": "Urgent", "2": "Emergency"}
    assert urgency["score"] == pytest.approx(sum(int(k) * p for k, p in urgency["probabilities"].items()), abs=1e-12)
    assert 0 <= urgency["confidence"] <= 1
    assert body["usage"]["output_tokens"] == 4 and body["usage"]["input_tokens"] > 0
    headers = response.headers
    assert re.fullmatch(r"[0-9a-f]{32}", headers["x-typesafe-request-id"])
    assert int(headers["x-openjev-prefix-tokens"]) > 0
    assert int(headers["x-openjev-cached-tokens"]) > 0
    timing = headers["server-timing"]
    assert [part.split(";")[0].strip() for part in timing.split(",")] == ["prepare", "prefill", "branches"]


async def test_each_request_writes_one_access_log_line(capsys: pytest.CaptureFixture[str]) -> None:
    async with running() as client:
        capsys.readouterr()
        ok = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        refused = await client.post("/v1/systemone", json=example(model="nope"))
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"event": "request"' in line]
    assert [(line["status"], line["request_id"]) for line in lines] == [
        (200, ok.headers["x-typesafe-request-id"]),
        (400, refused.headers["x-typesafe-request-id"]),
    ]
    first = lines[0]
    assert list(first) == ["method", "path", "status", "duration_ms", "event", "request_id", "level", "timestamp"]
    assert (first["method"], first["path"], first["level"]) == ("POST", "/v1/systemone", "info")
    assert isinstance(first["duration_ms"], float) and first["timestamp"].endswith("Z")


async def test_probabilities_are_full_precision(client: Client) -> None:
    body = (await client.post("/v1/systemone", json=EXAMPLE_REQUEST)).json()
    values = list(body["answers"]["urgency"]["probabilities"].values())
    assert any(len(repr(v)) > 6 for v in values)  # never rounded to two decimals


async def test_request_ids_are_fresh_and_on_errors_too(client: Client) -> None:
    a = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    b = await client.post("/v1/systemone", json=example(model="nope"))
    c = await client.get("/missing")
    ids = {r.headers["x-typesafe-request-id"] for r in (a, b, c)}
    assert len(ids) == 3


async def test_unicode_option_names_come_back_byte_for_byte(client: Client) -> None:
    names = ["réfund ✓", "日本語", "emoji 🚀", "  spaces  "]
    question = {"type": "choice", "criteria": dict.fromkeys(names)}
    body = (await client.post("/v1/systemone", json=example(questions={"q": question}))).json()
    assert list(body["answers"]["q"]["probabilities"]) == names
    assert body["answers"]["q"]["choice"] in names


@pytest.mark.parametrize(
    ("payload", "loc"),
    [
        ({"model": "jev-latest", "questions": {"q": {"type": "noul"}}}, ["body"]),
        (example(questions={}), ["body", "questions"]),
        (
            example(questions={"s": {"type": "score", "criteria": {"0": "a", "1": "b"}}}),
            ["body", "questions", "s", "criteria"],
        ),
        (
            example(questions={"c": {"type": "choice", "criteria": {str(i): None for i in range(65)}}}),
            ["body", "questions", "c", "criteria"],
        ),
        (example(assets={"a": {"type": "image"}}), ["body", "assets"]),
        (
            example(state=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
            ["body", "state", 0, "content", 0],
        ),
    ],
)
async def test_invalid_requests_get_422_with_body_locations(client: Client, payload: Any, loc: list[Any]) -> None:
    response = await client.post("/v1/systemone", json=payload)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail[0]["loc"] == loc
    assert detail[0]["msg"] and detail[0]["type"]


async def test_too_many_tokens_is_422(server: Any) -> None:
    async with server(max_input_tokens=60) as client:
        response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "tokens_exceeded"


async def test_unknown_model_is_400(client: Client) -> None:
    response = await client.post("/v1/systemone", json=example(model="gpt-4"))
    assert response.status_code == 400
    assert response.json()["detail"]["error_type"] == "unknown_model"
    assert "gpt-4" in response.json()["detail"]["message"]


async def test_bodies_over_the_limit_are_413(server: Any) -> None:
    async with server(max_body_bytes=2000) as client:
        big = example(state="x" * 3000)
        plain = await client.post("/v1/systemone", json=big)
        assert plain.status_code == 413
        assert plain.json()["detail"]["error_type"] == "request_too_large"
        bomb = zstd.compress(json.dumps(big).encode())
        assert len(bomb) < 2000
        zipped = await client.post(
            "/v1/systemone", content=bomb, headers={"content-type": "application/json", "content-encoding": "zstd"}
        )
        assert zipped.status_code == 413
        gz = await client.post(
            "/v1/systemone",
            content=gzip.compress(json.dumps(big).encode()),
            headers={"content-type": "application/json", "content-encoding": "gzip"},
        )
        assert gz.status_code == 413


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
async def test_compressed_bodies_are_accepted(client: Client, encoding: str) -> None:
    raw = json.dumps(EXAMPLE_REQUEST).encode()
    packed = zstd.compress(raw) if encoding == "zstd" else gzip.compress(raw)
    plain = (await client.post("/v1/systemone", content=raw, headers={"content-type": "application/json"})).json()
    packed_response = await client.post(
        "/v1/systemone", content=packed, headers={"content-type": "application/json", "content-encoding": encoding}
    )
    assert packed_response.status_code == 200
    assert packed_response.json()["answers"] == plain["answers"]


async def test_bad_encodings_are_4xx(client: Client) -> None:
    assert (
        await client.post(
            "/v1/systemone", content=b"abc", headers={"content-type": "application/json", "content-encoding": "br"}
        )
    ).status_code == 415
    corrupt = await client.post(
        "/v1/systemone",
        content=b"\x28\xb5\x2f\xfdgarbage",
        headers={"content-type": "application/json", "content-encoding": "zstd"},
    )
    assert 400 <= corrupt.status_code < 500
    truncated = zlib.compress(b"{}")[:-3]
    assert (
        400
        <= (
            await client.post(
                "/v1/systemone",
                content=truncated,
                headers={"content-type": "application/json", "content-encoding": "gzip"},
            )
        ).status_code
        < 500
    )


async def test_bearer_auth_when_a_key_is_set(server: Any) -> None:
    async with server(api_key="s3cret") as client:
        missing = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        wrong = await client.post("/v1/systemone", json=EXAMPLE_REQUEST, headers={"Authorization": "Bearer nope"})
        right = await client.post("/v1/systemone", json=EXAMPLE_REQUEST, headers={"Authorization": "Bearer s3cret"})
        models = await client.get("/v1/models")
        health = await client.get("/health")
    assert missing.status_code == wrong.status_code == models.status_code == 401
    assert missing.json()["detail"]["error_type"] == "authentication_error"
    assert right.status_code == 200 and health.status_code == 200


@pytest.mark.parametrize("auth", ["Bearer whatever", "Basic Zm9vOmJhcg==", "garbage"])
async def test_an_authorization_header_is_ignored_without_a_key(client: Client, auth: str) -> None:
    response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST, headers={"Authorization": auth})
    assert response.status_code == 200


async def test_the_deadline_gives_504(server: Any) -> None:
    async with server(request_timeout=0.2, fake_latency=2) as client:
        response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert response.status_code == 504
    assert response.json()["detail"]["error_type"] == "timeout"


async def test_a_backend_failure_is_a_clean_502(server: Any) -> None:
    async with server(fake_fail_after=2) as client:
        response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert response.status_code == 502
    assert response.json()["detail"]["error_type"] == "backend_error"
