"""Run the smoke checks over HTTP: wait out a cold start, send each check, write the result file.

A server that is waking up (a Modal container scaled to zero, SGLang loading weights) refuses
connections or answers 503 with `Retry-After` for minutes. The runner polls `GET /health`,
honouring `Retry-After`, until it answers or the start-up budget runs out; only then does it
measure anything, so latencies describe a warm server and the wait is reported on its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from openjev.client.retry import header_int, retry_after_seconds, with_retries
from openjev.smoke.checks import ALIAS_MODEL, Check, catalog_check, listed_model
from openjev.smoke.suite import build_checks

REQUEST_ID_HEADER = "x-typesafe-request-id"
PREFIX_TOKENS_HEADER = "x-openjev-prefix-tokens"
CACHED_TOKENS_HEADER = "x-openjev-cached-tokens"
WAKING_STATUSES = frozenset({502, 503, 504, 529})  # a proxy or server still starting, or busy
HEALTH_BODY_LIMIT = 64 * 1024  # bytes of a /health answer read while waiting (a proxy's page may be large)
EXIT_OK, EXIT_FAILED, EXIT_NOT_READY = 0, 1, 2


@dataclass(frozen=True)
class SmokeOptions:
    url: str
    key: str | None = None
    out: Path | None = Path("smoke-result.json")
    startup_timeout: float = 1800.0  # a first Modal start downloads ~23.5 GB and compiles kernels
    request_timeout: float = 180.0  # above the server's own 120 s request timeout (docs/spec.md#limits-and-errors)
    model: str = ALIAS_MODEL
    retries: int = 5  # 503/529 answers to a check, each retried after its Retry-After
    poll_interval: float = 2.0  # between health polls when the server gives no Retry-After
    max_wait_step: float = 30.0  # cap on any one Retry-After, so a long hint cannot stall the run


class CallRecord(msgspec.Struct):
    """One HTTP exchange. The header figures are null when the header is absent, never 0."""

    method: str
    path: str
    status: int | None
    latency_seconds: float | None
    request_id: str | None
    prefix_tokens: int | None
    cached_tokens: int | None
    attempts: int
    error: str | None = None


class CheckResult(msgspec.Struct):
    name: str
    ok: bool
    reason: str
    purpose: str
    call: CallRecord | None = None
    answers: Any = None  # the answers of a semantic check, to see how it was decided


class SmokeResult(msgspec.Struct):
    url: str
    ok: bool
    server_model: str | None
    request_model: str
    startup_wait_seconds: float
    started_at: str
    duration_seconds: float
    passed: int
    failed: int
    checks: list[CheckResult]

    @property
    def exit_code(self) -> int:
        if self.ok:
            return EXIT_OK
        startup = next((c for c in self.checks if c.name == "startup"), None)
        return EXIT_NOT_READY if startup is not None and not startup.ok else EXIT_FAILED


async def _read_body(response: aiohttp.ClientResponse) -> Any:
    text = await response.text()
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


class _Client:
    """The HTTP side: one session, the base URL, the options."""

    def __init__(self, session: aiohttp.ClientSession, options: SmokeOptions) -> None:
        self.session = session
        self.options = options
        self.base = options.url.rstrip("/")

    def _wait_step(self, hint: str | None, default: float) -> float:
        seconds = retry_after_seconds(hint)
        return min(self.options.max_wait_step, default if seconds is None else max(seconds, 0.1))

    async def wait_until_ready(self) -> CheckResult:
        """Poll GET /health until it answers 2xx (or the server itself refuses), within the start-up budget.

        Refused connections, 5xx and a 4xx that is not the server's own answer mean "not there yet":
        Modal's edge answers 404 until a new deployment's route is live.
        """
        budget = self.options.startup_timeout
        start = time.monotonic()
        polls, last = 0, "no answer yet"
        while True:
            polls += 1
            remaining = budget - (time.monotonic() - start)
            delay = self.options.poll_interval
            try:
                timeout = aiohttp.ClientTimeout(total=max(1.0, min(30.0, remaining)))
                async with self.session.get(self.base + "/health", timeout=timeout) as response:
                    body = await response.content.read(HEALTH_BODY_LIMIT)
                    if 200 <= response.status < 300 or _the_server_refused(response.status, body):
                        waited = time.monotonic() - start
                        note = "" if response.status == 200 else f" (GET /health answered {response.status})"
                        return CheckResult(
                            "startup", True, f"ready after {waited:.1f} s, {polls} poll(s){note}", _STARTUP
                        )
                    last = f"GET /health answered {response.status}"
                    delay = self._wait_step(response.headers.get("Retry-After"), delay)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}".rstrip(": ")
                delay = min(delay, 1.0)
            remaining = budget - (time.monotonic() - start)
            if remaining <= 0:
                reason = f"not ready after {budget:.0f} s and {polls} poll(s); last: {last}"
                return CheckResult("startup", False, reason, _STARTUP)
            await asyncio.sleep(min(delay, remaining))

    async def send(self, check: Check) -> tuple[CallRecord, Any]:
        """Send one check's request, again after Retry-After while the server says 503 or 529."""
        timeout = aiohttp.ClientTimeout(total=self.options.request_timeout)

        async def send(attempt: int) -> tuple[tuple[CallRecord, Any], int | None, str | None]:
            began = time.monotonic()
            try:
                async with self.session.request(
                    check.method, self.base + check.path, json=check.body, timeout=timeout
                ) as response:
                    body = await _read_body(response)
                    headers = response.headers
                    record = CallRecord(
                        method=check.method,
                        path=check.path,
                        status=response.status,
                        latency_seconds=time.monotonic() - began,
                        request_id=headers.get(REQUEST_ID_HEADER),
                        prefix_tokens=header_int(headers, PREFIX_TOKENS_HEADER),
                        cached_tokens=header_int(headers, CACHED_TOKENS_HEADER),
                        attempts=attempt,
                    )
                    return (record, body), response.status, headers.get("Retry-After")
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = f"{type(exc).__name__}: {exc}".rstrip(": ")
                return (
                    (CallRecord(check.method, check.path, None, None, None, None, None, attempt, error), None),
                    None,
                    None,
                )

        return await with_retries(
            send, retries=self.options.retries, wait=lambda hint: self._wait_step(hint, self.options.poll_interval)
        )


