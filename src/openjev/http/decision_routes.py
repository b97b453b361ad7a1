"""The decision routes, one per contract: each translates its wire to the core and back, nothing else.

Everything between the body and the outcome (admission, offload, timings, disconnect, metrics) is
`orchestration.decide`; each route only names its contract's parser and response builder.
"""

from __future__ import annotations

from litestar import Request, Response, post
from litestar.datastructures import State

from openjev.contracts import systemone
from openjev.contracts.systemone.wire import SystemOneResponse
from openjev.http.lifecycle import AppState
from openjev.http.openapi_docs import SYSTEM_ONE_HEADERS, SYSTEM_ONE_RESPONSES, SystemOneOperation
from openjev.http.orchestration import decide


@post(
    "/v1/systemone",
    status_code=200,
    tags=["System One"],
    summary="Answer typed questions",
    operation_class=SystemOneOperation,
    responses=SYSTEM_ONE_RESPONSES,
    response_headers=SYSTEM_ONE_HEADERS,
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

