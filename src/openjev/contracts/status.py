"""The HTTP status of every openjev error, once for all contracts; a contract overrides only where its wire differs.

Keyed by `OpenJevError.error_type`. `INTERNAL` lists the errors no client should ever meet (start-up
and template failures caught before serving): they are a 500 like any unexpected exception. A test
walks every `OpenJevError` subclass and requires each to be in one of the two, so a new error type
cannot silently become a 500 on one contract.
"""

from __future__ import annotations

from collections.abc import Mapping

STATUS: Mapping[str, int] = {
    "invalid_request": 400,
    "unknown_model": 404,
    "request_too_large": 413,
    "unsupported_content_encoding": 415,
    "unsupported_media_type": 415,
    "bad_request": 400,
    "request_timeout": 408,
    "invalid_host": 400,
    "authentication_error": 401,
    "overloaded": 429,
    "timeout": 504,
    "not_ready": 503,
    "backend_unavailable": 503,
    "backend_error": 502,
    "client_closed_request": 499,  # nobody reads it (nginx's code for a client that went away)
}
INTERNAL = frozenset({"template_error", "startup_error", "settings_error"})
INTERNAL_STATUS = 500


def with_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """The shared table with a contract's own statuses; an override must name a known error type."""
    unknown = set(overrides) - set(STATUS)
    if unknown:
        raise ValueError(f"overrides name no known error type: {sorted(unknown)}")
    return {**STATUS, **overrides}
