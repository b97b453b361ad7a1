"""Errors under /v1/decisions that happen before its handler runs (404, 405, 401) still come in OpenAI's envelope."""

from __future__ import annotations

from typing import Any

import pytest

from openjev.http.openapi_docs import DECISIONS_EXAMPLE
from tests.api.conftest import Client, running

pytestmark = pytest.mark.anyio


def openai_error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert list(body) == ["error"] and set(body["error"]) == {"message", "type", "param", "code"}, body
    error: dict[str, Any] = body["error"]
    return error


async def test_wrong_methods_and_unknown_paths_under_decisions(client: Client) -> None:
    for method in ("GET", "PUT", "DELETE", "PATCH"):
        response = await client.request(method, "/v1/decisions")
        assert response.status_code == 405, method
        assert openai_error(response)["code"] == "method_not_allowed"
        assert "POST" in response.headers["allow"]
    for path in ("/v1/decisions/abc", "/v1/decisions/abc/cancel", "/v1/decisionsx"):
        response = await client.post(path, json=DECISIONS_EXAMPLE)
        assert response.status_code == 404, path
        error = openai_error(response)
        assert (error["type"], error["code"]) == ("invalid_request_error", "not_found")
    # System One's paths keep System One's shape.
    other = await client.get("/v1/systemone")
    assert other.status_code == 405 and other.json()["detail"]["error_type"] == "method_not_allowed"


async def test_a_missing_key_is_refused_in_openais_envelope_even_for_options() -> None:
    async with running({"OPENJEV_API_KEY": "s3cret"}) as client:
        options = await client.options("/v1/decisions")
        post = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
        system_one = await client.options("/v1/systemone")
    for response in (options, post):
        assert response.status_code == 401
        error = openai_error(response)
        assert (error["type"], error["code"]) == ("invalid_request_error", "invalid_api_key")
        assert response.headers["www-authenticate"] == "Bearer"
    assert system_one.status_code == 401 and system_one.json()["detail"]["error_type"] == "authentication_error"
