"""The OpenAPI document at /openapi.json (the UIs on it are in `docs_pages`).

The decision routes read their bodies themselves (strict, single pass, with inflation limits), so
their request bodies are described by `SystemOneOperation` and `DecisionsOperation` (Litestar's
`operation_class`) and their error responses by `ResponseSpec`s. The requests' msgspec schema
components are added to the document once, because Litestar only generates components for types a
handler receives.

The document is served by Litestar's schema router, mounted at /openapi.json (nothing is served at
/schema); `openapi_exact` completes it with the settings in force.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from litestar import Litestar, Request
from litestar.datastructures import ResponseHeader
from litestar.enums import OpenAPIMediaType as OpenAPIMediaTypeName
from litestar.openapi import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.openapi.spec import Example, OpenAPIMediaType, Operation, Reference, RequestBody

from openjev.contracts.decisions.wire import DecisionRequest
from openjev.contracts.systemone.wire import SystemOneRequest
from openjev.http.openapi_exact import complete_document, input_item_components
from openjev.http.schemas import ErrorBody, OpenAIErrorBody, ValidationErrorBody

TITLE = "openjev — System One and OpenAI Decisions APIs"
OPENAPI_PATH = "/openapi.json"

EXAMPLE_REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": [
        {"role": "system", "content": "You are a support assistant."},
        {"role": "user", "content": "I was charged twice. Please refund the duplicate."},
    ],
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the user request a refund?"},
        "department": {
            "type": "choice",
            "instructions": "Which department should handle this?",
            "criteria": {"billing": "Payments and refunds", "technical": "Software bugs"},
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is the request?",
            "criteria": ["Routine", "Urgent", "Emergency"],
        },
    },
}


# The same decision as EXAMPLE_REQUEST, on the Decisions wire: it gets the same probabilities.
DECISIONS_EXAMPLE: dict[str, Any] = {
    "model": "jev-latest",
    "input": EXAMPLE_REQUEST["state"],
    "questions": [
        {"type": "predicate", "name": "refund", "instructions": "Does the user request a refund?"},
        {
            "type": "choice",
            "name": "department",
            "instructions": "Which department should handle this?",
            "choices": [
                {"value": "billing", "description": "Payments and refunds"},
                {"value": "technical", "description": "Software bugs"},
            ],
        },
        {
            "type": "score",
            "name": "urgency",
            "instructions": "How urgent is the request?",
            "levels": [{"label": "Routine"}, {"label": "Urgent"}, {"label": "Emergency"}],
        },
    ],
}
AGENT_EXAMPLE: dict[str, Any] = {
    "model": "jev-latest",
    "input": [
        {"role": "developer", "content": "You are the deploy agent. Production changes need a human."},
        {"role": "user", "content": "Clean up the old backups."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "run_shell",
            "arguments": '{"command": "gsutil -m rm -r gs://prod-backups/2024-*"}',
        },
    ],
    "questions": [
        {
            "type": "choice",
            "name": "action",
            "instructions": "How should the proposed tool call be handled?",
            "choices": [
                {"value": "run", "description": "Safe: run it"},
                {"value": "ask", "description": "Needs a human's approval first"},
                {"value": "block", "description": "Destructive on production: refuse"},
            ],
        }
    ],
}


def _json_body(component: str, examples: dict[str, Example | Reference]) -> RequestBody:
    return RequestBody(
        required=True,
        content={
            "application/json": OpenAPIMediaType(
                schema=Reference(ref=f"#/components/schemas/{component}"), examples=examples
            )
        },
    )


@dataclass
class SystemOneOperation(Operation):
    """The System One operation, with the request body its handler decodes itself."""

    def __post_init__(self) -> None:
        self.request_body = _json_body(
            "SystemOneRequest",
            {"support_ticket": Example(summary="The specification's example", value=EXAMPLE_REQUEST)},
        )


@dataclass
class DecisionsOperation(Operation):
    """The OpenAI Decisions operation, with the request body its handler decodes itself."""

    def __post_init__(self) -> None:
        self.request_body = _json_body(
            "DecisionRequest",
            {
                "support_ticket": Example(summary="The System One example, on this wire", value=DECISIONS_EXAMPLE),
                "agent_action": Example(summary="Should this proposed tool call run?", value=AGENT_EXAMPLE),
            },
        )


def _error(description: str, body: type[msgspec.Struct] = ErrorBody) -> ResponseSpec:
    return ResponseSpec(data_container=body, description=description, generate_examples=False)


SYSTEM_ONE_RESPONSES: dict[int, ResponseSpec] = {
    400: _error("Unknown model (`detail.error_type: unknown_model`)."),
    413: _error("Body (or its decompressed form) over the size limit (`request_too_large`)."),
    415: _error("Unsupported Content-Encoding (identity, gzip and zstd are accepted)."),
    422: _error("Invalid request: `detail` is a list of `{loc, msg, type}`.", ValidationErrorBody),
    502: _error("The backend answered wrongly (`backend_error`)."),
    503: _error("Still starting or backend unavailable (`not_ready`), with Retry-After."),
    504: _error("The backend did not answer before the request deadline (`timeout`)."),
    529: _error("Overloaded (`overloaded`), with Retry-After."),
}

DECISIONS_RESPONSES: dict[int, ResponseSpec] = {
    400: _error("Invalid request (`error.type: invalid_request_error`, `param` names the field).", OpenAIErrorBody),
    404: _error("A model this server does not serve (`error.code: model_not_found`).", OpenAIErrorBody),
    413: _error("Body (or its decompressed form) over the size limit (`request_too_large`).", OpenAIErrorBody),
    415: _error("Unsupported Content-Type or Content-Encoding.", OpenAIErrorBody),
    429: _error(
        "Overloaded: the admission limit is reached (`rate_limit_exceeded`), with Retry-After.", OpenAIErrorBody
    ),
    502: _error("The backend answered wrongly (`backend_error`).", OpenAIErrorBody),
    503: _error("Still starting or backend unavailable (`not_ready`), with Retry-After.", OpenAIErrorBody),
    504: _error("The backend did not answer before the request deadline (`timeout`).", OpenAIErrorBody),
}

DECISION_HEADERS = [  # documented only: the handler sets them (a header's schema follows its example value)
    ResponseHeader(name="x-typesafe-request-id", value="", documentation_only=True, description="A fresh id."),
    ResponseHeader(name="x-request-id", value="", documentation_only=True, description="The same id (OpenAI's name)."),
    ResponseHeader(
        name="x-openjev-prefix-tokens", value="", documentation_only=True, description="Tokens in the shared prefix."
    ),
    ResponseHeader(
        name="x-openjev-cached-tokens",
        value="",
        documentation_only=True,
        description="Prompt tokens the backend took from its cache, summed over the branches; absent when unknown.",
    ),
    ResponseHeader(name="Server-Timing", value="", documentation_only=True, description="prepare, prefill, branches."),
]


def openapi_document(app: Litestar) -> dict[str, Any]:
    """Litestar's document plus the request's schema components and the settings in force; built once per app."""
    cached: dict[str, Any] | None = getattr(app.state, "openapi_document", None)
    if cached is None:
        cached = app.openapi_schema.to_schema()
        _, components = msgspec.json.schema_components(
            [SystemOneRequest, DecisionRequest], ref_template="#/components/schemas/{name}"
        )
        schemas = cached.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(components)
        schemas.update(input_item_components())
        service = app.state.service
        complete_document(
            cached,
            limits=service.limits,
            models=service.accepted_models,
            keyed=service.settings.api_key is not None,
        )
        app.state.openapi_document = cached
    return cached


class DocumentPlugin(JsonRenderPlugin):
    """Litestar's own schema route, serving the completed document at /openapi.json and nothing at /schema.

    Litestar always mounts a schema router; mounted at /openapi.json with this plugin at its root,
    it serves the one document there (anything below it is a 404).
    """

    def __init__(self) -> None:
        super().__init__(path="/", media_type=OpenAPIMediaTypeName.OPENAPI_JSON)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        return msgspec.json.encode(openapi_document(request.app))


def document_config(title: str, version: str, description: str) -> OpenAPIConfig:
    return OpenAPIConfig(
        title=title,
        version=version,
        description=description,
        path=OPENAPI_PATH,
        render_plugins=[DocumentPlugin()],
    )
