"""Error messages quote a client's value at most ECHO_LIMIT characters, then its length: never a whole input."""

from __future__ import annotations

from typing import Any

import pytest

from openjev.domain.errors import ECHO_LIMIT, echo
from openjev.http.openapi_docs import DECISIONS_EXAMPLE, EXAMPLE_REQUEST
from tests.api.conftest import Client

pytestmark = pytest.mark.anyio
LONG = 30_000


def test_echo_quotes_short_values_whole_and_cuts_long_ones() -> None:
    assert echo("call_1") == "'call_1'" and echo(7) == "7"
    cut = echo("c" * 10_000)
    assert cut == repr("c" * 10_000)[:ECHO_LIMIT] + "… (10000 characters)"


async def test_64_duplicate_long_choices_do_not_echo_the_body_back(client: Client) -> None:
    question = {"type": "choice", "instructions": "Pick one.", "choices": [{"value": "v" * LONG}] * 64}
    response = await client.post("/v1/decisions", json={**DECISIONS_EXAMPLE, "questions": [question]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "duplicate_choice" and f"… ({LONG} characters) is given twice" in error["message"]
    assert len(response.content) < 63 * 400  # 63 issues of a few hundred bytes, not 1.9 MB


async def test_a_long_call_id_is_not_echoed_in_full(client: Client) -> None:
    call_id = "c" * 10_000
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "Clean up."},
        {"type": "function_call_output", "call_id": call_id, "output": "done"},
    ]
    response = await client.post("/v1/decisions", json={**DECISIONS_EXAMPLE, "input": items})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "unknown_call_id" and "(10000 characters)" in error["message"]
    assert "every tool output must follow the function_call it answers" in error["message"]
    assert len(response.content) < 1_000


async def test_msgspecs_quoted_values_and_unknown_models_are_cut_too(client: Client) -> None:
    bad_mode = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "x_debias": "r" * LONG})
    odd_question = {"type": "predicate", "instructions": "Ok?", "f" * LONG: 1}
    unknown_field = await client.post("/v1/decisions", json={**DECISIONS_EXAMPLE, "questions": [odd_question]})
    unknown_model = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "model": "m" * LONG})
    assert bad_mode.status_code == 422 and len(bad_mode.json()["detail"][0]["msg"]) < ECHO_LIMIT + 100
    assert unknown_field.status_code == 400 and len(unknown_field.json()["error"]["message"]) < ECHO_LIMIT + 150
    assert unknown_model.status_code == 400
    message = unknown_model.json()["detail"]["message"]
    assert f"({LONG} characters)" in message and "this server serves" in message and len(message) < 500
