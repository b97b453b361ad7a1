"""OpenAI's error envelope for the Decisions route: `{"error": {"message", "type", "param", "code"}}`.

The statuses are those the official SDK turns into its exception classes: 400 `BadRequestError`
(invalid request), 401 `AuthenticationError`, 404 `NotFoundError` (a model this server does not
serve: `model_not_found`), 413, 415, 429 `RateLimitError` (admission limit, with Retry-After),
5xx `InternalServerError` (503 with Retry-After while starting or when the backend is away, 502
for a wrong backend reply, 504 at the request deadline). `param` names the offending field the
way OpenAI does (`questions[0].choices`), null when the whole request is meant.
"""

from __future__ import annotations

from typing import Any

import msgspec

from openjev.domain.decision import Loc
from openjev.domain.errors import InvalidRequest, OpenJevError, validation_error_kind


class OpenAIError(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(msgspec.Struct):
    """Every error of the Decisions route: OpenAI's `{"error": {"message", "type", "param", "code"}}`."""

    error: OpenAIError


# error_type -> (status, OpenAI `type`, OpenAI `code`); the code of an invalid request is its issue's.
STATUS: dict[str, tuple[int, str, str | None]] = {
    "invalid_request": (400, "invalid_request_error", None),
    "unknown_model": (404, "invalid_request_error", "model_not_found"),
    "request_too_large": (413, "invalid_request_error", "request_too_large"),
    "unsupported_content_encoding": (415, "invalid_request_error", "unsupported_content_encoding"),
    "unsupported_media_type": (415, "invalid_request_error", "unsupported_media_type"),
    "bad_request": (400, "invalid_request_error", "bad_request"),
    "request_timeout": (408, "invalid_request_error", "request_timeout"),
    "invalid_host": (400, "invalid_request_error", "invalid_host"),
    "authentication_error": (401, "invalid_request_error", "invalid_api_key"),
    "overloaded": (429, "rate_limit_error", "rate_limit_exceeded"),
    "timeout": (504, "server_error", "timeout"),
    "not_ready": (503, "server_error", "not_ready"),
    "backend_unavailable": (503, "server_error", "backend_unavailable"),
    "backend_error": (502, "server_error", "backend_error"),
    "client_closed_request": (499, "invalid_request_error", "client_closed_request"),
}
_INTERNAL = (500, "server_error", "internal_error")
_CODES = {
    "missing": "missing_required_parameter",
    "unknown": "unknown_parameter",
    "tag": "invalid_value",
    "enum": "invalid_value",
    "type": "invalid_type",
}


def status_of(exc: OpenJevError) -> int:
    return STATUS.get(exc.error_type, _INTERNAL)[0]


def error_body(exc: OpenJevError, message: str) -> Any:
    _, kind, code = STATUS.get(exc.error_type, _INTERNAL)
    if isinstance(exc, InvalidRequest) and exc.issues:
        first = exc.issues[0]
        text = "; ".join(f"{param_of(i.loc)}: {i.msg}" if i.loc else i.msg for i in exc.issues)
        return envelope(text, kind, param_of(first.loc) or None, first.type)
    return envelope(message, kind, None, code)


def plain_body(status: int, error_type: str, message: str) -> Any:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return envelope(message, kind, None, error_type)


def envelope(message: str, kind: str, param: str | None, code: str | None) -> Any:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def param_of(loc: Loc) -> str:
    """A location as OpenAI writes a parameter: `("questions", 0, "choices")` -> `questions[0].choices`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def validation_code(message: str) -> str:
    """OpenAI's code for what a msgspec validation message says."""
    return _CODES[validation_error_kind(message)]
