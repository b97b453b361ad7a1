"""HTTP-only errors and the mapping of every openjev error to its status and body (docs/spec.md#limits-and-errors)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException

from openjev.domain.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    InvalidRequest,
    NotReady,
    OpenJevError,
    Overloaded,
    UnknownModel,
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


STATUS: dict[type[OpenJevError], int] = {
    InvalidRequest: 422,
    UnknownModel: 400,
    BodyTooLarge: 413,
    BadEncoding: 415,
    UnsupportedMediaType: 415,
    BadBody: 400,
    BodyTimeout: 408,
    InvalidHost: 400,
    AuthenticationFailed: 401,
    Overloaded: 529,
    BackendTimeout: 504,
    NotReady: 503,
    BackendUnavailable: 503,
    BackendError: 502,
    ClientGone: 499,
}


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


def status_of(exc: OpenJevError) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def openjev_error_response(request: Request[Any, Any, Any], exc: OpenJevError) -> Response[Any]:
    status = status_of(exc)
    headers: dict[str, str] = {}
    if isinstance(exc, Overloaded | NotReady):
        headers["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, BackendUnavailable):
        headers["Retry-After"] = "5"
    if isinstance(exc, AuthenticationFailed):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, BodyTimeout):
        headers["Connection"] = "close"
    body: Any
    if isinstance(exc, InvalidRequest):
        body = {"detail": [msgspec.to_builtins(issue) for issue in exc.issues]}
    else:
        message = next((m for cls, m in PUBLIC_MESSAGES.items() if isinstance(exc, cls)), None)
        body = {"detail": {"error_type": exc.error_type, "message": message or public_text(exc.message)}}
    if status >= 500 and (status != 503 or isinstance(exc, BackendUnavailable)):
        log.warning("request_failed", status=status, error_type=exc.error_type, error=exc.message)
    return Response(content=body, status_code=status, headers=headers)


def http_exception_response(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    """Litestar's own errors (404, 405, …) in the same `detail.error_type` shape as ours."""
    error_type = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return Response(
        content={"detail": {"error_type": error_type, "message": str(exc.detail)}},
        status_code=exc.status_code,
        headers=exc.headers,
    )


def internal_error_response(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    log.error("internal_error", error=repr(exc), exc_info=exc)
    return Response(
        content={"detail": {"error_type": "internal_error", "message": "internal server error; see the server log"}},
        status_code=500,
    )
