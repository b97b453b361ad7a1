"""System One's error responses: the status of each openjev error and its `detail` body.

An invalid request is a 422 whose `detail` lists `{loc, msg, type}` (FastAPI's shape, as the
official SDK expects); every other error is `{"detail": {"error_type": ..., "message": ...}}`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openjev.contracts.status import INTERNAL_STATUS, with_overrides
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


# System One's own statuses: FastAPI's 422 for an invalid request, a 400 for an unknown model, and
# TypeSafe's 529 when overloaded; every other error has the shared status.
STATUS = with_overrides({"invalid_request": 422, "unknown_model": 400, "overloaded": 529})


def status_of(exc: OpenJevError) -> int:
    return STATUS.get(exc.error_type, INTERNAL_STATUS)


def error_body(exc: OpenJevError, message: str) -> Any:
    """The body for an openjev error, `message` being what the client may be told."""
    if isinstance(exc, InvalidRequest):
        return {"detail": [msgspec.to_builtins(issue) for issue in exc.issues]}
    return plain_body(status_of(exc), exc.error_type, message)


def plain_body(status: int, error_type: str, message: str) -> Any:
    return {"detail": {"error_type": error_type, "message": message}}
