"""The total token budget counts what the backend is sent, bias removal's calls included; operators cap x_debias."""

from __future__ import annotations

from typing import Any

import pytest

from openjev.domain.errors import SettingsError
from openjev.http.openapi_docs import DECISIONS_EXAMPLE, EXAMPLE_REQUEST
from openjev.settings import load_settings
from tests.api.conftest import running

pytestmark = pytest.mark.anyio

CHOICES = {f"o{i}": f"Option number {i}" for i in range(5)}
QUESTIONS: dict[str, Any] = {
    **{f"c{i}": {"type": "choice", "instructions": f"Which option fits {i}?", "criteria": CHOICES} for i in range(4)},
    "n": {"type": "noul", "instructions": "Is it urgent?"},
    "s": {"type": "score", "instructions": "How bad?", "criteria": ["Low", "Mid", "High"]},
}


EXAMPLES = [{"state": f"Case {i}: the card was charged twice.", "answer": f"o{i}"} for i in range(5)]


def request(mode: str) -> dict[str, Any]:
    questions = QUESTIONS
    if "fit" in mode:  # worked examples on one question, asked about on their own
        questions = {**QUESTIONS, "c0": {**QUESTIONS["c0"], "x_examples": EXAMPLES}}
    return {"model": "jev-latest", "state": "I was charged twice.", "questions": questions, "x_debias": mode}


async def _sent(mode: str, budget: int) -> tuple[int, dict[str, Any]]:
    """Status and body of the request on a fresh server (no prior cached) with this budget."""
    async with running({"OPENJEV_MAX_TOTAL_INPUT_TOKENS": str(budget)}) as client:
        response = await client.post("/v1/systemone", json=request(mode))
    body: dict[str, Any] = response.json()
    return response.status_code, body


@pytest.mark.parametrize(
    "mode", ["none", "reverse", "rotate", "calibrate", "rotate+calibrate", "fit", "reverse+fit", "rotate+fit"]
)
async def test_the_budget_is_exactly_the_input_tokens_the_backend_is_sent(mode: str) -> None:
    status, body = await _sent(mode, 10_000_000)
    assert status == 200, body
    sent = body["usage"]["input_tokens"]  # the fake reports every call's whole prompt
    assert (await _sent(mode, sent))[0] == 200
    status, refused = await _sent(mode, sent - 1)
    assert status == 422
    [issue] = refused["detail"]
    assert issue["type"] == "tokens_exceeded" and issue["loc"] == ["body"]
    assert f"{sent} input tokens" in issue["msg"] and "every option order" in issue["msg"]


async def test_the_fast_check_counts_every_order_before_tokenizing() -> None:
    # A state whose bytes alone show that ten orders of each choice question cannot fit the budget,
    # though one order could: refused by the floor ("at least"), the same request with `none` answered.
    state = "Refund the duplicate charge, please. " * 200
    async with running({"OPENJEV_MAX_TOTAL_INPUT_TOKENS": "60000"}) as client:
        plain = await client.post("/v1/systemone", json={**request("none"), "state": state})
        rotated = await client.post("/v1/systemone", json={**request("rotate"), "state": state})
    assert plain.status_code == 200, plain.text
    assert rotated.status_code == 422
    [issue] = rotated.json()["detail"]
    assert issue["loc"] == ["body"] and "would send the backend at least" in issue["msg"]


async def test_the_operator_chooses_which_modes_a_request_may_ask_for() -> None:
    env = {"OPENJEV_DEBIAS": "none", "OPENJEV_CLIENT_DEBIAS": "reverse"}
    async with running(env) as client:
        allowed = [await client.post("/v1/systemone", json=request(mode)) for mode in ("none", "reverse")]
        refused = await client.post("/v1/systemone", json=request("rotate"))
        decisions = await client.post("/v1/decisions", json={**DECISIONS_EXAMPLE, "x_debias": "rotate+calibrate"})
    assert [r.status_code for r in allowed] == [200, 200]  # the server's own mode is always allowed
    assert refused.status_code == 422
    [issue] = refused.json()["detail"]
    assert issue["loc"] == ["body", "x_debias"] and issue["type"] == "debias_not_allowed"
    assert "send one of none, reverse" in issue["msg"]
    assert decisions.status_code == 400
    error = decisions.json()["error"]
    assert (error["param"], error["code"]) == ("x_debias", "debias_not_allowed")


async def test_server_allows_only_the_servers_own_mode() -> None:
    async with running({"OPENJEV_DEBIAS": "reverse", "OPENJEV_CLIENT_DEBIAS": "server"}) as client:
        own = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "x_debias": "reverse"})
        cheaper = await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "x_debias": "none"})
        default = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert (own.status_code, cheaper.status_code, default.status_code) == (200, 422, 200)


@pytest.mark.parametrize("value", ["rotate,sideways", " , ", "all"])
def test_an_unknown_mode_stops_start_up(value: str) -> None:
    with pytest.raises(SettingsError, match="OPENJEV_CLIENT_DEBIAS"):
        load_settings({"OPENJEV_CLIENT_DEBIAS": value})
