"""The Decisions OpenAPI operation: its examples, its documented errors, and its schema completed with the limits.

The request decodes its `input` items one by one, so their schemas are added as components of
their own and `input` is described as a text or an array of them. Images, which the Decisions
types allow but openjev refuses, are left out of the schema. Components are named by their types,
so renaming a type cannot leave this module patching a component that no longer exists.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, get_args

from openjev.contracts.decisions.errors import OpenAIErrorBody
from openjev.contracts.decisions.wire import ITEMS, MESSAGES, DecisionExample, DecisionRequest, InputImage, Question
from openjev.contracts.models import JEV_ALIAS
from openjev.contracts.spec import ErrorDoc, Example, OpenAPIOperation, Schemas, bound_option_count
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.kinds import KINDS
from openjev.domain.limits import Limits

_REF = "#/components/schemas/{name}"
INPUT_ITEMS: tuple[type, ...] = (*MESSAGES.values(), *ITEMS.values())

# The same decision as System One's example, on the Decisions wire: it gets the same probabilities.
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

ERRORS: dict[int, ErrorDoc] = {
    400: ErrorDoc("Invalid request (`error.type: invalid_request_error`, `param` names the field).", OpenAIErrorBody),
    404: ErrorDoc("A model this server does not serve (`error.code: model_not_found`).", OpenAIErrorBody),
    413: ErrorDoc("Body (or its decompressed form) over the size limit (`request_too_large`).", OpenAIErrorBody),
    415: ErrorDoc("Unsupported Content-Type or Content-Encoding.", OpenAIErrorBody),
    429: ErrorDoc(
        "Overloaded: the admission limit is reached (`rate_limit_exceeded`), with Retry-After.", OpenAIErrorBody
    ),
    502: ErrorDoc("The backend answered wrongly (`backend_error`).", OpenAIErrorBody),
    503: ErrorDoc("Still starting or backend unavailable (`not_ready`), with Retry-After.", OpenAIErrorBody),
    504: ErrorDoc("The backend did not answer before the request deadline (`timeout`).", OpenAIErrorBody),
}


def complete(schemas: Schemas, limits: Limits, models: Collection[str]) -> None:
    """The request's components, completed in place with the limits and model names in force."""
    request = schemas[DecisionRequest.__name__]["properties"]
    request["model"] = {
        "type": "string",
        "enum": sorted({JEV_ALIAS, *models}),
        "description": "The served model, or an alias /v1/models lists; any other name is a 404 `model_not_found`.",
        "examples": [JEV_ALIAS],
    }
    items = [{"$ref": _REF.format(name=cls.__name__)} for cls in INPUT_ITEMS]
    text_or_items = [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"anyOf": items}}]
    request["input"] = {
        "description": (
            "A text, or an ordered array of messages, tool calls and tool outputs; every tool output answers "
            "an earlier call of its kind by `call_id`."
        ),
        "anyOf": text_or_items,
    }
    example = schemas[DecisionExample.__name__]["properties"]["input"]
    example["anyOf"] = text_or_items  # a worked example's case is read as the request's `input` is
    example.pop("type", None)
    questions = request["questions"]
    questions["minItems"] = 1
    questions["maxItems"] = limits.max_questions
    for question in get_args(Question):  # every kind with a number of options: its options field
        if KINDS[question.kind].noun is not None:
            bound_option_count(schemas[question.__name__]["properties"][question.options_field], limits)
    for schema in schemas.values():
        _drop_ref(schema, InputImage.__name__)
    schemas.pop(InputImage.__name__, None)


def _drop_ref(schema: Any, name: str) -> None:
    """Take `name` out of every union (and discriminator) inside `schema`, in place."""
    if isinstance(schema, dict):
        ref = _REF.format(name=name)
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list):
                schema[key] = [option for option in schema[key] if option != {"$ref": ref}]
        mapping = schema.get("discriminator", {}).get("mapping")
        if isinstance(mapping, dict):
            for tag in [tag for tag, target in mapping.items() if target == ref]:
                del mapping[tag]
        for value in schema.values():
            _drop_ref(value, name)
    elif isinstance(schema, list):
        for value in schema:
            _drop_ref(value, name)


OPERATION = OpenAPIOperation(
    tag="Decisions",
    summary="Answer typed questions (OpenAI Decisions API)",
    description=(
        "OpenAI's Decisions API on the same use case: the same question gets the same probabilities as on System One."
    ),
    operation_id="V1DecisionsDecisions",
    examples={
        "support_ticket": Example("The System One example, on this wire", DECISIONS_EXAMPLE),
        "agent_action": Example("Should this proposed tool call run?", AGENT_EXAMPLE),
    },
    errors=ERRORS,
    error_body=OpenAIErrorBody,
    components=(DecisionRequest, *INPUT_ITEMS),
    complete=complete,
)
