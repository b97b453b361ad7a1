"""A third contract, defined here and nowhere in `src/`, gets routing, metrics, errors and OpenAPI from its spec alone.

The toy "ask" contract answers one yes/no question about a text: `POST /v1/ask` with
`{"model", "text", "question"}` -> `{"yes": p}`. Its errors are `{"problem": {...}}`, its overload
status is 509 and its clients read the request id as `x-ask-request-id`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from litestar import Litestar
from litestar.testing import AsyncTestClient

from openjev.contracts.models import check_model
from openjev.contracts.registry import CONTRACTS
from openjev.contracts.spec import ContractSpec, ErrorDoc, ErrorWire, Example, LimitNames, OpenAPIOperation, Schemas
from openjev.domain.decision import Decision, Document
from openjev.domain.errors import InvalidRequest, OpenJevError
from openjev.domain.kinds import YES_NO
from openjev.domain.limits import Limits
from openjev.domain.outcome import Distribution, Outcome
from openjev.http.app import create_app
from openjev.settings import load_settings
from tests.api.conftest import LOCAL


class AskRequest(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    text: str
    question: str


class AskAnswer(msgspec.Struct):
    yes: float


class Problem(msgspec.Struct):
    kind: str
    message: str


class ProblemBody(msgspec.Struct):
    problem: Problem


class AskParsed(msgspec.Struct, frozen=True):
    decision: Decision


def parse(body: bytes, limits: Limits, models: Collection[str]) -> AskParsed:
    try:
        request = msgspec.json.decode(body, type=AskRequest)
    except msgspec.MsgspecError as exc:
        raise InvalidRequest.one((), str(exc)) from None
    check_model(request.model, models)
    return AskParsed(decision=Decision(state=Document(text=request.text), asks=(YES_NO.ask(request.question),)))


def respond(parsed: AskParsed, outcome: Outcome, model: str) -> AskAnswer:
    [result] = outcome.results
    assert isinstance(result, Distribution)
    return AskAnswer(yes=result.probabilities[0])


STATUS = {"invalid_request": 400, "unknown_model": 400, "overloaded": 509, "not_ready": 503}


def status_of(exc: OpenJevError) -> int:
    return STATUS.get(exc.error_type, 500)


def problem(status: int, kind: str, message: str) -> ProblemBody:
    return ProblemBody(Problem(kind=kind, message=message))


def complete(schemas: Schemas, limits: Limits, models: Collection[str]) -> None:
    schemas[AskRequest.__name__]["properties"]["model"]["enum"] = sorted(models)


ASK = ContractSpec(
    name="ask",
    path="/v1/ask",
    request_type=AskRequest,
    response_type=AskAnswer,
    parse=parse,
    respond=respond,
    errors=ErrorWire(status_of, lambda exc, message: problem(0, exc.error_type, message), problem),
    openapi=OpenAPIOperation(
        tag="Ask",
        summary="Ask one yes/no question",
        description="The toy contract of the registry test.",
        operation_id="Ask",
        examples={"hello": Example("A greeting", {"model": "openjev/fake", "text": "hi", "question": "Polite?"})},
        errors={400: ErrorDoc("Invalid request.", ProblemBody), 509: ErrorDoc("Overloaded.", ProblemBody)},
        error_body=ProblemBody,
        components=(AskRequest,),
        complete=complete,
    ),
    limit_names=LimitNames(questions="question", options=()),
    request_id_header="x-ask-request-id",
)
REQUEST = {"model": "openjev/fake", "text": "Thanks a lot!", "question": "Is the user polite?"}


@asynccontextmanager
async def serving(**settings: Any) -> AsyncIterator[AsyncTestClient[Litestar]]:
    app = create_app(load_settings({"OPENJEV_BACKEND": "fake"}, **settings), contracts=(*CONTRACTS, ASK))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if (await client.get("/health")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        yield client


async def test_a_registered_contract_is_routed_answered_and_counted() -> None:
    async with serving() as client:
        answer = await client.post("/v1/ask", json=REQUEST)
        assert answer.status_code == 200
        assert 0.0 < answer.json()["yes"] < 1.0
        assert answer.headers["x-ask-request-id"] == answer.headers["x-typesafe-request-id"]
        assert "x-openjev-prefix-tokens" in answer.headers
        other = await client.get("/v1/models")
        assert other.headers["x-ask-request-id"] == other.headers["x-request-id"]  # every response carries it
        metrics = (await client.get("/metrics")).text
        assert 'openjev_answered_requests_total{contract="ask"} 1.0' in metrics
        assert 'openjev_answered_requests_total{contract="systemone"} 0.0' in metrics
        limits = (await client.get("/v1/limits")).json()["contracts"]
        assert limits["ask"] == {"route": "/v1/ask", "questions": "question", "options": []}
        assert set(limits) == {"systemone", "decisions", "ask"}


async def test_its_errors_are_in_its_own_shape_and_its_overload_is_counted() -> None:
    async with serving(max_concurrent_requests=1) as client:
        invalid = await client.post("/v1/ask", json={"model": "openjev/fake"})
        assert invalid.status_code == 400 and invalid.json()["problem"]["kind"] == "invalid_request"
        unknown = await client.post("/v1/ask", json={**REQUEST, "model": "nope"})
        assert unknown.status_code == 400 and unknown.json()["problem"]["kind"] == "unknown_model"
        with client.app.state.service.admission.slot():
            busy = await client.post("/v1/ask", json=REQUEST)
        assert busy.status_code == 509 and busy.headers["retry-after"] == "1"
        assert busy.json() == {"problem": {"kind": "overloaded", "message": busy.json()["problem"]["message"]}}
        assert "openjev_overloaded_responses_total 1.0" in (await client.get("/metrics")).text
        unrouted = await client.get("/nowhere")  # the routes of no contract keep the first contract's shape
        assert unrouted.status_code == 404 and "detail" in unrouted.json()


async def test_its_operation_and_schema_are_in_the_document() -> None:
    async with serving(api_key="k") as client:
        document = (await client.get("/openapi.json")).json()
    operation = document["paths"]["/v1/ask"]["post"]
    assert operation["operationId"] == "Ask" and operation["tags"] == ["Ask"]
    body = operation["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/AskRequest"}
    assert body["examples"]["hello"]["value"]["question"] == "Polite?"
    assert {"200", "400", "401", "509"} <= set(operation["responses"])
    assert operation["responses"]["401"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ProblemBody"
    }
    assert operation["security"] == [{"bearerKey": []}]
    schemas = document["components"]["schemas"]
    assert schemas["AskRequest"]["properties"]["model"]["enum"] == ["openjev/fake"]  # completed by the spec
    assert {"AskAnswer", "ProblemBody", "SystemOneRequest", "DecisionRequest"} <= set(schemas)
