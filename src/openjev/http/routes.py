"""Route handlers: translate HTTP to the evaluation use case and back. No scoring logic here.

Handlers reach the service through the typed application state (`state: AppState`). The bearer
key check is attached by the app factory to the routes that need it (`bearer_check`).
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable

from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.types import ASGIApp, Receive, Scope, Send

from openjev.domain.validation import JEV_ALIAS
from openjev.domain.wire import SystemOneResponse
from openjev.evaluation import Evaluation, parse_request
from openjev.http.body import read_body
from openjev.http.errors import AuthenticationFailed, ClientGone, UnsupportedMediaType
from openjev.http.lifecycle import AppState, Phase
from openjev.http.metrics import CONTENT_TYPE
from openjev.http.openapi_docs import SYSTEM_ONE_HEADERS, SYSTEM_ONE_RESPONSES, SystemOneOperation
from openjev.http.schemas import (
    UNKNOWN_RELEASE_DATE,
    HealthReport,
    LimitsReport,
    Liveness,
    ModelCard,
    ModelList,
    OpenAIModel,
)

LARGE_BODY_BYTES = 64 * 1024  # above this, tokenizing goes to a thread so other requests keep flowing


def bearer_check(expected: str | None) -> list[Callable[[ASGIApp], ASGIApp]]:
    """Bearer auth when a key is configured (no middleware at all when none is): the protected router's middleware.

    Route middleware runs after routing, exactly where a guard would (an unknown path is still 404 and
    a wrong method 405), but it is cheaper: Litestar hands every guard call a copy of the route handler
    (`copy(self)` in `BaseRouteHandler.authorize_connection`), about 40 µs a request. It is a plain
    coroutine on the event loop, never a thread hop.
    """
    if expected is None:
        return []
    wanted = expected.strip().encode()

    def middleware(app: ASGIApp) -> ASGIApp:
        async def require_key(scope: Scope, receive: Receive, send: Send) -> None:
            # The raw header bytes, compared with the key's UTF-8 bytes: a non-ASCII key works as UTF-8.
            raw = next((v for k, v in scope["headers"] if k.lower() == b"authorization"), b"")
            scheme, _sep, token = raw.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), wanted):
                raise AuthenticationFailed("a valid bearer key is required: send `Authorization: Bearer <key>`")
            await app(scope, receive, send)

        return require_key

    return [middleware]


@post(
    "/v1/systemone",
    status_code=200,
    tags=["System One"],
    summary="Answer typed questions",
    operation_class=SystemOneOperation,
    responses=SYSTEM_ONE_RESPONSES,
    response_headers=SYSTEM_ONE_HEADERS,
)
async def system_one(request: Request[None, None, State], state: AppState) -> Response[SystemOneResponse]:
    """Answer each question with a probability distribution read from the model's first answer token."""
    service = state.service
    require_json(request.headers.get("content-type"))
    body = await read_body(
        request.receive,
        request.headers.get("content-encoding"),
        request.headers.get("content-length"),
        service.limits.max_body_bytes,
        within=service.settings.body_timeout,
        min_rate=service.settings.body_min_rate,
    )
    started = time.perf_counter()
    parsed = parse_request(body, service.limits, service.accepted_models)
    evaluator = service.require_ready()
    # Preparation (tokenizing) is admitted too: a burst of large requests gets 529, not a queue.
    with service.admission.slot():
        if len(body) > LARGE_BODY_BYTES:
            prepared = await asyncio.to_thread(evaluator.prepare, parsed)
        else:
            prepared = evaluator.prepare(parsed)
        prepare_seconds = time.perf_counter() - started
        evaluation = await _unless_disconnected(request.receive, evaluator.evaluate(prepared))
    service.metrics.evaluation(evaluation, prepare_seconds, len(parsed.questions))
    return Response(content=evaluation.response, headers=_headers(evaluation, prepare_seconds))


def require_json(content_type: str | None) -> None:
    """Only JSON bodies: a web page cannot send one without a CORS preflight (no "simple" request)."""
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise UnsupportedMediaType(
            f"the request body must be JSON: send the header `Content-Type: application/json` "
            f"(got {f'{content_type!r}' if content_type else 'no Content-Type'})"
        )


async def _unless_disconnected(receive: Receive, work: Awaitable[Evaluation]) -> Evaluation:
    """Await the evaluation, cancelling it (and so aborting its branches) if the client goes away.

    The evaluation runs in this task and a watcher task waits for the disconnect: a second task
    and `asyncio.wait` per request cost more than the watcher alone. A cancellation that does
    not come from the watcher (shutdown) goes through as it is.
    """
    current = asyncio.current_task()
    assert current is not None
    left = done = False

    def client_left(watcher: asyncio.Future[None]) -> None:
        nonlocal left
        if not done and not watcher.cancelled():  # `done`: this may run after the evaluation ended
            left = True
            current.cancel()

    watcher = asyncio.ensure_future(_disconnect(receive))
    watcher.add_done_callback(client_left)
    try:
        return await work  # a cancellation aborts the branches before it leaves `evaluate`
    except asyncio.CancelledError:
        if left and current.uncancel() == 0:
            raise ClientGone("the client disconnected; the evaluation was cancelled") from None
        raise
    finally:
        done = True
        watcher.cancel()


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


@get("/v1/models", tags=["Models"], sync_to_thread=False)
def list_models(state: AppState) -> ModelList:
    """The served model and the `jev-latest` alias, in TypeSafe and OpenAI shapes."""
    service = state.service
    runtime = service.runtime
    created = int(service.created_at)
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


@get("/v1/limits", tags=["Models"], sync_to_thread=False)
def limits(state: AppState) -> LimitsReport:
    """Every admission limit in force in this API process."""
    service = state.service
    evaluator = service.evaluator
    return LimitsReport(
        limits=service.limits,
        branch_token_limit=evaluator.branch_limit if evaluator else None,
        scope="per API process",
    )


@get("/metrics", tags=["Health"], media_type=CONTENT_TYPE, include_in_schema=False)
async def metrics(state: AppState) -> Response[bytes]:
    """Prometheus metrics (text format; docs/operations.md). Needs the API key unless OPENJEV_METRICS_PUBLIC is on."""
    service = state.service
    await service.health()  # refreshes the backend gauges
    return Response(content=service.metrics.exposition(), media_type=CONTENT_TYPE)


@get("/health", tags=["Health"])
async def health(state: AppState) -> Response[HealthReport]:
    """200 when serving; 503 with Retry-After while starting, after a failed start, or without a backend."""
    report = await state.service.health()
    ok = report.status == Phase.READY.value and report.backend_ok
    return Response(content=report, status_code=200 if ok else 503, headers={} if ok else {"Retry-After": "5"})


@get("/health/live", tags=["Health"], sync_to_thread=False)
def live() -> Liveness:
    """The API process is alive (even while the backend loads)."""
    return Liveness(status="alive")
