"""The decision routes, one per contract: each translates its wire to the core and back, nothing else.

Everything between the body and the outcome (admission, offload, timings, disconnect, metrics) is
`orchestration.decide`; each route only names its contract's parser and response builder.
"""

from __future__ import annotations

from litestar import Request, Response, post
from litestar.datastructures import State

from openjev.contracts import decisions as openai_decisions
from openjev.contracts import systemone
from openjev.contracts.decisions import errors as decisions_errors
from openjev.contracts.decisions.wire import Decision
from openjev.contracts.systemone.wire import SystemOneResponse
from openjev.http.errors import ErrorWire, error_handlers
from openjev.http.lifecycle import AppState
from openjev.http.openapi_docs import (
    DECISION_HEADERS,
    DECISIONS_RESPONSES,
    SYSTEM_ONE_RESPONSES,
    DecisionsOperation,
    SystemOneOperation,
)
from openjev.http.orchestration import decide

DECISIONS_ERRORS = ErrorWire(decisions_errors.status_of, decisions_errors.error_body, decisions_errors.plain_body)
DECISIONS_PATH = "/v1/decisions"  # every error under it is in OpenAI's envelope, those before routing too


@post(
    "/v1/systemone",
    status_code=200,
    tags=["System One"],
    summary="Answer typed questions",
    operation_class=SystemOneOperation,
    responses=SYSTEM_ONE_RESPONSES,
    response_headers=DECISION_HEADERS,
)
async def system_one(request: Request[None, None, State], state: AppState) -> Response[SystemOneResponse]:
    """Answer each question with a probability distribution read from the model's first answer token."""
    service = state.service
    parsed, decided = await decide(
        request,
        service,
        lambda body: systemone.parse(body, service.limits, service.accepted_models),
        contract="systemone",
    )
    return Response(
        content=systemone.respond(parsed, decided.outcome, service.runtime.public_model), headers=decided.headers()
    )


@post(
    DECISIONS_PATH,
    status_code=200,
    tags=["Decisions"],
    summary="Answer typed questions (OpenAI Decisions API)",
    operation_class=DecisionsOperation,
    responses=DECISIONS_RESPONSES,
    response_headers=DECISION_HEADERS,
    exception_handlers=error_handlers(DECISIONS_ERRORS),
)
async def decisions(request: Request[None, None, State], state: AppState) -> Response[Decision]:
    """OpenAI's Decisions API on the same use case: the same question gets the same probabilities as on System One."""
    service = state.service
    parsed, decided = await decide(
        request,
        service,
        lambda body: openai_decisions.parse(body, service.limits, service.accepted_models),
        contract="decisions",
    )
    return Response(
        content=openai_decisions.respond(parsed, decided.outcome, service.runtime.public_model),
        headers=decided.headers(),
    )
