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

from openjev.contracts.decoding import validation_error_kind
from openjev.contracts.status import INTERNAL_STATUS, with_overrides
from openjev.domain.decision import Loc
from openjev.domain.errors import InvalidRequest, OpenJevError


class OpenAIError(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(msgspec.Struct):
    """Every error of the Decisions route: OpenAI's `{"error": {"message", "type", "param", "code"}}`."""

    error: OpenAIError


# The shared statuses hold as they are (they are OpenAI's); OpenAI's `type` follows from the status
# and its `code` is the error type, but for these (an invalid request's code is its issue's).
STATUS = with_overrides({})
CODES: dict[str, str | None] = {
    "invalid_request": None,
    "unknown_model": "model_not_found",
    "authentication_error": "invalid_api_key",
    "overloaded": "rate_limit_exceeded",
}
_INTERNAL = (INTERNAL_STATUS, "server_error", "internal_error")
_CODES = {
    "missing": "missing_required_parameter",
    "unknown": "unknown_parameter",
    "tag": "invalid_value",
    "enum": "invalid_value",
    "type": "invalid_type",
}


def status_of(exc: OpenJevError) -> int:
    return STATUS.get(exc.error_type, INTERNAL_STATUS)


def openai_error(error_type: str) -> tuple[int, str, str | None]:
    """The status, OpenAI `type` and OpenAI `code` of an openjev error type."""
    status = STATUS.get(error_type)
    if status is None:
        return _INTERNAL
    return status, error_kind(status), CODES.get(error_type, error_type)


def error_kind(status: int) -> str:
    """OpenAI's error `type` for a status."""
    if status >= 500:
        return "server_error"
    return "rate_limit_error" if status == 429 else "invalid_request_error"


def error_body(exc: OpenJevError, message: str) -> Any:
    _, kind, code = openai_error(exc.error_type)
    if isinstance(exc, InvalidRequest) and exc.issues:
        first = exc.issues[0]
        text = "; ".join(f"{param_of(i.loc)}: {i.msg}" if i.loc else i.msg for i in exc.issues)
        return envelope(text, kind, param_of(first.loc) or None, first.type)
    return envelope(message, kind, None, code)


def plain_body(status: int, error_type: str, message: str) -> Any:
    kind = "server_error" if status >= 500 else "invalid_request_error"  # the framework's own errors: no 429
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
