"""SGLang's control routes over one aiohttp session: the start-up wait, limit discovery, /health, aborts.

Every reply read here is capped (`CONTROL_REPLY_BYTES`: the largest of them, `/server_info`, is
tens of kilobytes) and every call has a total timeout, so a backend that sends a huge or endless
reply, or stops half-way, costs a bounded amount of memory and time: the reply is dropped and its
connection closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec

from openjev.adapters.sglang.http1 import ReplyTooLarge
from openjev.adapters.sglang.peer import PeerKind, PeerSetting, is_router_info, listed_workers, resolve
from openjev.domain.errors import BackendError, BackendUnavailable, OpenJevError, StartupError
from openjev.logs import get_logger

log = get_logger("openjev.sglang")

# SGLang's Python server (uvicorn) closes idle keep-alive connections after 5 s
# (SGLANG_TIMEOUT_KEEP_ALIVE in `srt/environ.py`). Dropping ours first avoids reusing a
# connection the server is closing, which would fail a call with "server disconnected".
KEEPALIVE_SECONDS = 4.0
CONNECT_TIMEOUT = 10.0
STARTUP_PROBE_TIMEOUT = 25.0  # a /health that stalls answers 503 after SGLANG_HEALTH_CHECK_TIMEOUT=20 s.
INFO_TIMEOUT = 10.0
ABORT_TIMEOUT = 2.0
CONTROL_REPLY_BYTES = 1024 * 1024
_READ_PIECE = 64 * 1024
_encode = msgspec.json.Encoder()
_SET_CONTEXT = (
    "set OPENJEV_CONTEXT_LENGTH to the workers' context length (their --context-length, or max_req_input_len "
    "in a worker's /server_info)"
)


async def read_capped(response: aiohttp.ClientResponse, cap: int = CONTROL_REPLY_BYTES) -> bytes:
    """The body of `response`, or ReplyTooLarge (and the connection closed) once it passes `cap` bytes."""
    declared = response.content_length
    if declared is not None and declared > cap:
        response.close()
        raise ReplyTooLarge(f"the reply declares {declared} bytes, more than {cap}")
    pieces: list[bytes] = []
    size = 0
    while piece := await response.content.read(_READ_PIECE):
        size += len(piece)
        if size > cap:
            response.close()
            raise ReplyTooLarge(f"the reply passed {cap} bytes")
        pieces.append(piece)
    return b"".join(pieces)


@dataclass(frozen=True)
class ServerFacts:
    """What start-up learns from the info routes."""

    peer: PeerKind
    model_info: dict[str, Any]
    kv_cache_dtype: str | None
    # Largest prompt + one output token, when SGLang (or the setting) says; behind a router without
    # the setting, None until `router_context` asks the workers.
    context_tokens: int | None
    server_info: dict[str, Any]  # a worker's /server_info ({} behind a router)


class ControlClient:
    """The aiohttp session for every route but /generate, from `open()` to `close()`."""

    def __init__(self, url: str, *, api_key: str | None, connections: int) -> None:
        self.url = url
        self._api_key = api_key
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._abort_route_missing = False
        # What start-up found the peer to be (peer.py): the route that says it is healthy, and
        # whether it takes /abort_request (a router does not: nothing is sent there).
        self.health_route = "/health"
        self.takes_aborts = True

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise BackendUnavailable("the SGLang client is not started (or already closed)")
        return self._session

    @property
    def is_open(self) -> bool:
        return self._session is not None

    def open(self) -> None:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._connections, keepalive_timeout=KEEPALIVE_SECONDS)
            # Only connecting has a session-wide bound (an unreachable host fails fast as unavailable);
            # each call below has its own total timeout.
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout, raise_for_status=False)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def headers(self, *, json: bool = False) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if json else {}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    # -- health ------------------------------------------------------------------------------------

    async def probe_health(self, limit: float) -> str | None:
        """None when GET `health_route` answers 200 within `limit` seconds, else what went wrong."""
        route = self.health_route
        try:
            async with self.session.get(
                f"{self.url}{route}", headers=self.headers(), timeout=aiohttp.ClientTimeout(total=limit)
            ) as response:
                raw = await read_capped(response)
                if response.status == 200:
                    return None
                said = raw[:200].decode("utf-8", errors="replace").strip()
                return f"SGLang {route} answered {response.status}" + (f" ({said})" if said else "")
        except BackendUnavailable as exc:
            return exc.message
        except ReplyTooLarge as exc:
            return f"SGLang {route} sent too much: {exc}"
        except aiohttp.ClientConnectorError as exc:
            return f"cannot connect to SGLang at {self.url}: {exc.os_error}"
        except TimeoutError:
            return f"SGLang {route} did not answer within {limit:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            return f"SGLang {route} failed: {exc!r}"

    async def wait_healthy(self, budget: float) -> None:
        """Poll `health_route` until it answers 200; BackendUnavailable with the last problem after `budget` s."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + budget
        delay, next_report = 0.5, began + 10.0
        log.info("sglang_waiting", url=self.url, budget_s=budget)
        while True:
            remaining = deadline - loop.time()
            problem = await self.probe_health(min(STARTUP_PROBE_TIMEOUT, max(remaining, 0.1)))
            if problem is None:
                return
            now = loop.time()
            if now >= deadline:
                raise BackendUnavailable(
                    f"SGLang at {self.url} did not become healthy within {budget:g} s "
                    f"(last check: {problem}). If it is still loading, raise OPENJEV_STARTUP_TIMEOUT; "
                    "otherwise check SGLang's log."
                )
            if now >= next_report:
                log.info("sglang_still_waiting", url=self.url, waited_s=round(now - began), last=problem)
                next_report = now + 30.0
            await asyncio.sleep(min(delay, max(deadline - now, 0.0)))
            delay = min(delay * 1.5, 2.0)

    # -- limits and identity -------------------------------------------------------------------------

    async def get_json(self, path: str, *, base: str | None = None) -> Any:
        """GET an info route of `base` (default: the peer); None when it is missing (404) or its reply is not JSON."""
        url = base or self.url
        try:
            async with self.session.get(
                f"{url}{path}", headers=self.headers(), timeout=aiohttp.ClientTimeout(total=INFO_TIMEOUT)
            ) as response:
                raw = await read_capped(response)
                status = response.status
        except ReplyTooLarge as exc:
            raise BackendError(f"SGLang at {url} answered GET {path} with too much: {exc}") from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise BackendUnavailable(f"SGLang at {url} did not answer GET {path}: {exc!r}") from None
        if status in (401, 403):
            raise StartupError(
                f"SGLang at {url} refused GET {path} with {status}: set OPENJEV_BACKEND_API_KEY to the "
                "--api-key SGLang runs with (or unset it if SGLang has none)"
            )
        if status != 200:
            return None
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return None

    async def read_info(
        self, *, expected_model: str | None, configured_context: int | None, peer: PeerSetting = "auto"
    ) -> ServerFacts:
        """Whether the peer is a worker or a router (peer.py), then what each tells.

        A worker: its identity from /model_info, the request size limit from /server_info or
        /v1/models. A router has neither /model_info nor /server_info: its identity comes from
        /v1/models, and the limit from OPENJEV_CONTEXT_LENGTH, else none yet (its /v1/models has no
        max_model_len): `router_context` asks its workers once one is healthy. The setting caps
        whatever SGLang says.
        """
        server_info = await self.get_json("/server_info")
        alias = None if isinstance(server_info, dict) else await self.get_json("/get_server_info")
        kind = resolve(peer, server_info, alias)
        if not isinstance(server_info, dict) and isinstance(alias, dict) and not is_router_info(alias):
            server_info = alias  # an SGLang that has only the older name
        arguments: dict[str, Any] = server_info if isinstance(server_info, dict) and kind.peer == "worker" else {}
        info = await self.get_json("/model_info") if kind.peer == "worker" else None
        models = None
        limit = server_limit(arguments)
        if limit is None or not isinstance(info, dict):
            models = await self.get_json("/v1/models")
        if limit is None:
            limit = models_limit(models)
        model_info: dict[str, Any] = info if isinstance(info, dict) else models_identity(models)
        self._warn_on_other_model(model_info, expected_model)
        if limit is not None and configured_context is not None:
            limit = min(limit, configured_context)
        context = limit if limit is not None else configured_context
        return ServerFacts(kind, model_info, kv_cache_dtype(arguments), context, arguments)

    async def router_context(self) -> int:
        """The context behind a router: the smallest that its healthy workers say, each read as a worker's.

        The router lists its workers (`GET /workers`); each one's /server_info or /v1/models says its
        limit, and the smallest holds for every call, wherever the router sends it. Workers the
        router holds unhealthy are left out (logged): it sends them nothing. StartupError, naming
        the URL and OPENJEV_CONTEXT_LENGTH (which skips all this), when the router lists no healthy
        worker or a worker does not say.
        """
        workers = listed_workers(await self.get_json("/workers"))
        if workers is None:
            raise StartupError(
                f"SGLang's router at {self.url} does not list its workers (GET /workers answered no `workers` list), "
                f"so openjev cannot ask them their context length: {_SET_CONTEXT}"
            )
        healthy = [worker.url for worker in workers if worker.is_healthy]
        if not healthy:
            held = f"none of its workers is healthy ({', '.join(w.url for w in workers)})" if workers else "no workers"
            raise StartupError(
                f"SGLang's router at {self.url} lists {held}, so openjev cannot ask them their context length: "
                f"add a healthy worker to the router, or {_SET_CONTEXT}"
            )
        if len(healthy) < len(workers):
            log.warning(
                "sglang_router_workers_skipped",
                detail="workers the router holds unhealthy were not asked their context length",
                workers=[worker.url for worker in workers if not worker.is_healthy],
            )
        said = await asyncio.gather(*(self._worker_context(url) for url in healthy), return_exceptions=True)
        contexts: dict[str, int] = {}
        for url, outcome in zip(healthy, said, strict=True):
            if isinstance(outcome, BaseException):
                raise outcome  # the first worker listed that did not say
            contexts[url] = outcome
        log.info("sglang_router_context", router=self.url, workers=contexts, context_tokens=min(contexts.values()))
        return min(contexts.values())

    async def _worker_context(self, url: str) -> int:
        """A worker's limit as `read_info` reads it (/server_info, else /v1/models), or StartupError naming it."""
        if not url.startswith(("http://", "https://")):
            problem = "openjev reads a worker over HTTP, and this one is not at an http(s) URL"
        else:
            try:
                limit = server_limit(await self.get_json("/server_info", base=url))
                if limit is None:
                    limit = models_limit(await self.get_json("/v1/models", base=url))
            except OpenJevError as exc:
                problem = exc.message
            else:
                if limit is not None:
                    return limit
                problem = "neither its /server_info nor its /v1/models says a context length"
        raise StartupError(
            f"cannot read the context length of worker {url}, which SGLang's router at {self.url} lists: "
            f"{problem}. Let openjev reach the worker, or {_SET_CONTEXT}"
        )

    def _warn_on_other_model(self, model_info: dict[str, Any], expected_model: str | None) -> None:
        served = {model_info.get("model_path"), model_info.get("served_model_name")} - {None}
        if expected_model and served and expected_model not in served:
            log.warning(
                "sglang_model_mismatch",
                detail="SGLang serves another model than OPENJEV_MODEL: the tokenizer must match it",
                sglang=sorted(map(str, served)),
                openjev=expected_model,
            )

    # -- aborts --------------------------------------------------------------------------------------

    async def abort(self, rids: Sequence[str]) -> None:
        """POST /abort_request for each rid; best effort, quick, never raises (but lets a cancel through).

        Nothing is sent to a router (`takes_aborts` False): start-up logged once that aborted calls
        run to completion on the workers.
        """
        if self._session is None or not rids or not self.takes_aborts:
            return
        await asyncio.gather(*(self._abort_one(self._session, rid) for rid in rids))

    async def _abort_one(self, session: aiohttp.ClientSession, rid: str) -> None:
        try:
            async with session.post(
                f"{self.url}/abort_request",
                data=_encode.encode({"rid": rid}),
                headers=self.headers(json=True),
                timeout=aiohttp.ClientTimeout(total=ABORT_TIMEOUT),
            ) as response:
                await read_capped(response)
                if response.status == 404 and not self._abort_route_missing:
                    self._abort_route_missing = True
                    log.warning(
                        "sglang_abort_unsupported",
                        url=self.url,
                        detail="no /abort_request (SGLang's router has none): aborted calls run to the end",
                    )
                elif response.status >= 400:
                    log.debug("sglang_abort_refused", status=response.status)
        except (aiohttp.ClientError, TimeoutError, OSError, ReplyTooLarge) as exc:
            log.debug("sglang_abort_failed", error=repr(exc))


