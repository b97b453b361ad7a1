"""Route handlers: translate HTTP to the evaluation use case and back. No scoring logic here."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import time
from typing import Any

import msgspec
from litestar import Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.enums import MediaType
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Receive

from openjev.domain.limits import Limits
from openjev.domain.validation import JEV_ALIAS
from openjev.evaluation import Evaluation, parse_request
from openjev.http.body import read_body
from openjev.http.errors import AuthenticationFailed, ClientGone
from openjev.http.openapi_docs import patch_openapi, scalar_page, swagger_page
from openjev.http.server_state import HealthReport, Phase, ServerState

LARGE_BODY_BYTES = 64 * 1024  # above this, tokenizing goes to a thread so other requests keep flowing


def server_of(connection: ASGIConnection[Any, Any, Any, Any]) -> ServerState:
    server: ServerState = connection.app.state.server
    return server


def require_key(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    """Bearer auth when a key is configured; an Authorization header is ignored when none is."""
    expected = server_of(connection).settings.api_key
    if expected is None:
        return
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise AuthenticationFailed("a valid bearer key is required: send `Authorization: Bearer <key>`")


@post("/v1/systemone", status_code=200, guards=[require_key], tags=["System One"], summary="Answer typed questions")
async def system_one(request: Request[Any, Any, Any]) -> Response[Any]:
    """Answer each question with a probability distribution read from the model's first answer token."""
    server = server_of(request)
    body = await read_body(
        request.stream(),
        request.headers.get("content-encoding"),
        request.headers.get("content-length"),
        server.limits.max_body_bytes,
    )
    started = time.perf_counter()
    parsed = parse_request(body, server.limits, server.accepted_models)
    evaluator = server.require_ready()
    if len(body) > LARGE_BODY_BYTES:
        prepared = await asyncio.to_thread(evaluator.prepare, parsed)
    else:
        prepared = evaluator.prepare(parsed)
    prepare_seconds = time.perf_counter() - started
    with server.admission.slot():
        evaluation = await _unless_disconnected(request.receive, evaluator.evaluate(prepared))
    return Response(content=evaluation.response, headers=_headers(evaluation, prepare_seconds))


async def _unless_disconnected(receive: Receive, work: Any) -> Evaluation:
    """Run the evaluation, cancelling it (and so aborting its branches) if the client goes away."""
    task: asyncio.Task[Evaluation] = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        client_left = not task.done()
        if client_left:
            task.cancel()
    if client_left:
        with contextlib.suppress(asyncio.CancelledError):
            await task  # let the cancellation abort the branches before answering
        raise ClientGone("the client disconnected; the evaluation was cancelled")
    return task.result()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(evaluation: Evaluation, prepare_seconds: float) -> dict[str, str]:
    t = evaluation.timings
    headers = {
        "x-openjev-prefix-tokens": str(evaluation.prefix_tokens),
        "Server-Timing": (
            f'prepare;dur={prepare_seconds * 1000:.3f};desc="prompt preparation", '
            f'prefill;dur={t.prefill * 1000:.3f};desc="shared prefill", '
            f'branches;dur={t.branches * 1000:.3f};desc="branch inference"'
        ),
    }
    if evaluation.cached_tokens is not None:
        headers["x-openjev-cached-tokens"] = str(evaluation.cached_tokens)
    return headers


UNKNOWN_RELEASE_DATE = "unknown"


class ModelCard(msgspec.Struct):
    name: str
    description: str
    release_date: str  # YYYY-MM-DD, or "unknown" (the official SDK requires a string)


class OpenAIModel(msgspec.Struct):
    id: str
    object: str
    created: int
    owned_by: str


class ModelList(msgspec.Struct):
    models: list[ModelCard]
    object: str
    data: list[OpenAIModel]


@get("/v1/models", guards=[require_key], tags=["Models"], sync_to_thread=False)
def list_models(request: Request[Any, Any, Any]) -> ModelList:
    """The served model and the `jev-latest` alias, in TypeSafe and OpenAI shapes."""
    server = server_of(request)
    runtime = server.runtime
    created = int(server.created_at)
    names = [runtime.public_model, JEV_ALIAS]
    descriptions = [runtime.model_description, f"Alias of {runtime.public_model}."]
    return ModelList(
        models=[
            ModelCard(name=n, description=d, release_date=runtime.release_date or UNKNOWN_RELEASE_DATE)
            for n, d in zip(names, descriptions, strict=True)
        ],
        object="list",
        data=[OpenAIModel(id=n, object="model", created=created, owned_by="openjev") for n in names],
    )


class LimitsReport(msgspec.Struct):
    limits: Limits
    branch_token_limit: int | None
    scope: str


@get("/v1/limits", guards=[require_key], tags=["Models"], sync_to_thread=False)
def limits(request: Request[Any, Any, Any]) -> LimitsReport:
    """Every admission limit in force in this API process."""
    server = server_of(request)
    evaluator = server.evaluator
    return LimitsReport(
        limits=server.limits,
        branch_token_limit=evaluator.branch_limit if evaluator else None,
        scope="per API process",
    )


@get("/health", tags=["Health"])
async def health(request: Request[Any, Any, Any]) -> Response[HealthReport]:
    """200 when serving; 503 with Retry-After while starting, after a failed start, or without a backend."""
    report = await server_of(request).health()
    ok = report.status == Phase.READY.value and report.backend_ok
    return Response(content=report, status_code=200 if ok else 503, headers={} if ok else {"Retry-After": "5"})


@get("/health/live", tags=["Health"], sync_to_thread=False)
def live() -> dict[str, str]:
    """The API process is alive (even while the backend loads)."""
    return {"status": "alive"}


@get("/", include_in_schema=False, media_type=MediaType.HTML, sync_to_thread=False)
def scalar(request: Request[Any, Any, Any]) -> bytes:
    return scalar_page(str(request.app.openapi_config.title if request.app.openapi_config else "openjev"))


@get("/docs", include_in_schema=False, media_type=MediaType.HTML, sync_to_thread=False)
def swagger(request: Request[Any, Any, Any]) -> bytes:
    return swagger_page(str(request.app.openapi_config.title if request.app.openapi_config else "openjev"))


@get("/openapi.json", include_in_schema=False, sync_to_thread=False, media_type="application/vnd.oai.openapi+json")
def openapi_json(request: Request[Any, Any, Any]) -> dict[str, Any]:
    return openapi_document(request.app)


def openapi_document(app: Any) -> dict[str, Any]:
    cached: dict[str, Any] | None = getattr(app.state, "openapi_document", None)
    if cached is None:
        cached = patch_openapi(app.openapi_schema.to_schema())
        app.state.openapi_document = cached
    return cached
