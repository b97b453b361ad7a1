"""Admission control: refuse with 529 + Retry-After instead of queueing without bound.

The counter is per API process (Granian worker); docs/settings.md says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from openjev.domain.errors import Overloaded


class Admission:
    def __init__(self, limit: int, retry_after: int = 1) -> None:
        self.limit = limit
        self.retry_after = retry_after
        self.active = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        if self.active >= self.limit:
            raise Overloaded(
                f"{self.active} evaluations are running, the limit is {self.limit}; retry shortly",
                retry_after=self.retry_after,
            )
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
