"""End to end through the real app (Litestar + the embedded backend with SmolLM2): HTTP to answers."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from litestar import Litestar
from litestar.testing import AsyncTestClient

from openjev.adapters.embedded.cache_plan import ALIGN
from openjev.contracts.decisions.openapi import AGENT_EXAMPLE, DECISIONS_EXAMPLE
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.http.app import create_app
from openjev.settings import load_settings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SKY = "The sky this afternoon is perfectly clear and deep blue, without a single cloud."

LOCAL = "http://127.0.0.1"  # the app answers loopback Host headers only when it listens on loopback


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client() -> AsyncIterator[AsyncTestClient[Litestar]]:
    app = create_app(
        load_settings(
            {"OPENJEV_LOG_LEVEL": "warning", "OPENJEV_MODEL": "smollm2-135m", "OPENJEV_DEBIAS": "none"},
            parallel_slots=2,
            slot_context=2048,
        )
    )
    async with AsyncTestClient(app=app, timeout=120, base_url=LOCAL) as client:
        for _ in range(600):
            if (await client.get("/health")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"the embedded server never became ready: {(await client.get('/health')).json()}")
        yield client


async def ask(client: AsyncTestClient[Litestar], state: Any, questions: dict[str, Any]) -> Any:
    response = await client.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions})
    assert response.status_code == 200, response.text
    return response


async def test_the_model_is_named_after_the_gguf(client: AsyncTestClient[Litestar]) -> None:
    names = [m["name"] for m in (await client.get("/v1/models")).json()["models"]]
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in names
    health = (await client.get("/health")).json()
    assert health["backend"] == "embedded" and health["backend_ok"]
    by_stem = await client.post(
        "/v1/systemone",
        json={"model": "SmolLM2-135M-Instruct.Q4_1", "state": "x", "questions": {"q": {"type": "noul"}}},
    )
    assert by_stem.status_code == 200


async def test_the_spec_example_is_answered_with_cache_hits_and_exact_usage(client: AsyncTestClient[Litestar]) -> None:
    response = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    answers = body["answers"]
    assert set(answers) == {"refund", "department", "urgency"}
    assert 0.0 <= answers["refund"]["noul"] <= 1.0
    assert math.fsum(answers["department"]["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
    assert math.fsum(answers["urgency"]["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
    prefix = int(response.headers["x-openjev-prefix-tokens"])
    cached = int(response.headers["x-openjev-cached-tokens"])
    assert prefix > 0 and cached >= 3 * (prefix // ALIGN * ALIGN)  # every branch reused the warmed prefix
    # (deterministic: its whole groups of ALIGN tokens)
    assert body["usage"]["output_tokens"] == 4
    assert body["usage"]["input_tokens"] > 4 * prefix
    assert "prefill" in response.headers["server-timing"]


async def test_an_obviously_false_statement_gets_a_no(client: AsyncTestClient[Litestar]) -> None:
    answers = (
        await ask(
            client,
            SKY,
            {
                "green": {"type": "noul", "instructions": "Is the sky green?"},
                "blue": {"type": "noul", "instructions": "Is the sky blue?"},
            },
        )
    ).json()["answers"]
    assert answers["green"]["noul"] < 0.5
    assert answers["blue"]["noul"] > answers["green"]["noul"]


async def test_answers_do_not_depend_on_ids_other_questions_or_order(client: AsyncTestClient[Litestar]) -> None:
    """Independence, exactly: the engine's results do not depend on batching or cache state.

    See docs/spec.md#how-an-answer-is-computed.
    """
    question = {
        "type": "choice",
        "instructions": "Which department should handle this?",
        "criteria": {"refund": "Refunds and payments", "technical": "Software bugs", "sales": "New purchases"},
    }
    other = {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Urgent", "Emergency"]}
    state = [{"role": "user", "content": "I was charged twice for my order. Please refund the duplicate payment."}]
    alone = (await ask(client, state, {"dept": question})).json()["answers"]["dept"]
    mixed = (await ask(client, state, {"urgency": other, "zzz": {"type": "noul"}, "another id": question})).json()
    again = mixed["answers"]["another id"]
    assert again["choice"] == alone["choice"]
    for name, p in alone["probabilities"].items():
        assert again["probabilities"][name] == pytest.approx(p, abs=1e-6)


async def test_64_options_are_answered_and_65_are_refused(client: AsyncTestClient[Litestar]) -> None:
    options = {f"option {i}": f"The number {i}" for i in range(64)}
    body = (await ask(client, "Pick the number 7.", {"n": {"type": "choice", "criteria": options}})).json()
    assert len(body["answers"]["n"]["probabilities"]) == 64
    too_many = {**options, "option 64": "The number 64"}
    refused = await client.post(
        "/v1/systemone",
        json={"model": "jev-latest", "state": "x", "questions": {"n": {"type": "choice", "criteria": too_many}}},
    )
    assert refused.status_code == 422


async def test_concurrent_requests_are_all_answered(client: AsyncTestClient[Litestar]) -> None:
    questions = {f"q{i}": {"type": "noul", "instructions": f"Is statement {i} true?"} for i in range(4)}
    responses = await asyncio.gather(
        *(ask(client, f"Statement set {n}: the sky is blue.", questions) for n in range(4))
    )
    assert all(len(r.json()["answers"]) == 4 for r in responses)


async def test_the_same_decision_gets_the_same_probabilities_through_both_contracts(
    client: AsyncTestClient[Litestar],
) -> None:
    """System One and OpenAI Decisions are two translations of one use case: on the real model too."""
    one = (await client.post("/v1/systemone", json=EXAMPLE_REQUEST)).json()["answers"]
    response = await client.post("/v1/decisions", json=DECISIONS_EXAMPLE)
    assert response.status_code == 200, response.text
    refund, department, urgency = response.json()["answers"]
    assert refund["probability"] == pytest.approx(one["refund"]["noul"], abs=1e-6)
    by_value = {p["value"]: p["probability"] for p in department["probabilities"]}
    assert by_value == pytest.approx(one["department"]["probabilities"], abs=1e-6)
    levels = [p["probability"] for p in urgency["probabilities"]]
    assert levels == pytest.approx(list(one["urgency"]["probabilities"].values()), abs=1e-6)


async def test_an_agent_transcript_with_a_tool_call_is_answered_by_the_real_model(
    client: AsyncTestClient[Litestar],
) -> None:
    response = await client.post("/v1/decisions", json=AGENT_EXAMPLE)
    assert response.status_code == 200, response.text
    (action,) = response.json()["answers"]
    assert math.fsum(p["probability"] for p in action["probabilities"]) == pytest.approx(1.0, abs=1e-6)
