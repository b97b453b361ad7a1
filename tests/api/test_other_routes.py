from __future__ import annotations

import asyncio
import re
from typing import Any

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.build import build_runtime
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.ports import BackendHealth
from openjev.http.app import create_app
from openjev.http.docs_pages import ASSETS, SCALAR_VERSION, SWAGGER_VERSION
from openjev.settings import load_settings
from tests.api.conftest import LOCAL, Client, running


async def test_models_in_both_shapes(client: Client) -> None:
    body = (await client.get("/v1/models")).json()
    names = [m["name"] for m in body["models"]]
    assert names == ["openjev/fake", "jev-latest"]
    assert all(m["release_date"] for m in body["models"])
    assert body["object"] == "list"
    assert [d["id"] for d in body["data"]] == names
    assert {d["object"] for d in body["data"]} == {"model"}


async def test_limits_lists_every_admission_limit(client: Client) -> None:
    body = (await client.get("/v1/limits")).json()
    assert body["limits"] == {
        "max_questions": 64,
        "min_options": 2,
        "max_options": 64,
        "max_body_bytes": 2 * 1024 * 1024,
        "max_input_tokens": 32768,
        "max_total_input_tokens": 262144,
        "max_concurrent_requests": 16,
        "max_concurrent_branches": 64,
        "request_timeout_seconds": 120.0,
        "max_examples": 32,
    }
    assert body["scope"] == "per API process"
    assert body["contracts"]["decisions"] == {
        "route": "/v1/decisions",
        "questions": "questions",
        "options": ["choices", "levels"],
    }
    assert body["contracts"]["systemone"]["options"] == ["criteria"]


async def test_one_limits_object_serves_the_routes_and_the_use_case(client: Client) -> None:
    service = client.app.state.service
    assert service.evaluator.limits is service.limits


async def test_health_is_ready_and_live(client: Client) -> None:
    health = (await client.get("/health")).json()
    assert health["status"] == "ready" and health["backend_ok"] is True and health["startup_seconds"] is not None
    assert (await client.get("/health/live")).json() == {"status": "alive"}


