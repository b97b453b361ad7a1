"""The small routes (catalog, limits, metrics, health) and the bearer key check.

Handlers reach the service through the typed application state (`state: AppState`). The bearer
key check is attached by the app factory to the routes that need it (`bearer_check`). The decision
routes, one per registered contract, are built by `decision_routes`.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from litestar import Response, get
from litestar.types import ASGIApp, Receive, Scope, Send

from openjev.contracts.models import JEV_ALIAS
from openjev.http.errors import AuthenticationFailed
from openjev.http.lifecycle import AppState, Phase
from openjev.http.limits import Limits
from openjev.http.metrics import CONTENT_TYPE
from openjev.http.schemas import (
    UNKNOWN_RELEASE_DATE,
    ContractLimits,
    HealthReport,
    LimitsReport,
    Liveness,
    ModelCard,
    ModelList,
    OpenAIModel,
)


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


@get("/v1/models", tags=["Models"], sync_to_thread=False)
def list_models(state: AppState) -> ModelList:
    """The served model, the `jev-latest` alias and the configured aliases, in TypeSafe and OpenAI shapes."""
    service = state.service
    runtime = service.runtime
    created = int(service.created_at)
    aliases = [JEV_ALIAS, *(a for a in service.model_aliases if a not in (JEV_ALIAS, runtime.public_model))]
    names = [runtime.public_model, *aliases]
    descriptions = [runtime.model_description, *(f"Alias of {runtime.public_model}." for _ in aliases)]
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
    """Every admission limit in force in this API process, the same on both decision routes."""
    service = state.service
    evaluator = service.evaluator
    return LimitsReport(
        limits=Limits.of(service.limits, service.admission_limits),
        branch_token_limit=evaluator.branch_limit if evaluator else None,
        scope="per API process",
        contracts={
            spec.name: ContractLimits(
                route=spec.path, questions=spec.limit_names.questions, options=list(spec.limit_names.options)
            )
            for spec in state.contracts
        },
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