_STARTUP = "the server answers GET /health within the start-up budget"


def _the_server_refused(status: int, body: bytes) -> bool:
    """A 4xx carrying the server's own JSON (its health report, or its `detail.error_type` error body).

    That one says the server is up (a /health behind a key, a host check); any other 4xx comes from
    something in front of it, such as a proxy whose route is not live yet, and is waited through.
    """
    if not 400 <= status < 500 or status in WAKING_STATUSES:
        return False
    try:
        answer = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    if not isinstance(answer, dict):
        return False
    detail = answer.get("detail")
    return isinstance(answer.get("status"), str) or (isinstance(detail, dict) and "error_type" in detail)


async def run_smoke(options: SmokeOptions) -> SmokeResult:
    """Wait for the server, run every check in order, write the result file (when `out` is set)."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    start = time.monotonic()
    headers = {"User-Agent": "openjev-smoke"}
    if options.key:
        headers["Authorization"] = f"Bearer {options.key}"
    results: list[CheckResult] = []
    server_model: str | None = None
    async with aiohttp.ClientSession(headers=headers) as session:
        client = _Client(session, options)
        startup = await client.wait_until_ready()
        startup_wait = time.monotonic() - start
        results.append(startup)
        if startup.ok:
            catalog = catalog_check()
            record, body = await client.send(catalog)
            results.append(_judge(catalog, record, body))
            catalog_model = listed_model(body) if record.status == 200 else None
            for check in build_checks(options.model, catalog_model):
                record, body = await client.send(check)
                results.append(_judge(check, record, body))
                if server_model is None and record.status == 200 and isinstance(body, dict):
                    model = body.get("model")
                    server_model = model if isinstance(model, str) else None
            server_model = server_model or catalog_model
    failed = sum(not r.ok for r in results)
    result = SmokeResult(
        url=options.url,
        ok=failed == 0,
        server_model=server_model,
        request_model=options.model,
        startup_wait_seconds=round(startup_wait, 3),
        started_at=started_at,
        duration_seconds=round(time.monotonic() - start, 3),
        passed=len(results) - failed,
        failed=failed,
        checks=results,
    )
    if options.out is not None:
        write_result(result, options.out)
    return result


def _judge(check: Check, record: CallRecord, body: Any) -> CheckResult:
    if record.status is None:
        return CheckResult(check.name, False, record.error or "no answer", check.purpose, record)
    verdict = check.evaluate(record.status, body)
    answers = body.get("answers") if check.keep_answers and isinstance(body, dict) else None
    return CheckResult(check.name, verdict.ok, verdict.reason, check.purpose, record, answers)


def write_result(result: SmokeResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=2) + b"\n")


def format_summary(result: SmokeResult) -> str:
    """A few lines for a terminal: one per check, then the verdict."""
    lines = [
        f"openjev smoke {result.url}  model={result.server_model or '?'}  "
        f"start-up wait {result.startup_wait_seconds:.1f} s"
    ]
    for check in result.checks:
        latency = check.call.latency_seconds if check.call else None
        shown = f"{latency * 1000:7.0f} ms" if latency is not None and math.isfinite(latency) else " " * 10
        lines.append(f"  {'PASS' if check.ok else 'FAIL'}  {check.name:<24}{shown}  {check.reason}")
    verdict = "all checks passed" if result.ok else f"{result.failed} check(s) FAILED"
    lines.append(f"{result.passed}/{result.passed + result.failed} passed: {verdict}")
    return "\n".join(lines)


def run_smoke_sync(options: SmokeOptions) -> SmokeResult:
    """`run_smoke` from synchronous code, also when the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run_smoke(options))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, run_smoke(options)).result()
