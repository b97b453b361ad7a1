"""The decision routes, one per registered contract: each translates its wire to the core and back, nothing else.

Everything between the body and the outcome (admission, offload, timings, disconnect, metrics) is
`orchestration.decide`; a route only applies its contract's parser and response builder, and
answers errors in its contract's shape. Its OpenAPI operation (request body, examples, error
responses) comes from the contract's spec too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import ResponseHeader, State
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Example, OpenAPIMediaType, Operation, Reference, RequestBody

from openjev.contracts.spec import ContractSpec
from openjev.http.errors import error_handlers
from openjev.http.lifecycle import AppState
from openjev.http.orchestration import decide


def decision_route(spec: ContractSpec[Any], contracts: Sequence[ContractSpec[Any]]) -> HTTPRouteHandler:
    """`POST spec.path`: the contract's request in, its answer (or its error) out.

    `contracts`: every served contract; the response carries the request id under each one's name.
    """

    async def handler(request: Request[None, None, State], state: AppState) -> Response[Any]:
        service = state.service
        parsed, decided = await decide(
            request,
            service,
            lambda body: spec.parse(body, service.limits, service.accepted_models),
            contract=spec.name,
        )
        return Response(
            content=spec.respond(parsed, decided.outcome, service.runtime.public_model), headers=decided.headers()
        )

    # Litestar reads the signature for its parameters and the response schema: the types, not strings.
    handler.__annotations__ = {
        "request": Request[None, None, State],
        "state": AppState,
        "return": Response[spec.response_type],  # type: ignore[name-defined]
    }
    handler.__name__ = handler.__qualname__ = spec.name
    doc = spec.openapi
    handler.__doc__ = doc.description
    return post(
        spec.path,
        status_code=200,
        tags=[doc.tag],
        summary=doc.summary,
        operation_id=doc.operation_id,
        operation_class=_operation_class(spec),
        responses={
            status: ResponseSpec(data_container=error.body, description=error.description, generate_examples=False)
            for status, error in doc.errors.items()
        },
        response_headers=_decision_headers(contracts),
        exception_handlers=error_handlers(spec.errors),
    )(handler)


def _operation_class(spec: ContractSpec[Any]) -> type[Operation]:
    """The operation, with the request body its handler decodes itself (Litestar's `operation_class`)."""
    doc = spec.openapi
    examples: dict[str, Example | Reference] = {
        name: Example(summary=example.summary, value=dict(example.value)) for name, example in doc.examples.items()
    }
    body = RequestBody(
        required=True,
        content={
            "application/json": OpenAPIMediaType(
                schema=Reference(ref=f"#/components/schemas/{spec.request_type.__name__}"), examples=examples
            )
        },
    )

    @dataclass
    class ContractOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = body

    return ContractOperation


def _decision_headers(contracts: Sequence[ContractSpec[Any]]) -> list[ResponseHeader]:
    """Documented only: the handler sets them (a header's schema follows its example value)."""
    described: dict[str, str] = {}
    for spec in contracts:
        described.setdefault(spec.request_id_header, spec.request_id_description)
    ids = [
        ResponseHeader(name=name, value="", documentation_only=True, description=description)
        for name, description in described.items()
    ]
    return [
        *ids,
        ResponseHeader(
            name="x-openjev-prefix-tokens",
            value="",
            documentation_only=True,
            description="Tokens in the shared prefix.",
        ),
        ResponseHeader(
            name="x-openjev-cached-tokens",
            value="",
            documentation_only=True,
            description="Prompt tokens the backend took from its cache, summed over the branches; absent when unknown.",
        ),
        ResponseHeader(
            name="Server-Timing", value="", documentation_only=True, description="prepare, prefill, branches."
        ),
    ]
