"""Typed errors of the domain and the use case. The HTTP layer maps each to a status."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

# Characters of a client's value an error message quotes (`echo`): 64 duplicate 30,000-character
# choices once made a 1.9 MB error body, a 10,000-character call_id a 10 KB one.
ECHO_LIMIT = 200


class Issue(msgspec.Struct, frozen=True):
    """One validation problem, located in the caller's request in its contract's own terms."""

    loc: tuple[str | int, ...]
    msg: str
    type: str


class OpenJevError(Exception):
    """Base of every error openjev raises on purpose."""

    error_type = "unknown"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(OpenJevError):
    """The request is invalid (schema, counts, token limits): 422, before any inference."""

    error_type = "invalid_request"

    def __init__(self, issues: Sequence[Issue]) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, i.loc))}: {i.msg}" for i in issues))
        self.issues = tuple(issues)

    @classmethod
    def one(cls, loc: tuple[str | int, ...], msg: str, type_: str = "value_error") -> InvalidRequest:
        return cls([Issue(loc=loc, msg=msg, type=type_)])


class UnknownModel(OpenJevError):
    error_type = "unknown_model"


class Overloaded(OpenJevError):
    error_type = "overloaded"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotReady(OpenJevError):
    error_type = "not_ready"

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BackendTimeout(OpenJevError):
    """The request deadline passed before the backend answered: 504."""

    error_type = "timeout"


class BackendUnavailable(OpenJevError):
    """The backend cannot be reached (refused, gone, starting): 503."""

    error_type = "backend_unavailable"


class BackendError(OpenJevError):
    """The backend answered, but wrongly (5xx, malformed reply, missing label): 502."""

    error_type = "backend_error"


class TemplateRefused(OpenJevError):
    """The model's chat template refused to render these messages (raised by a prompt codec)."""

    error_type = "template_error"


class StartupError(OpenJevError):
    """The server cannot serve with this model or configuration; start-up stops with this message."""

    error_type = "startup_error"


class SettingsError(StartupError):
    """An OPENJEV_* variable has an invalid value; the message names the variable."""

    error_type = "settings_error"


def echo(value: object) -> str:
    """A client's value as an error message quotes it: its repr, cut after ECHO_LIMIT characters with its length."""
    shown = repr(value)
    if len(shown) <= ECHO_LIMIT:
        return shown
    return f"{shown[:ECHO_LIMIT]}… ({len(value) if isinstance(value, str) else len(shown)} characters)"


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that failed a group of concurrent calls: ours first (it carries the status), else the first one."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    for exc in leaves:
        if isinstance(exc, OpenJevError):
            return exc
    return leaves[0]
