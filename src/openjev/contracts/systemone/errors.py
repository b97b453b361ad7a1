"""System One's error responses: the status of each openjev error and its `detail` body.

An invalid request is a 422 whose `detail` lists `{loc, msg, type}` (FastAPI's shape, as the
official SDK expects); every other error is `{"detail": {"error_type": ..., "message": ...}}`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openjev.domain.errors import InvalidRequest, Issue, OpenJevError


class ErrorDetail(msgspec.Struct):
    error_type: str
    message: str


class ErrorBody(msgspec.Struct):
    """Every error but a 422: `{"detail": {"error_type": ..., "message": ...}}`."""

    detail: ErrorDetail


class ValidationErrorBody(msgspec.Struct):
    """A 422: `{"detail": [{"loc": ["body", ...], "msg": ..., "type": ...}]}`."""

    detail: list[Issue]


STATUS: dict[str, int] = {
    "invalid_request": 422,
    "unknown_model": 400,
    "request_too_large": 413,
    "unsupported_content_encoding": 415,
    "unsupported_media_type": 415,
    "bad_request": 400,
    "request_timeout": 408,
    "invalid_host": 400,
    "authentication_error": 401,
    "overloaded": 529,
    "timeout": 504,
    "not_ready": 503,
    "backend_unavailable": 503,
    "backend_error": 502,
    "client_closed_request": 499,
}


def status_of(exc: OpenJevError) -> int:
    return STATUS.get(exc.error_type, 500)


def error_body(exc: OpenJevError, message: str) -> Any:
    """The body for an openjev error, `message` being what the client may be told."""
    if isinstance(exc, InvalidRequest):
        return {"detail": [msgspec.to_builtins(issue) for issue in exc.issues]}
    return plain_body(status_of(exc), exc.error_type, message)


def plain_body(status: int, error_type: str, message: str) -> Any:
    return {"detail": {"error_type": error_type, "message": message}}
