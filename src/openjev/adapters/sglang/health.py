"""SGLang's /health as openjev reports it: coalesced probes, and "slow" told apart from "down".

SGLang's own /health submits a one-token generation and answers 200 once any output arrives, or 503
after SGLANG_HEALTH_CHECK_TIMEOUT (20 s by default, sglang 0.5.23 `srt/environ.py`). Under load
it can take seconds, so a short probe timeout would flap between healthy and not. Here:

- one probe runs at a time: concurrent callers (a platform's checks, a load balancer, a person)
  share it, so /health traffic never multiplies against SGLang;
- a probe may run up to `limit` seconds (longer than SGLang's own 20 s), but a caller waits at most
  `patience` seconds for it. A probe still running then is **slow**: the backend is reported
  healthy-but-slow (`ok=True, slow=True`), never unhealthy on that alone;
- the backend is **down** when a probe *finishes* badly: connection refused or dropped, a non-200
  answer (SGLang's own 503 after 20 s included), or no answer within `limit`. It stays down until a
  probe answers 200.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from openjev.domain.ports import BackendHealth

PATIENCE = 3.0  # what one /health caller waits (openjev's /health gives the backend 5 s in all)
PROBE_LIMIT = 25.0  # SGLang answers 503 itself after 20 s: past 25 s it is not answering at all


@dataclass(frozen=True)
class ProbeResult:
    problem: str | None  # None: /health answered 200
    started: float
    finished: float


class HealthMonitor:
    """Runs `probe(limit) -> problem | None` (None when healthy) for callers of `check()`."""

    def __init__(
        self,
        probe: Callable[[float], Awaitable[str | None]],
        *,
        name: str,
        patience: float = PATIENCE,
        limit: float = PROBE_LIMIT,
    ) -> None:
        self._probe = probe
        self._name = name
        self._patience = patience
        self._limit = limit
        self._task: asyncio.Task[ProbeResult] | None = None
        self._started = 0.0
        self.last: ProbeResult | None = None
        self.probes = 0  # probes started (for tests and logs)

    async def check(self) -> BackendHealth:
        loop = asyncio.get_running_loop()
        task = self._task
        if task is None or task.done():
            self._started = loop.time()
            task = self._task = asyncio.create_task(self._run(), name="openjev-sglang-health")
            self.probes += 1
        # asyncio.wait never cancels the probe: a caller that gives up leaves it running for the next.
        done, _ = await asyncio.wait({task}, timeout=self._patience)
        if task in done:
            return self._verdict(task.result())
        waited = loop.time() - self._started
        last = self.last
        if last is not None and last.problem is not None:
            return BackendHealth(ok=False, detail=f"{last.problem} (the next check has run {waited:.1f} s)")
        return BackendHealth(
            ok=True,
            slow=True,
            detail=f"{self._name} is slow: its /health has not answered for {waited:.1f} s "
            f"(reported down only if it fails or stays silent for {self._limit:g} s)",
        )

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> ProbeResult:
        loop = asyncio.get_running_loop()
        started = loop.time()
        problem = await self._probe(self._limit)
        result = ProbeResult(problem=problem, started=started, finished=loop.time())
        self.last = result
        return result

    def _verdict(self, result: ProbeResult) -> BackendHealth:
        if result.problem is not None:
            return BackendHealth(ok=False, detail=result.problem)
        took = result.finished - result.started
        if took > self._patience:  # answered, but after a caller would have stopped waiting
            detail = f"{self._name} is healthy but slow (/health took {took:.1f} s)"
            return BackendHealth(ok=True, slow=True, detail=detail)
        return BackendHealth(ok=True, detail=f"{self._name} is healthy")