class _SlowStart(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def start(self) -> None:
        await self.release.wait()
        await super().start()


async def test_503_with_retry_after_while_starting() -> None:
    from dataclasses import replace

    from litestar.testing import AsyncTestClient

    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    backend = _SlowStart()
    app = create_app(settings, replace(build_runtime(settings), backend=backend))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        health = await client.get("/health")
        request = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        bad = await client.post("/v1/systemone", json={"model": "jev-latest"})
        live = await client.get("/health/live")
        backend.release.set()
        for _ in range(100):
            if (await client.get("/health")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        ready = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
    assert health.status_code == 503 and health.json()["status"] == "starting" and "retry-after" in health.headers
    assert request.status_code == 503 and request.json()["detail"]["error_type"] == "not_ready"
    assert request.headers["retry-after"]
    assert bad.status_code == 422  # a bad request never gets a 5xx, even while starting
    assert live.status_code == 200
    assert ready.status_code == 200


async def test_health_turns_503_when_the_backend_goes_away(client: Client) -> None:
    app: Any = client.app
    backend = app.state.service.runtime.backend
    backend.started = False
    response = await client.get("/health")
    assert response.status_code == 503 and response.json()["status"] == "backend_unavailable"
    backend.started = True
    assert (await client.get("/health")).status_code == 200


class _SlowHealth(FakeBackend):
    async def health(self) -> BackendHealth:
        return BackendHealth(ok=True, slow=True, detail="SGLang at X is slow: its /health has not answered for 3.0 s")


async def test_a_slow_backend_is_reported_as_slow_and_still_serves() -> None:
    """A backend that answers /health late is "slow": 200, not the 503 of a backend that is down."""
    from dataclasses import replace

    from litestar.testing import AsyncTestClient

    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    app = create_app(settings, replace(build_runtime(settings), backend=_SlowHealth()))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(100):
            response = await client.get("/health")
            if response.json()["status"] != "starting":
                break
            await asyncio.sleep(0.01)
    assert response.status_code == 200
    report = response.json()
    assert report["status"] == "ready" and report["backend_ok"] is True
    assert report["backend_state"] == "slow" and "is slow" in report["backend_detail"]


async def test_health_fields_stay_and_backend_state_is_added(client: Client) -> None:
    report = (await client.get("/health")).json()
    assert set(report) == {"status", "model", "backend", "backend_ok", "backend_detail", "startup_seconds",
                           "uptime_seconds", "backend_state"}  # fmt: skip
    assert report["backend_state"] == "ok"
    app: Any = client.app
    app.state.service.runtime.backend.started = False
    assert (await client.get("/health")).json()["backend_state"] == "down"


async def test_docs_pages_and_schema(client: Client) -> None:
    scalar = await client.get("/")
    swagger = await client.get("/docs")
    schema = (await client.get("/openapi.json")).json()
    assert scalar.status_code == 200 and f"/docs/assets/scalar-{SCALAR_VERSION}.js" in scalar.text
    assert 'data-url="/openapi.json"' in scalar.text
    assert swagger.status_code == 200 and f"/docs/assets/swagger-ui-{SWAGGER_VERSION}.js" in swagger.text
    body = schema["paths"]["/v1/systemone"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/SystemOneRequest"}
    assert body["examples"]["support_ticket"]["value"] == EXAMPLE_REQUEST
    assert "SystemOneResponse" in schema["components"]["schemas"]
    responses = set(schema["paths"]["/v1/systemone"]["post"]["responses"])
    assert {"200", "400", "413", "422", "503", "504", "529"} <= responses
    assert "401" not in responses and "securitySchemes" not in schema["components"]  # no key: no 401


async def test_the_document_states_the_limits_key_and_models_in_force() -> None:
    env = {"OPENJEV_API_KEY": "k", "OPENJEV_MAX_QUESTIONS": "5", "OPENJEV_MAX_OPTIONS": "7"}
    async with running(env) as client:
        schema = (await client.get("/openapi.json")).json()
        assert (await client.get("/schema")).status_code == 404  # one document only
        assert (await client.get("/schema/openapi.json")).status_code == 404
    components = schema["components"]
    assert components["securitySchemes"]["bearerKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": components["securitySchemes"]["bearerKey"]["description"],
    }
    for path in ("/v1/systemone", "/v1/models", "/v1/limits"):
        operation = next(iter(schema["paths"][path].values()))
        assert operation["security"] == [{"bearerKey": []}] and "401" in operation["responses"]
    assert "security" not in schema["paths"]["/health"]["get"]
    assert "503" in schema["paths"]["/health"]["get"]["responses"]
    request = components["schemas"]["SystemOneRequest"]["properties"]
    assert (request["questions"]["minProperties"], request["questions"]["maxProperties"]) == (1, 5)
    assert request["model"]["enum"] == ["jev-latest", "openjev/fake"]
    assert request["assets"]["type"] == "null"
    choice = components["schemas"]["ChoiceQuestion"]["properties"]["criteria"]
    score = components["schemas"]["ScoreQuestion"]["properties"]["criteria"]
    assert (choice["minProperties"], choice["maxProperties"], score["minItems"], score["maxItems"]) == (2, 7, 2, 7)


LOCAL_REFERENCE = re.compile(r'(?:src|href)="([^"]*)"')


async def test_docs_pages_use_only_assets_the_server_serves(client: Client) -> None:
    for page in ("/", "/docs"):
        response = await client.get(page)
        policy = response.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert "<script>" not in response.text  # no inline script: the policy allows none
        references = LOCAL_REFERENCE.findall(response.text)
        assert references and all(ref.startswith("/docs/assets/") for ref in references), references
        for ref in references:
            asset = await client.get(ref)
            assert asset.status_code == 200, ref
            expected = "text/css" if ref.endswith(".css") else "text/javascript"
            assert asset.headers["content-type"].startswith(expected)
            assert "immutable" in asset.headers["cache-control"]
    assert {f"scalar-{SCALAR_VERSION}.js", f"swagger-ui-{SWAGGER_VERSION}.js"} <= set(ASSETS)
    scalar = await client.get(f"/docs/assets/scalar-{SCALAR_VERSION}.js")
    assert len(scalar.content) > 1_000_000  # the whole standalone bundle, vendored
    assert (await client.get("/docs/assets/../openapi.json")).status_code == 404
    assert (await client.get("/docs/assets/nothing.js")).status_code == 404


async def test_unknown_routes_are_json_404(client: Client) -> None:
    response = await client.get("/nowhere")
    assert response.status_code == 404
    assert response.json()["detail"]["error_type"] == "not_found"
    assert (await client.post("/nowhere")).status_code == 404


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return own.union(*(_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(value) for value in node))
    return set()


async def test_every_reference_in_the_document_names_a_component() -> None:
    """The document is completed by type, not by component name: a renamed type cannot leave a dangling `$ref`."""
    async with running({"OPENJEV_API_KEY": "k"}) as client:
        document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    refs = _refs(document)
    assert {"#/components/schemas/ErrorBody", "#/components/schemas/OpenAIErrorBody"} <= refs
    assert {ref.removeprefix("#/components/schemas/") for ref in refs} <= set(schemas)