def server_limit(info: Any) -> int | None:
    """Largest prompt + one output token SGLang admits, from /server_info.

    SGLang refuses a prompt of `max_req_input_len` tokens or more (`srt/managers/scheduler.py`
    `validate_input_length`), so prompt + the one output token fits in `max_req_input_len`.
    """
    if not isinstance(info, dict):
        return None
    value = info.get("max_req_input_len")
    if isinstance(value, int) and value > 0:
        return value
    value = info.get("context_length")
    if isinstance(value, int) and value > 0:
        return value
    return None


def kv_cache_dtype(server_info: Any) -> str | None:
    """`kv_cache_dtype` from /server_info (SGLang's resolved arguments), or None when it is not there."""
    if isinstance(server_info, dict):
        value = server_info.get("kv_cache_dtype")
        if isinstance(value, str) and value:
            return value
    return None


def models_identity(models: Any) -> dict[str, Any]:
    """`model_path` and `served_model_name` from the first card of /v1/models (its `root` and `id`)."""
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        card = models["data"][0]
        if isinstance(card, dict):
            name = card.get("id")
            root = card.get("root")
            identity = {"model_path": root if isinstance(root, str) else name, "served_model_name": name}
            return {key: value for key, value in identity.items() if isinstance(value, str)}
    return {}


def models_limit(models: Any) -> int | None:
    """`max_model_len` of the first card of /v1/models (the model's context length)."""
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        card = models["data"][0]
        value = card.get("max_model_len") if isinstance(card, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None
