"""What the generated OpenAPI document cannot know by itself: the settings this server runs with.

The requests' msgspec schemas only have static types. A schema-valid request must be accepted, so
the document is completed with the limits in force (question and option counts), the model names
this server answers to, the fields it refuses (System One's `assets`; images, which the Decisions
types allow but openjev refuses, are left out of its schema), the Decisions `input` items, the
bearer key when one is configured (a security scheme and a 401 on the guarded operations, none
otherwise) and the 503 of /health.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from openjev.contracts.decisions.wire import ITEMS, MESSAGES
from openjev.domain.limits import Limits
from openjev.domain.validation import JEV_ALIAS, MAX_JSON_DEPTH

SECURITY_SCHEME = "bearerKey"
GUARDED_PATHS = ("/v1/systemone", "/v1/decisions", "/v1/models", "/v1/limits")
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_OPENAI_ERROR_REF = {"$ref": "#/components/schemas/OpenAIErrorBody"}
_REF = "#/components/schemas/{name}"
_REFUSED = "InputImage"  # only text is supported: an image part is always refused


def complete_document(
    document: dict[str, Any], *, limits: Limits, models: Collection[str], keyed: bool
) -> dict[str, Any]:
    """`document` (Litestar's, with the request components added), completed in place and returned."""
    schemas: dict[str, Any] = document["components"]["schemas"]
    _complete_request(schemas, limits, models)
    _complete_decisions(schemas, limits, models)
    paths: dict[str, Any] = document["paths"]
    for path in GUARDED_PATHS:
        for operation in paths.get(path, {}).values():
            responses: dict[str, Any] = operation["responses"]
            if keyed:
                operation["security"] = [{SECURITY_SCHEME: []}]
                body = _OPENAI_ERROR_REF if path == "/v1/decisions" else _ERROR_REF
                responses["401"] = _error("Missing or wrong bearer key (`authentication_error`).", body)
            else:
                responses.pop("401", None)
    if keyed:
        document["components"]["securitySchemes"] = {
            SECURITY_SCHEME: {
                "type": "http",
                "scheme": "bearer",
                "description": "The server's OPENJEV_API_KEY, sent as `Authorization: Bearer <key>`.",
            }
        }
    paths["/health"]["get"]["responses"]["503"] = {
        "description": "Starting, failed to start, or the backend is down; the body says which.",
        "headers": {"Retry-After": {"schema": {"type": "string"}, "description": "Seconds to wait."}},
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HealthReport"}}},
    }
    return document


def _complete_request(schemas: dict[str, Any], limits: Limits, models: Collection[str]) -> None:
    request = schemas["SystemOneRequest"]["properties"]
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
    options = {"minProperties": limits.min_options, "maxProperties": limits.max_options}
    schemas["ChoiceQuestion"]["properties"]["criteria"].update(options)
    levels = {"minItems": limits.min_options, "maxItems": limits.max_options}
    schemas["ScoreQuestion"]["properties"]["criteria"].update(levels)


def input_item_components() -> dict[str, Any]:
    """The schemas of the Decisions `input` items, which the request decodes one by one."""
    _, components = msgspec.json.schema_components([*MESSAGES.values(), *ITEMS.values()], ref_template=_REF)
    return components


def _complete_decisions(schemas: dict[str, Any], limits: Limits, models: Collection[str]) -> None:
    request = schemas["DecisionRequest"]["properties"]
    request["model"] = {
        "type": "string",
        "enum": sorted({JEV_ALIAS, *models}),
        "description": "The served model, or an alias /v1/models lists; any other name is a 404 `model_not_found`.",
        "examples": [JEV_ALIAS],
    }
    items = [{"$ref": _REF.format(name=cls.__name__)} for cls in (*MESSAGES.values(), *ITEMS.values())]
    request["input"] = {
        "description": (
            "A text, or an ordered array of messages, tool calls and tool outputs; every tool output answers "
            "an earlier call of its kind by `call_id`."
        ),
        "anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"anyOf": items}}],
    }
    questions = request["questions"]
    questions["minItems"] = 1
    questions["maxItems"] = limits.max_questions
    options = {"minItems": limits.min_options, "maxItems": limits.max_options}
    schemas["Choice"]["properties"]["choices"].update(options)
    schemas["Score"]["properties"]["levels"].update(options)
    for schema in schemas.values():
        _drop_ref(schema, _REFUSED)
    schemas.pop(_REFUSED, None)


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


def _error(description: str, body: dict[str, str] = _ERROR_REF) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": body}}}
