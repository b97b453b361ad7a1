"""The Litestar application factory: routes, typed state, error mapping, lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar, Router
from litestar.middleware import DefineMiddleware
from prometheus_client import CollectorRegistry

import openjev
from openjev.bootstrap import build_runtime
from openjev.contracts.systemone import errors as systemone_errors
from openjev.http import decision_routes, docs_pages, openapi_docs, routes
from openjev.http.errors import ErrorWire, error_handlers
from openjev.http.lifecycle import AppState, ServiceLifecycle
from openjev.http.metrics import Metrics
from openjev.http.request_context import (
    RequestContextMiddleware,
    access_logger,
    add_request_id,
    count_responses,
    loopback_host_check,
)
from openjev.listen import is_loopback
from openjev.logs import configure_logging
from openjev.runtime import Runtime
from openjev.settings import Settings, load_settings

SYSTEM_ONE_ERRORS = ErrorWire(systemone_errors.status_of, systemone_errors.error_body, systemone_errors.plain_body)


def create_app(
    settings: Settings | None = None,
    runtime: Runtime | None = None,
    *,
    exit_on_failure: bool = False,
    freeze_heap: bool = False,
) -> Litestar:
    """An app that answers at once and loads its backend in the background (/health is 503 until ready).

    `freeze_heap` (the server process) moves what start-up built out of the garbage collector's
    reach once ready (`gc.freeze`); it is process-wide, so apps built in tests leave it off.
    """
    settings = settings or load_settings()
    configure_logging(settings.log_level)
    runtime = runtime or build_runtime(settings)
    metrics = Metrics(CollectorRegistry(auto_describe=True), backend=runtime.kind)
    service = ServiceLifecycle(
        settings, runtime, exit_on_failure=exit_on_failure, metrics=metrics, freeze_heap=freeze_heap
    )

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        service.begin()
        try:
            yield
        finally:
            await service.stop()

    guarded = [decision_routes.system_one, decision_routes.decisions, routes.list_models, routes.limits]
    open_routes = [routes.health, routes.live]
    (open_routes if settings.metrics_public else guarded).append(routes.metrics)
    protected = Router("/", route_handlers=guarded, middleware=routes.bearer_check(settings.api_key))
    return Litestar(
        route_handlers=[
            protected,
            *open_routes,
            docs_pages.scalar,
            docs_pages.swagger,
            docs_pages.asset,
        ],
        state=AppState({"service": service}),
        lifespan=[lifespan],
        middleware=[
            DefineMiddleware(RequestContextMiddleware, metrics=metrics, access_log=access_logger()),
            *([loopback_host_check] if is_loopback(settings.host) else []),
        ],
        before_send=[add_request_id, count_responses(metrics)],
        # OpenAI's envelope under /v1/decisions (404, 405, 401 before the route runs), System One's elsewhere.
        exception_handlers=error_handlers(
            SYSTEM_ONE_ERRORS, {decision_routes.DECISIONS_PATH: decision_routes.DECISIONS_ERRORS}
        ),
        openapi_config=openapi_docs.document_config(
            openapi_docs.TITLE,
            openjev.__version__,
            "Typed decisions read from an open LLM's first answer token. See /docs for Swagger UI.",
        ),
        request_max_body_size=None,  # read_body enforces the limit, on the inflated bytes too
        logging_config=None,
        debug=False,
    )


def app_factory() -> Litestar:
    """Entry point for Granian (`factory=True`): settings from the environment, exit if start-up fails."""
    return create_app(exit_on_failure=True, freeze_heap=True)
