"""System One's OpenAPI operation: its example, its documented errors, and its schema completed with the limits.

The request's msgspec schema only has static types; a schema-valid request must be accepted, so
the schema is completed with the limits in force (question and option counts), the model names
this server answers to and the field it refuses (`assets`). Components are named by their types,
so renaming a type cannot leave this module patching a component that no longer exists.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, get_args

from openjev.contracts.models import JEV_ALIAS
from openjev.contracts.spec import ErrorDoc, Example, OpenAPIOperation, Schemas, bound_option_count
from openjev.contracts.systemone.errors import ErrorBody, ValidationErrorBody
from openjev.contracts.systemone.wire import Question, SystemOneRequest
from openjev.domain.kinds import KINDS
from openjev.domain.limits import Limits
from openjev.domain.validation import MAX_JSON_DEPTH

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

ERRORS: dict[int, ErrorDoc] = {
    400: ErrorDoc("Unknown model (`detail.error_type: unknown_model`).", ErrorBody),
    413: ErrorDoc("Body (or its decompressed form) over the size limit (`request_too_large`).", ErrorBody),
    415: ErrorDoc("Unsupported Content-Encoding (identity, gzip and zstd are accepted).", ErrorBody),
    422: ErrorDoc("Invalid request: `detail` is a list of `{loc, msg, type}`.", ValidationErrorBody),
    502: ErrorDoc("The backend answered wrongly (`backend_error`).", ErrorBody),
    503: ErrorDoc("Still starting or backend unavailable (`not_ready`), with Retry-After.", ErrorBody),
    504: ErrorDoc("The backend did not answer before the request deadline (`timeout`).", ErrorBody),
    529: ErrorDoc("Overloaded (`overloaded`), with Retry-After.", ErrorBody),
}


def complete(schemas: Schemas, limits: Limits, models: Collection[str]) -> None:
    """The request's components, completed in place with the limits and model names in force."""
    request = schemas[SystemOneRequest.__name__]["properties"]
    request["model"] = {
        "type": "string",
        "enum": sorted({JEV_ALIAS, *models}),
        "description": "The served model, or its alias `jev-latest`; any other name is a 400.",
        "examples": [JEV_ALIAS],
    }
    questions = request["questions"]
    questions["description"] = f"Question id -> question (1 to {limits.max_questions}; ids are non-empty)."
    questions["minProperties"] = 1
    questions["maxProperties"] = limits.max_questions
    questions["propertyNames"] = {"minLength": 1}
    request["assets"] = {"type": "null", "description": "Not supported: only text input is accepted."}
    request["state"]["description"] += f" JSON values nest at most {MAX_JSON_DEPTH} levels."
    for question in get_args(Question):  # every kind with a number of options: its criteria
        if KINDS[question.kind].noun is not None:
            bound_option_count(schemas[question.__name__]["properties"]["criteria"], limits)


OPERATION = OpenAPIOperation(
    tag="System One",
    summary="Answer typed questions",
    description="Answer each question with a probability distribution read from the model's first answer token.",
    operation_id="V1SystemoneSystemOne",
    examples={"support_ticket": Example("The specification's example", EXAMPLE_REQUEST)},
    errors=ERRORS,
    error_body=ErrorBody,
    components=(SystemOneRequest,),
    complete=complete,
)
