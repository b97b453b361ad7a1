"""The OpenAPI document at /openapi.json (the UIs on it are in `docs_pages`).

The decision routes read their bodies themselves (strict, single pass, with inflation limits), so
each contract's spec names its request's schema components; they are added to the document once,
because Litestar only generates components for types a handler receives. `openapi_exact` then
completes the document with the settings in force.

The document is served by Litestar's schema router, mounted at /openapi.json (nothing is served at
/schema).
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Litestar, Request
from litestar.enums import OpenAPIMediaType as OpenAPIMediaTypeName
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from openjev.contracts.decisions.openapi import AGENT_EXAMPLE, DECISIONS_EXAMPLE
from openjev.contracts.spec import ContractSpec
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.http.openapi_exact import complete_document

# The examples live with their contracts; re-exported here for the golden tests, which import them from here.
__all__ = ["AGENT_EXAMPLE", "DECISIONS_EXAMPLE", "EXAMPLE_REQUEST", "OPENAPI_PATH", "TITLE", "document_config"]

TITLE = "openjev — System One and OpenAI Decisions APIs"
OPENAPI_PATH = "/openapi.json"
_REF = "#/components/schemas/{name}"


def openapi_document(app: Litestar) -> dict[str, Any]:
    """Litestar's document plus the requests' schema components and the settings in force; built once per app."""
    cached: dict[str, Any] | None = getattr(app.state, "openapi_document", None)
    if cached is None:
        cached = app.openapi_schema.to_schema()
        schemas = cached.setdefault("components", {}).setdefault("schemas", {})
        contracts: tuple[ContractSpec[Any], ...] = app.state.contracts
        for spec in contracts:
            _, components = msgspec.json.schema_components(spec.openapi.components, ref_template=_REF)
            schemas.update(components)
        service = app.state.service
        complete_document(
            cached,
            contracts=contracts,
            guarded=app.state.guarded_paths,
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
