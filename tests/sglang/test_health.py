"""SGLang health as openjev reports it: a slow /health is "slow", not "down"; concurrent probes coalesce.

SGLang 0.5.23's own /health waits for a one-token generation and answers 503 only after 20 s, so
under load it takes seconds: a single slow probe must not turn openjev's /health to 503.
"""

from __future__ import annotations

import asyncio
import time

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.health import PATIENCE, HealthMonitor
from openjev.domain.ports import BackendHealth
from openjev.http.lifecycle import Phase, backend_state
from tests.sglang_emulator import SGLangEmulator


def health_requests(emulator: SGLangEmulator) -> int:
    return sum(1 for r in emulator.requests if r.path == "/health")


async def test_a_slow_sglang_health_is_slow_not_down_and_probes_coalesce(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.health_delay = PATIENCE + 1.5  # longer than a caller waits, far below SGLang's 20 s
    before = health_requests(emulator)
    began = time.monotonic()
    reports = await asyncio.gather(*(backend.health() for _ in range(6)))
    assert time.monotonic() - began < PATIENCE + 1.0  # callers do not wait for the slow probe
    assert all(r.ok and r.slow for r in reports), reports
    assert "is slow" in reports[0].detail
    assert health_requests(emulator) - before == 1  # six callers, one probe
    again = await backend.health()  # the same probe is still running: joined, not repeated
    assert again.ok and again.slow
    assert health_requests(emulator) - before == 1
    emulator.config.health_delay = 0.0
    await asyncio.sleep(2.0)  # the slow probe finishes (200)
    healthy = await backend.health()
    assert healthy.ok and not healthy.slow


async def test_sglang_refusing_health_is_down_and_recovers(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    emulator.config.unhealthy = True
    down = await backend.health()
    assert not down.ok and "503" in down.detail
    emulator.config.unhealthy = False
    assert (await backend.health()).ok


async def test_down_stays_down_while_the_next_probe_is_slow() -> None:
    answers: list[tuple[float, str | None]] = [(0.0, "SGLang /health answered 503"), (1.0, None), (0.0, None)]
    limits: list[float] = []

    async def probe(limit: float) -> str | None:
        limits.append(limit)
        delay, problem = answers.pop(0)
        await asyncio.sleep(delay)
        return problem

    monitor = HealthMonitor(probe, name="SGLang", patience=0.1, limit=7.0)
    first = await monitor.check()
    assert not first.ok and first.detail == "SGLang /health answered 503"
    second = await monitor.check()  # slow, after a failure: still down
    assert not second.ok and "503" in second.detail
    await asyncio.sleep(1.1)  # the slow probe answers 200 meanwhile
    assert monitor.last is not None and monitor.last.problem is None
    third = await monitor.check()
    assert third.ok and not third.slow
    assert limits == [7.0, 7.0, 7.0]  # every probe may take up to the limit, beyond the caller's patience
    await monitor.close()


async def test_a_probe_answering_late_is_healthy_but_slow() -> None:
    async def probe(limit: float) -> str | None:
        await asyncio.sleep(0.05)
        return None

    monitor = HealthMonitor(probe, name="SGLang", patience=0.01, limit=5.0)
    first = await monitor.check()
    assert first.ok and first.slow
    await asyncio.sleep(0.1)
    assert monitor.probes == 1
    await monitor.close()


def test_health_report_states() -> None:
    ok, slow, down = (BackendHealth(ok=True, detail=""), BackendHealth(ok=True, detail="", slow=True),
                      BackendHealth(ok=False, detail=""))  # fmt: skip
    assert backend_state(Phase.READY, ok) == "ok"
    assert backend_state(Phase.READY, slow) == "slow"
    assert backend_state(Phase.READY, down) == "down"
    assert backend_state(Phase.STARTING, down) == "starting"
    assert backend_state(Phase.FAILED, down) == "down"
