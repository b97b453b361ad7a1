"""A one-line progress bar on a terminal: done/total, rate and time left. Silent when not a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 28
_MIN_INTERVAL = 0.1  # seconds between redraws, so a fast run does not spend its time printing


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, *, enabled: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._total = total
        self._label = label
        self._done = 0
        self._failed = 0
        self._started = time.monotonic()
        self._drawn = 0.0

    def advance(self, *, failed: bool = False) -> None:
        self._done += 1
        self._failed += failed
        now = time.monotonic()
        if self._enabled and (now - self._drawn >= _MIN_INTERVAL or self._done == self._total):
            self._drawn = now
            self._stream.write("\r" + self.line(now - self._started))
            self._stream.flush()

    def line(self, elapsed: float) -> str:
        share = self._done / self._total if self._total else 1.0
        filled = round(share * _WIDTH)
        rate = self._done / elapsed if elapsed > 0 else 0.0
        left = (self._total - self._done) / rate if rate > 0 else float("inf")
        eta = f"{left:5.0f} s left" if left != float("inf") else "   ? s left"
        failed = f", {self._failed} failed" if self._failed else ""
        return (
            f"{self._label} [{'#' * filled}{'.' * (_WIDTH - filled)}] {self._done}/{self._total}"
            f"{failed}  {rate:.2f}/s  {eta}"
        )

    def close(self) -> None:
        if self._enabled and self._done:
            self._stream.write("\n")
            self._stream.flush()
