"""The OpenAPI document and the two UIs (Scalar at /, Swagger at /docs), with pinned asset versions.

The System One route decodes its body itself (strict, single pass, with inflation limits), so
Litestar cannot see its request schema: it is added here from the msgspec types, with the spec's
example as the editable request in Scalar.
"""

from __future__ import annotations

import functools
from typing import Any

import msgspec

from openjev.domain.wire import SystemOneRequest, SystemOneResponse

SCALAR_VERSION = "1.76.0"
SWAGGER_VERSION = "5.35.0"
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

_ERRORS = {
    "400": "Unknown model (`detail.error_type: unknown_model`).",
    "401": "Missing or wrong bearer key, when the server has one (`authentication_error`).",
    "413": "Body (or its decompressed form) over the size limit (`request_too_large`).",
    "415": "Unsupported Content-Encoding (identity, gzip and zstd are accepted).",
    "422": "Invalid request: `detail` is a list of `{loc, msg, type}`.",
    "502": "The backend answered wrongly (`backend_error`).",
    "503": "Still starting or backend unavailable (`not_ready`), with Retry-After.",
    "504": "The backend did not answer before the request deadline (`timeout`).",
    "529": "Overloaded (`overloaded`), with Retry-After.",
}


def patch_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the System One request/response schemas and error responses to Litestar's document."""
    _, components = msgspec.json.schema_components(
        [SystemOneRequest, SystemOneResponse], ref_template="#/components/schemas/{name}"
    )
    schema.setdefault("components", {}).setdefault("schemas", {}).update(components)
    operation = schema["paths"]["/v1/systemone"]["post"]
    operation["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/SystemOneRequest"},
                "examples": {"support_ticket": {"summary": "The spec's example", "value": EXAMPLE_REQUEST}},
            }
        },
    }
    operation["responses"]["200"] = {
        "description": "One answer per question.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SystemOneResponse"}}},
        "headers": {
            "x-typesafe-request-id": {"schema": {"type": "string"}},
            "x-openjev-prefix-tokens": {"schema": {"type": "integer"}},
            "x-openjev-cached-tokens": {"schema": {"type": "integer"}, "description": "Absent when unknown."},
            "Server-Timing": {"schema": {"type": "string"}},
        },
    }
    for status, description in _ERRORS.items():
        operation["responses"].setdefault(status, {"description": description})
        operation["responses"][status]["description"] = description
    return schema


@functools.lru_cache(maxsize=1)
def scalar_page(title: str) -> bytes:
    config = msgspec.json.encode({"url": OPENAPI_PATH, "hideDownloadButton": False}).decode()
    return f"""<!doctype html>
<html>
  <head>
    <title>{title}</title>
    <meta charset="utf-8"/>
    <meta name="viewport" content="width=device-width, initial-scale=1"/>
  </head>
  <body>
    <script id="api-reference" data-url="{OPENAPI_PATH}" data-configuration='{config}'></script>
    <script src="https://cdn.jsdelivr.net/npm/@scalar/api-reference@{SCALAR_VERSION}" crossorigin></script>
  </body>
</html>
""".encode()


@functools.lru_cache(maxsize=1)
def swagger_page(title: str) -> bytes:
    base = f"https://cdn.jsdelivr.net/npm/swagger-ui-dist@{SWAGGER_VERSION}"
    return f"""<!doctype html>
<html>
  <head>
    <title>{title}</title>
    <meta charset="utf-8"/>
    <link rel="stylesheet" href="{base}/swagger-ui.css"/>
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="{base}/swagger-ui-bundle.js" crossorigin></script>
    <script>
      window.ui = SwaggerUIBundle({{url: "{OPENAPI_PATH}", dom_id: "#swagger-ui", tryItOutEnabled: true}});
    </script>
  </body>
</html>
""".encode()
