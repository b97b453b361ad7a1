"""A fresh request id on every response, one access-log line per routed request, and the HTTP metrics.

The id is added by a `before_send` hook because Litestar answers 404/405 before any middleware
runs; the middleware binds the same id into the log context for routed requests. For the same
reason responses are counted by a `before_send` hook (`count_responses`), which also sees the
responses that error handlers build, while the middleware marks when a routed request arrived.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import structlog
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.types import ASGIApp, BeforeMessageSendHookHandler, Message, Receive, Scope, Send

from openjev.domain.errors import echo
from openjev.http.errors import InvalidHost
from openjev.http.metrics import Metrics
from openjev.ids import random_id
from openjev.listen import is_loopback
from openjev.logs import get_logger

log = get_logger("openjev.access")


def request_id_of(scope: Scope) -> str:
    state: dict[str, Any] = scope.setdefault("state", {})
    request_id: str | None = state.get("request_id")
    if request_id is None:
        request_id = state["request_id"] = random_id()
    return request_id


def add_request_id(names: Sequence[str]) -> BeforeMessageSendHookHandler:
    """Every response carries the request id under each name a served contract's clients read."""

    async def hook(message: Message, scope: Scope) -> None:
        if message["type"] == "http.response.start":
            headers = MutableScopeHeaders.from_message(message)
            request_id = request_id_of(scope)
            for name in names:
                headers[name] = request_id

    return hook


def count_responses(metrics: Metrics) -> BeforeMessageSendHookHandler:
    async def hook(message: Message, scope: Scope) -> None:
        if message["type"] == "http.response.start":
            metrics.response_started(scope, message["status"])

    return hook


class RequestContextMiddleware:
    """Binds the request id into the log context, counts the request, writes its access-log line.

    `access_log` is bound once (`access_logger`): structlog's module-level loggers assemble a new
    bound logger on every call, about a tenth of the line's cost.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None, access_log: Any = None) -> None:
        self.app = app
        self.metrics = metrics
        self.log = access_log if access_log is not None else log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: dict[str, Any] = {"code": None}

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        if self.metrics is not None:
            self.metrics.request_started(scope)
        with structlog.contextvars.bound_contextvars(request_id=request_id_of(scope)):
            try:
                await self.app(scope, receive, observe)
            finally:
                if self.metrics is not None:
                    self.metrics.request_finished()
                self.log.info(
                    "request",
                    method=scope.get("method"),
                    path=scope.get("path"),
                    status=status["code"],
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                )


def access_logger() -> Any:
    """The access log's logger, assembled once with the logging configuration now in force."""
    return log.bind()


def loopback_host_check(app: ASGIApp) -> ASGIApp:
    """Refuse a Host header that does not name a loopback address (a DNS-rebinding page's requests).

    Installed when the server listens on loopback only: such a server is reachable from this
    machine's browsers, and a page whose host name resolves to 127.0.0.1 must not drive it.
    """

    @functools.lru_cache(maxsize=64)  # clients send the same Host again and again; parsing an address is not free
    def allowed(host: bytes) -> bool:
        return is_loopback(_host_name(host.decode("latin-1")))

    async def check(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            host = next((v for k, v in scope["headers"] if k == b"host"), None)
            if host is not None and not allowed(host):
                raise InvalidHost(
                    f"Host {echo(host.decode('latin-1'))} is not accepted: this server listens on loopback and "
                    "answers requests addressed to localhost or a loopback address only (DNS-rebinding "
                    "protection); listen on another address (OPENJEV_HOST) to serve other names"
                )
        await app(scope, receive, send)

    return check


def _host_name(host: str) -> str:
    """The name in a Host header value: `[::1]:8000` -> `::1`, `localhost:8000` -> `localhost`."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host
