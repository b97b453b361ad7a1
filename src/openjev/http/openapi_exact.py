"""What the generated OpenAPI document cannot know by itself: the settings this server runs with.

Each contract completes its own request schemas (limits, model names, refused fields: its spec's
`openapi.complete`). Here: the bearer key when one is configured (a security scheme and a 401 on
the guarded operations, none otherwise) and the 503 of /health. Components are referred to by
their types' names, never by a hard-coded name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from openjev.contracts.spec import ContractSpec
from openjev.domain.limits import Limits
from openjev.http.schemas import HealthReport

SECURITY_SCHEME = "bearerKey"


def _ref(cls: type) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{cls.__name__}"}


def complete_document(
    document: dict[str, Any],
    *,
    contracts: Sequence[ContractSpec[Any]],
    guarded: Mapping[str, type],
    limits: Limits,
    models: Collection[str],
    keyed: bool,
) -> dict[str, Any]:
    """`document` (Litestar's, with the request components added), completed in place and returned.

    `guarded`: the paths behind the bearer key, each with the type of its error body.
    """
    schemas: dict[str, Any] = document["components"]["schemas"]
    for spec in contracts:
        spec.openapi.complete(schemas, limits, models)
    paths: dict[str, Any] = document["paths"]
    for path, error_body in guarded.items():
        for operation in paths.get(path, {}).values():
            responses: dict[str, Any] = operation["responses"]
            if keyed:
                operation["security"] = [{SECURITY_SCHEME: []}]
                responses["401"] = _error("Missing or wrong bearer key (`authentication_error`).", error_body)
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
        "content": {"application/json": {"schema": _ref(HealthReport)}},
    }
    return document


def _error(description: str, body: type) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(body)}}}
