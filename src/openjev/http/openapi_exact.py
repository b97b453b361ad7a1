"""What the generated OpenAPI document cannot know by itself: the settings this server runs with.

The request's msgspec schema only has static types. A schema-valid request must be accepted, so the
document is completed with the limits in force (question and option counts), the model names this
server answers to, the fields it refuses (`assets`), the bearer key when one is configured (a
security scheme and a 401 on the guarded operations, none otherwise) and the 503 of /health.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from openjev.domain.limits import Limits
from openjev.domain.validation import JEV_ALIAS, MAX_JSON_DEPTH

SECURITY_SCHEME = "bearerKey"
GUARDED_PATHS = ("/v1/systemone", "/v1/models", "/v1/limits")
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


def complete_document(
    document: dict[str, Any], *, limits: Limits, models: Collection[str], keyed: bool
) -> dict[str, Any]:
    """`document` (Litestar's, with the request components added), completed in place and returned."""
    schemas: dict[str, Any] = document["components"]["schemas"]
    _complete_request(schemas, limits, models)
    paths: dict[str, Any] = document["paths"]
    for path in GUARDED_PATHS:
        for operation in paths.get(path, {}).values():
            responses: dict[str, Any] = operation["responses"]
            if keyed:
                operation["security"] = [{SECURITY_SCHEME: []}]
                responses["401"] = _error("Missing or wrong bearer key (`authentication_error`).")
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


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}
