"""The Litestar application factory: routes, typed state, error mapping, lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Router
from litestar.middleware import DefineMiddleware
from prometheus_client import CollectorRegistry

import openjev
from openjev.bootstrap import build_runtime
from openjev.contracts.registry import CONTRACTS
from openjev.contracts.spec import ContractSpec
from openjev.http import docs_pages, openapi_docs, playground, routes
from openjev.http.decision_routes import decision_route
from openjev.http.errors import error_handlers
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


def create_app(
    settings: Settings | None = None,
    runtime: Runtime | None = None,
    *,
    exit_on_failure: bool = False,
    freeze_heap: bool = False,
    contracts: Sequence[ContractSpec[Any]] = CONTRACTS,
) -> Litestar:
    """An app that answers at once and loads its backend in the background (/health is 503 until ready).

    `freeze_heap` (the server process) moves what start-up built out of the garbage collector's
    reach once ready (`gc.freeze`); it is process-wide, so apps built in tests leave it off.
    `contracts`: the wire contracts served, one decision route each; the first one's error shape is
    the server's own (the routes of no contract, unknown paths).
    """
    settings = settings or load_settings()
    configure_logging(settings.log_level)
    runtime = runtime or build_runtime(settings)
    contracts = tuple(contracts)
    metrics = Metrics(CollectorRegistry(auto_describe=True), backend=runtime.kind, contracts=contracts)
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

    server_voice = contracts[0]
    request_ids = list(dict.fromkeys(spec.request_id_header for spec in contracts))
    guarded = [*(decision_route(spec, contracts) for spec in contracts), routes.list_models, routes.limits]
    open_routes = [routes.health, routes.live]
    (open_routes if settings.metrics_public else guarded).append(routes.metrics)
    protected = Router("/", route_handlers=guarded, middleware=routes.bearer_check(settings.api_key))
    # Each path behind the key, with the error body its 401 is written in (for the OpenAPI document).
    error_bodies = {spec.path: spec.openapi.error_body for spec in contracts}
    guarded_paths = {
        path: error_bodies.get(path, server_voice.openapi.error_body) for handler in guarded for path in handler.paths
    }
    return Litestar(
        route_handlers=[
            protected,
            *open_routes,
            docs_pages.scalar,
            docs_pages.swagger,
            docs_pages.asset,
            playground.playground,
            playground.playground_asset,
        ],
        state=AppState({"service": service, "contracts": contracts, "guarded_paths": guarded_paths}),
        lifespan=[lifespan],
        middleware=[
            DefineMiddleware(RequestContextMiddleware, metrics=metrics, access_log=access_logger()),
            *([loopback_host_check] if is_loopback(settings.host) else []),
        ],
        before_send=[add_request_id(request_ids), count_responses(metrics)],
        # Each contract's envelope under its path (404, 405, 401 before a route runs too); the first's elsewhere.
        exception_handlers=error_handlers(server_voice.errors, {spec.path: spec.errors for spec in contracts}),
        openapi_config=openapi_docs.document_config(
            openapi_docs.TITLE,
            openjev.__version__,
            "Typed decisions read from an open LLM's first answer token. Try them in "
            "[the playground](/playground) (a form, its answers drawn as bars); Swagger UI is at [/docs](/docs).",
        ),
        request_max_body_size=None,  # read_body enforces the limit, on the inflated bytes too
        logging_config=None,
        debug=False,
    )


def app_factory() -> Litestar:
    """Entry point for Granian (`factory=True`): settings from the environment, exit if start-up fails."""
    return create_app(exit_on_failure=True, freeze_heap=True)
