"""An async client for `POST /v1/systemone` that waits out 503/529 answers as the server asks."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import msgspec

from openjev.client.retry import retry_after_seconds, with_retries

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_RETRY_SECONDS = 1.0  # when a 503/529 carries no usable Retry-After
MAX_RETRY_SECONDS = 30.0  # cap on one wait, so a long hint cannot stall a run


class Reply(msgspec.Struct, frozen=True):
    """The final answer to one request: status, decoded body, and seconds from first send to reply."""

    status: int
    body: Any
    latency: float
    attempts: int

    @property
    def ok(self) -> bool:
        return self.status == 200

    def error(self) -> str:
        """The server's own explanation of a failed request, in one line."""
        detail = self.body.get("detail") if isinstance(self.body, dict) else None
        if isinstance(detail, dict):
            text = str(detail.get("message", detail))
        elif isinstance(detail, list) and detail:
            text = "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)
        else:
            text = str(self.body)[:300]
        return f"HTTP {self.status}: {text}"


class SystemOneClient:
    """One pooled aiohttp session; use as `async with SystemOneClient(url) as client`."""

    def __init__(self, url: str = DEFAULT_URL, *, key: str | None = None, timeout: float = 300.0, retries: int = 5):
        self._url = url.rstrip("/") + "/v1/systemone"
        self._headers = {"content-type": "application/json"}
        if key:
            self._headers["authorization"] = f"Bearer {key}"
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._retries = retries
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SystemOneClient:
        self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def decide(self, request: dict[str, Any]) -> Reply:
        """Send one request; 503 and 529 are sent again after Retry-After, up to `retries` times."""
        if self._session is None:
            raise RuntimeError("use the client inside `async with`")
        session = self._session
        body = msgspec.json.encode(request)
        started = time.perf_counter()

        async def send(attempt: int) -> tuple[Reply, int, str | None]:
            async with session.post(self._url, data=body) as response:
                raw = await response.read()
                status, hint = response.status, response.headers.get("retry-after")
            reply = Reply(status=status, body=_decode(raw), latency=time.perf_counter() - started, attempts=attempt)
            return reply, status, hint

        return await with_retries(send, retries=self._retries, wait=_wait)


def _wait(retry_after: str | None) -> float:
    return min(MAX_RETRY_SECONDS, retry_after_seconds(retry_after) or DEFAULT_RETRY_SECONDS)


def _decode(raw: bytes) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return raw.decode("utf-8", "replace")
