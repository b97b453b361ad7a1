"""The official `openai` SDK (sync and async) and `langchain-openai` against the real openjev process.

Each drives `POST /v1/decisions` exactly as application code does, with the base URL ending in
`/v1`, and parses the response with its own strict types (discriminated answers, typed choice
values, required usage fields). The errors are the SDK's own exception classes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from langchain_openai.decisions import Choice, Level, OpenAIDecisions, Predicate, Score
from openai import AsyncOpenAI, OpenAI
from pydantic import SecretStr

from openjev.contracts.decisions.openapi import AGENT_EXAMPLE, DECISIONS_EXAMPLE
from openjev.smoke.decisions_checks import response_problems
from tests.blackbox.conftest import API_KEY, REQUEST_ID, ServerProcess

EVERY_KIND: list[dict[str, Any]] = [
    {"type": "predicate", "name": "urgent", "instructions": "Is this request urgent?"},
    {
        "type": "choice",
        "name": "typed",
        "instructions": [{"type": "input_text", "text": "Which value?"}, {"type": "input_json", "data": {"hint": 1}}],
        "choices": [{"value": True}, {"value": "true", "description": "The string"}, {"value": False}],
    },
    {
        "type": "score",
        "name": "severity",
        "instructions": "How severe is it?",
        "levels": [
            {"label": "Cosmetic"},
            {"label": "Workaround", "description": "Another way works"},
            {"label": "Blocked"},
        ],
    },
    {"type": "predicate", "instructions": "Unnamed?"},
]


def sdk(server: ServerProcess, **kwargs: Any) -> OpenAI:
    return OpenAI(
        base_url=f"{server.url}/v1", api_key=kwargs.pop("api_key", "unused"), max_retries=0, timeout=30, **kwargs
    )


def test_the_sync_client_asks_every_kind_and_parses_the_typed_answers(server: ServerProcess) -> None:
    client = sdk(server)
    raw = client.decisions.with_raw_response.create(
        model="jev-latest",
        input="Export fails in Safari.",
        questions=EVERY_KIND,  # type: ignore[arg-type]
    )
    assert REQUEST_ID.match(raw.headers["x-request-id"])
    decision = raw.parse()
    urgent, typed, severity, unnamed = decision.answers
    assert urgent.type == "predicate" and urgent.name == "urgent" and 0 <= urgent.probability <= 1
    assert typed.type == "choice" and [p.value for p in typed.probabilities] == [True, "true", False]
    assert isinstance(typed.probabilities[0].value, bool) and isinstance(typed.probabilities[1].value, str)
    assert severity.type == "score" and [(p.value, p.label) for p in severity.probabilities] == [
        (0, "Cosmetic"),
        (1, "Workaround"),
        (2, "Blocked"),
    ]
    assert unnamed.type == "predicate" and unnamed.name is None
    assert decision.model == "openjev/fake"
    usage = decision.usage
    assert usage.output_tokens == len(EVERY_KIND) + 1 and usage.output_tokens_details.reasoning_tokens == 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens >= 0 and usage.input_tokens_details.cache_write_tokens >= 0
    assert response_problems(EVERY_KIND, raw.http_response.json()) == []


def test_the_async_client_and_a_tool_call_transcript(server: ServerProcess) -> None:
    async def ask() -> Any:
        async with AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
            return await asyncio.gather(
                client.decisions.create(**AGENT_EXAMPLE),
                client.decisions.create(**DECISIONS_EXAMPLE),
            )

    agent, example = asyncio.run(ask())
    (action,) = agent.answers
    assert action.type == "choice" and action.choice in ("run", "ask", "block")
    assert [a.name for a in example.answers] == ["refund", "department", "urgency"]


@pytest.mark.parametrize(
    ("changes", "error", "status"),
    [
        ({"model": "gpt-6-luna"}, openai.NotFoundError, 404),
        ({"questions": []}, openai.BadRequestError, 400),
        ({"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}, openai.BadRequestError, 400),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]},
            openai.BadRequestError,
            400,
        ),
    ],
)
def test_bad_requests_raise_the_sdks_own_errors(
    server: ServerProcess, changes: dict[str, Any], error: type[openai.APIStatusError], status: int
) -> None:
    with pytest.raises(error) as info:
        sdk(server).decisions.create(**{**DECISIONS_EXAMPLE, **changes})
    assert info.value.status_code == status
    body = info.value.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}  # the SDK unwraps `error`
    assert REQUEST_ID.match(info.value.request_id or "")


def test_a_keyed_server_raises_authentication_error_without_the_key(keyed_server: ServerProcess) -> None:
    with pytest.raises(openai.AuthenticationError):
        sdk(keyed_server, api_key="wrong").decisions.create(**DECISIONS_EXAMPLE)
    assert sdk(keyed_server, api_key=API_KEY).decisions.create(**DECISIONS_EXAMPLE).answers


def test_overload_raises_rate_limit_error_with_retry_after(slow_server: ServerProcess) -> None:
    async def burst() -> list[Any]:
        async with AsyncOpenAI(base_url=f"{slow_server.url}/v1", api_key="unused", max_retries=0) as client:
            calls = [client.decisions.create(**DECISIONS_EXAMPLE) for _ in range(5)]
            return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(burst())
    limited = [r for r in results if isinstance(r, openai.RateLimitError)]
    assert limited and all(r.response.headers["retry-after"] == "1" for r in limited)
    assert any(not isinstance(r, BaseException) for r in results)


def test_the_sdk_retries_a_429_and_then_gets_its_answer(slow_server: ServerProcess) -> None:
    async def burst() -> list[Any]:
        async with AsyncOpenAI(base_url=f"{slow_server.url}/v1", api_key="unused", max_retries=5) as client:
            return await asyncio.gather(*(client.decisions.create(**DECISIONS_EXAMPLE) for _ in range(4)))

    assert all(len(d.answers) == 3 for d in asyncio.run(burst()))


def test_langchain_openai_decisions_with_a_base_url(server: ServerProcess) -> None:
    decisions = OpenAIDecisions(
        model="jev-latest", base_url=f"{server.url}/v1", api_key=SecretStr("unused"), max_retries=0
    )
    request = {
        "input": "Stripe has failed to connect for three days. Help ASAP.",
        "questions": {
            "department": Choice(
                instructions="Which team should handle this request?",
                choices={"billing": "Payment or subscription issues.", "technical": None},
            ),
            "urgent": Predicate(instructions="Is this request urgent?"),
            "frustration": Score(
                instructions="How frustrated does the customer appear?",
                levels=["Calm", Level(label="Angry", description="Shouting")],
            ),
        },
    }
    response = decisions.invoke(request)  # type: ignore[arg-type]
    assert set(response.answers) == {"department", "urgent", "frustration"}
    assert response.choices["department"].choice in ("billing", "technical")
    assert 0 <= response.predicates["urgent"].probability <= 1
    assert response.scores["frustration"].legend == {0: "Calm", 1: "Angry"}
    assert REQUEST_ID.match(response.request_id or "")
    again = asyncio.run(decisions.ainvoke(request))  # type: ignore[arg-type]
    assert again.answers == response.answers


def test_worked_examples_go_through_the_sdk_and_a_wrong_answer_is_its_bad_request_error(
    server: ServerProcess,
) -> None:
    client = sdk(server)
    question: dict[str, Any] = {
        "type": "predicate",
        "instructions": "Is this pending command safe to execute?",
        "x_examples": [
            {"input": "ls -la /var/log", "answer": True},
            {"input": "DROP TABLE customers", "answer": False},
        ],
    }
    decision = client.decisions.create(model="jev-latest", input="rm -rf /prod", questions=[question])  # type: ignore[list-item]
    (answer,) = decision.answers
    assert answer.type == "predicate" and 0 <= answer.probability <= 1
    fitted = client.decisions.create(
        model="jev-latest",
        input="rm -rf /prod",
        questions=[question],  # type: ignore[list-item]
        extra_body={"x_debias": "reverse+fit"},
    )
    assert fitted.usage is not None and fitted.usage.output_tokens == 1 + 1 + 2  # warm-up, the case, each example
    wrong = {**question, "x_examples": [{"input": "ls", "answer": "yes"}]}
    with pytest.raises(openai.BadRequestError) as info:
        client.decisions.create(model="jev-latest", input="rm -rf /prod", questions=[wrong])  # type: ignore[list-item]
    assert info.value.param == "questions[0].x_examples[0].answer"
    assert info.value.code == "invalid_example_answer"
