"""Pure ASGI middleware: a fresh request id on every response, and one access-log line per request."""

from __future__ import annotations

import time
import uuid
from typing import Any

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from openjev.logs import get_logger

REQUEST_ID_HEADER = "x-typesafe-request-id"
log = get_logger("openjev.access")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status: dict[str, Any] = {"code": None}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message["headers"] = headers  # type: ignore[typeddict-unknown-key,unused-ignore]
            await send(message)

        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                log.info(
                    "request",
                    method=scope.get("method"),
                    path=scope.get("path"),
                    status=status["code"],
                    duration_ms=round((time.perf_counter() - started) * 1000, 2),
                )
