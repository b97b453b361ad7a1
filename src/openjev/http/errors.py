"""HTTP-only errors, and the exception handlers that answer every error in a contract's own shape.

Each contract says how it writes errors (its spec's `ErrorWire`: System One's `detail`, OpenAI's
`error` envelope); the headers (Retry-After, WWW-Authenticate), what a client may be told of a backend
failure and what is logged are the same for every contract.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException

from openjev.contracts.spec import ErrorWire
from openjev.domain.errors import (
    BackendError,
    BackendUnavailable,
    NotReady,
    OpenJevError,
    Overloaded,
)
from openjev.logs import get_logger

log = get_logger("openjev.http")


class BodyTooLarge(OpenJevError):
    error_type = "request_too_large"


class BadEncoding(OpenJevError):
    error_type = "unsupported_content_encoding"


class UnsupportedMediaType(OpenJevError):
    error_type = "unsupported_media_type"


class BadBody(OpenJevError):
    """The body ended before it was complete (malformed chunked encoding, shorter than Content-Length)."""

    error_type = "bad_request"


class BodyTimeout(OpenJevError):
    error_type = "request_timeout"


class InvalidHost(OpenJevError):
    """A Host header that does not name this loopback server (DNS rebinding)."""

    error_type = "invalid_host"


class AuthenticationFailed(OpenJevError):
    error_type = "authentication_error"


class ClientGone(OpenJevError):
    """The client disconnected; nobody reads this response (499, as nginx logs it)."""

    error_type = "client_closed_request"


# What a client is told for backend failures; the full text (URLs, backend output) goes to the log.
PUBLIC_MESSAGES: dict[type[OpenJevError], str] = {
    BackendError: "the backend answered wrongly; the server log has the details",
    BackendUnavailable: "the backend is unavailable; retry shortly (the server log has the details)",
}
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def public_text(text: str, limit: int = 300) -> str:
    """`text` fit for a client: no URLs, only its first line (no stack text), at most `limit` characters."""
    first = _URL.sub("<backend>", text.strip().split("\n", 1)[0])
    return first if len(first) <= limit else first[: limit - 1] + "…"


Handler = Callable[[Request[Any, Any, Any], Any], Response[Any]]


def error_handlers(
    default: ErrorWire, by_path: Mapping[str, ErrorWire] | None = None
) -> dict[int | type[Exception], Handler]:
    """Litestar exception handlers that answer in `default`'s shape, for the app or for one route.

    `by_path`: another shape for the paths that start with a prefix, so that what happens before a
    route runs (404, 405, a 401 to OPTIONS) is answered in the shape its clients read.
    """

    def wire_of(request: Request[Any, Any, Any]) -> ErrorWire:
        path = request.scope["path"]
        return next((wire for prefix, wire in (by_path or {}).items() if path.startswith(prefix)), default)

    def openjev_error(request: Request[Any, Any, Any], exc: OpenJevError) -> Response[Any]:
        wire = wire_of(request)
        status = wire.status_of(exc)
        headers: dict[str, str] = {}
        if isinstance(exc, Overloaded | NotReady):
            headers["Retry-After"] = str(exc.retry_after)
        if isinstance(exc, BackendUnavailable):
            headers["Retry-After"] = "5"
        if isinstance(exc, AuthenticationFailed):
            headers["WWW-Authenticate"] = "Bearer"
        if isinstance(exc, BodyTimeout):
            headers["Connection"] = "close"
        message = next((m for cls, m in PUBLIC_MESSAGES.items() if isinstance(exc, cls)), None)
        if status >= 500 and (status != 503 or isinstance(exc, BackendUnavailable)):
            log.warning("request_failed", status=status, error_type=exc.error_type, error=exc.message)
        return Response(
            content=wire.body(exc, message or public_text(exc.message)), status_code=status, headers=headers
        )

    def http_exception(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
        """Litestar's own errors (404, 405, …) in the same shape as ours."""
        error_type = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return Response(
            content=wire_of(request).plain(exc.status_code, error_type, str(exc.detail)),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
        log.error("internal_error", error=repr(exc), exc_info=exc)
        return Response(
            content=wire_of(request).plain(500, "internal_error", "internal server error; see the server log"),
            status_code=500,
        )

    return {OpenJevError: openjev_error, HTTPException: http_exception, Exception: internal_error}
