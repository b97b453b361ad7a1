"""POST /v1/decisions through the app: OpenAI's shapes, its error envelope, and the same answers as System One."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import pytest

from openjev.contracts.decisions.openapi import AGENT_EXAMPLE, DECISIONS_EXAMPLE
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from tests.api.conftest import Client

pytestmark = pytest.mark.anyio


def decisions(**changes: Any) -> dict[str, Any]:
    return {**DECISIONS_EXAMPLE, **changes}


async def test_the_example_answers_in_question_order_with_every_usage_field(client: Client) -> None:
    response = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["answers", "model", "usage"] and body["model"] == "openjev/fake"
    refund, department, urgency = body["answers"]
    assert (refund["type"], refund["name"]) == ("predicate", "refund") and 0 <= refund["probability"] <= 1
    assert department["type"] == "choice" and department["choice"] in ("billing", "technical")
    assert [p["value"] for p in department["probabilities"]] == ["billing", "technical"]
    top = max(department["probabilities"], key=lambda p: p["probability"])
    assert top["value"] == department["choice"] and 0 <= department["confidence"] <= 1
    assert [(p["value"], p["label"]) for p in urgency["probabilities"]] == [
        (0, "Routine"),
        (1, "Urgent"),
        (2, "Emergency"),
    ]
    assert urgency["score"] == pytest.approx(
        sum(p["value"] * p["probability"] for p in urgency["probabilities"]), abs=1e-12
    )
    usage = body["usage"]
    assert usage["output_tokens"] == 4 and usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    details = usage["input_tokens_details"]
    assert 0 < details["cached_tokens"] < usage["input_tokens"] and details["cache_write_tokens"] > 0
    assert all(isinstance(v, int) for v in (*usage.values(), *details.values()) if not isinstance(v, dict))
    headers = response.headers
    assert (
        re.fullmatch(r"[0-9a-f]{32}", headers["x-request-id"])
        and headers["x-request-id"] == headers["x-typesafe-request-id"]
    )
    assert int(headers["x-openjev-prefix-tokens"]) > 0 and int(headers["x-openjev-cached-tokens"]) > 0
    assert [part.split(";")[0].strip() for part in headers["server-timing"].split(",")] == [
        "prepare",
        "prefill",
        "branches",
    ]


async def test_the_same_decision_gets_the_same_probabilities_through_both_contracts(client: Client) -> None:
    one = (await client.post("/v1/systemone", json=EXAMPLE_REQUEST)).json()
    two = (await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)).json()
    refund, department, urgency = two["answers"]
    assert refund["probability"] == one["answers"]["refund"]["noul"]
    assert {p["value"]: p["probability"] for p in department["probabilities"]} == one["answers"]["department"][
        "probabilities"
    ]
    assert department["confidence"] == one["answers"]["department"]["confidence"]
    assert [p["probability"] for p in urgency["probabilities"]] == list(
        one["answers"]["urgency"]["probabilities"].values()
    )
    assert urgency["score"] == one["answers"]["urgency"]["score"]
    assert two["usage"]["input_tokens"] == one["usage"]["input_tokens"]


async def test_names_are_echoed_and_null_when_absent_and_values_keep_their_type(client: Client) -> None:
    question = {
        "type": "choice",
        "instructions": "?",
        "choices": [{"value": True}, {"value": "true"}, {"value": False}],
    }
    body = (await client.post("/v1/decisions", json=decisions(questions=[question, {**question, "name": ""}]))).json()
    first, second = body["answers"]
    assert first["name"] is None and second["name"] == ""
    assert [p["value"] for p in first["probabilities"]] == [True, "true", False]
    assert first["choice"] in (True, "true", False)


async def test_an_agent_transcript_with_a_proposed_tool_call_is_answered(client: Client) -> None:
    response = await client.post("/v1/decisions", json=AGENT_EXAMPLE)
    assert response.status_code == 200, response.text
    assert [p["value"] for p in response.json()["answers"][0]["probabilities"]] == ["run", "ask", "block"]


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        (decisions(model="gpt-6-luna"), 404, None, "model_not_found"),
        (decisions(questions=[]), 400, "questions", "too_few_questions"),
        (
            decisions(input=[{"type": "function_call_output", "call_id": "c9", "output": "x"}]),
            400,
            "input[0].call_id",
            "unknown_call_id",
        ),
        (
            decisions(input=[{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]),
            400,
            "input[0].content[0]",
            "unsupported_content",
        ),
        (decisions(x_debias="sideways"), 400, "x_debias", "invalid_value"),
    ],
)
async def test_errors_use_openais_envelope_and_status(
    client: Client, body: Any, status: int, param: str | None, code: str
) -> None:
    response = await client.post("/v1/decisions", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert list(error) == ["message", "type", "param", "code"]
    assert (error["param"], error["code"]) == (param, code) and error["message"]
    assert error["type"] == "invalid_request_error"
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])


async def test_transport_errors_use_the_envelope_too(server: Any) -> None:
    async with server(max_body_bytes=500, api_key="sekret") as client:
        auth = {"authorization": "Bearer sekret"}
        missing_key = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
        assert missing_key.status_code == 401 and missing_key.json()["error"]["code"] == "invalid_api_key"
        too_large = await client.post("/v1/decisions", json=decisions(input="x" * 600), headers=auth)
        assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "request_too_large"
        as_text = await client.post("/v1/decisions", content=b"{}", headers={**auth, "content-type": "text/plain"})
        assert as_text.status_code == 415 and "error" in as_text.json()


async def test_overload_is_a_429_with_retry_after_and_not_ready_a_503(server: Any) -> None:
    async with server(max_concurrent_requests=1) as client:
        with client.app.state.service.admission.slot():
            busy = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1"
        assert busy.json()["error"]["code"] == "rate_limit_exceeded"
    async with server() as client:
        client.app.state.service.evaluator = None  # as while starting (start-up is over: nothing sets it back)
        starting = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
        assert starting.status_code == 503 and "retry-after" in starting.headers
        assert starting.json()["error"]["type"] == "server_error"


async def test_the_deadline_is_a_504(server: Any) -> None:
    async with server(fake_latency=0.3, request_timeout=0.1) as client:
        response = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
    assert response.status_code == 504 and response.json()["error"]["code"] == "timeout"


async def test_label_mass_is_reported_on_request_and_refusals_follow_the_policy(server: Any) -> None:
    asked = decisions(x_label_mass=True)
    async with server() as client:
        answers = (await client.post("/v1/decisions", json=asked)).json()["answers"]
        masses = [a["x_label_mass"] for a in answers]
        assert all(0 < m <= 1 for m in masses)
        plain = (await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)).json()["answers"]
        assert all("x_label_mass" not in a for a in plain)  # only when asked for
        one = (await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "x_label_mass": True})).json()
        assert [a["x_label_mass"] for a in one["answers"].values()] == masses  # the same figure on System One
    cut = sorted(masses)[1]  # refuses the lowest one, answers the others
    async with server(refuse_below_label_mass=cut) as client:
        answers = (await client.post("/v1/decisions", json=asked)).json()["answers"]
        refused = [a for a in answers if a["type"] == "refusal"]
        assert len(refused) == 1 and refused[0]["x_label_mass"] < cut and "below" in refused[0]["x_reason"]
        assert refused[0]["name"] == DECISIONS_EXAMPLE["questions"][masses.index(min(masses))]["name"]
        # System One cannot express a refusal: it always answers.
        one = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        assert one.status_code == 200 and len(one.json()["answers"]) == 3


async def test_model_aliases_are_accepted_and_listed(server: Any) -> None:
    async with server(model_aliases="gpt-6-luna, team-default") as client:
        assert (await client.post("/v1/decisions", json=decisions(model="gpt-6-luna"))).status_code == 200
        assert (
            await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "model": "team-default"})
        ).status_code == 200
        listed = (await client.get("/v1/models")).json()
        assert [m["id"] for m in listed["data"]] == ["openjev/fake", "jev-latest", "gpt-6-luna", "team-default"]


async def test_concurrent_requests_of_both_contracts_get_independent_answers(client: Client) -> None:
    many = await asyncio.gather(
        *(client.post("/v1/decisions", json=DECISIONS_EXAMPLE) for _ in range(4)),
        *(client.post("/v1/systemone", json=EXAMPLE_REQUEST) for _ in range(4)),
    )
    assert {r.status_code for r in many} == {200}
    first = many[0].json()["answers"]
    assert all(r.json()["answers"] == first for r in many[1:4])
    assert math.isclose(first[0]["probability"], many[4].json()["answers"]["refund"]["noul"])
