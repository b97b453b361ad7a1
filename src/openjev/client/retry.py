"""Waiting out a busy server, for every client openjev ships (smoke, bulk, eval): the retry loop, and
reading the server's back-off hints (`Retry-After`, integer headers)."""

from __future__ import annotations

import asyncio
import email.utils
import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

_DIGITS = re.compile(r"\d+")
RETRIED_STATUSES = frozenset({503, 529})  # starting or overloaded: the same request may succeed later
T = TypeVar("T")


async def with_retries(
    send: Callable[[int], Awaitable[tuple[T, int | None, str | None]]],
    *,
    retries: int,
    wait: Callable[[str | None], float],
) -> T:
    """`send(attempt)` gives (its result, the status or None, the Retry-After value); while the status
    is 503 or 529 it is sent again after `wait(retry_after)` seconds, at most `retries` more times."""
    attempt = 0
    while True:
        attempt += 1
        result, status, retry_after = await send(attempt)
        if status not in RETRIED_STATUSES or attempt > retries:
            return result
        await asyncio.sleep(wait(retry_after))


def header_int(headers: Mapping[str, str], name: str) -> int | None:
    """A non-negative integer header, or None when it is absent or not an integer."""
    value = headers.get(name)
    return int(value) if value is not None and _DIGITS.fullmatch(value.strip()) else None


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None if unusable."""
    if value is None:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
