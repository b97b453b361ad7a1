"""The SGLang scoring backend: SGLang's native HTTP API (`/generate`) over kept-alive connections.

Every call is a single-token greedy `/generate` on token ids (never text), asking for the exact
label ids with `token_ids_logprob`. Greedy (`temperature: 0`) matters: SGLang returns raw,
untempered log-probabilities only when the request is greedy, otherwise it returns the
temperature-scaled ones (`srt/layers/sampler.py`). The labels are read from
`meta_info.output_token_ids_logprobs[0]` by token id, and a label SGLang did not return is an
error, never a zero.

A request's branches go in ONE batched `/generate` (`score_many`): `input_ids` a list of lists, one
`sampling_params` object, `return_logprob` and `logprob_start_len` as scalars, `token_ids_logprob`
one list per item, and `rid` a list with one rid per call. What SGLang 0.5.23 does with it:
- `srt/managers/io_struct.py` (`GenerateReqInput.normalize_batch_and_arguments`): a first element
  that is a list makes `input_ids` a batch; a dict `sampling_params` and scalar `return_logprob` /
  `logprob_start_len` are repeated for every item; a nested `token_ids_logprob` is taken per item
  (a flat one would be copied to all); a list `rid` must have the batch's length and no duplicate.
- `srt/managers/tokenizer_manager.py` (`_handle_batch_request`): with `n` = 1 and token ids only
  (no text, no attention data parallelism) every item is checked and the whole batch reaches the
  scheduler as one message (`_send_batch_request`); there is no shared-prefix pre-fill on this
  path (that is the `n` > 1 path), which is why the prefix is still warmed first. Each item keeps
  its own rid state, so `/abort_request` with one item's rid stops that item (`abort_request` only
  forwards a rid it knows). Items are awaited together (`_collect_batch_responses`): an item
  aborted by `/abort_request` comes back in the list with `finish_reason.type == "abort"`, while
  an item refused with a status fails the whole HTTP request with it.
- `srt/entrypoints/http_server.py` (`serve_generate_request`): the non-streamed reply is the JSON
  list of the items' outputs, in the order of the request; `srt/entrypoints/api_contract.py` and
  `api/v1/api_types.py` (`GenerateRequest`: `StringOrList`, `TokenIdsOrList`, `BoolOrList`,
  `Int64OrList`) accept these shapes.
A single call keeps the plain (non-batch) body.

SGLang's shapes and behaviours this module relies on are cited as files of the pinned release,
relative to https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/ (docs/sglang.md says more).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import msgspec

from openjev.adapters.sglang.checks import NO_LABEL_LOGPROBS, kv_cache_dtype, report_kv_cache, verify_key_enforced
from openjev.adapters.sglang.health import HealthMonitor
from openjev.adapters.sglang.http1 import ConnectFailed, ConnectionDropped, Http1Pool, MalformedResponse
from openjev.domain.errors import BackendError, BackendUnavailable, OpenJevError, StartupError
from openjev.domain.ports import BackendHealth, CallUsage, LabelScores, ScoreCall
from openjev.logs import get_logger

log = get_logger("openjev.sglang")

# Connections kept beyond the branch limit: one warm-up per admitted request can run beside the
# branches, and /health and /abort_request must never queue behind a full pool of slow calls.
CONTROL_CONNECTIONS = 4
# SGLang's Python server (uvicorn) closes idle keep-alive connections after 5 s
# (SGLANG_TIMEOUT_KEEP_ALIVE in `srt/environ.py`). Dropping ours first avoids reusing a
# connection the server is closing, which would fail a call with "server disconnected".
KEEPALIVE_SECONDS = 4.0
STARTUP_PROBE_TIMEOUT = 25.0  # a /health that stalls answers 503 after SGLANG_HEALTH_CHECK_TIMEOUT=20 s.
INFO_TIMEOUT = 10.0
ABORT_TIMEOUT = 2.0
CONNECT_TIMEOUT = 10.0

_HEX32 = re.compile(r"[0-9a-f]{32}")


def rid_for(call_id: str) -> str:
    """The SGLang request id for a call id, such that no rid is a prefix of another.

    SGLang's scheduler aborts every request whose rid *starts with* the aborted rid
    (`srt/managers/scheduler.py`: `req.rid.startswith(recv_req.rid)`), so aborting one call must not
    match another.
    32-hex-digit ids (what the use case passes, `openjev.ids.random_id`) are fixed-length and so
    prefix-free already: they are used as they are. Any other id is framed with its length, which
    keeps the set prefix-free.
    """
    if _HEX32.fullmatch(call_id):
        return call_id
    return f"openjev-{len(call_id)}-{call_id}"


class _Entry(msgspec.Struct, array_like=True, forbid_unknown_fields=False):
    """One `[logprob, token_id, text]` element (`LogprobEntry` in `api/v1/api_types.py`)."""

    logprob: float | None
    token_id: int


class _MetaInfo(msgspec.Struct):
    prompt_tokens: int
    cached_tokens: int | None = None
    finish_reason: dict[str, Any] | None = None
    output_token_ids_logprobs: list[list[_Entry] | None] | None = None


class _GenerateResponse(msgspec.Struct):
    meta_info: _MetaInfo


_decode_generate = msgspec.json.Decoder(_GenerateResponse)
_decode_batch = msgspec.json.Decoder(list[_GenerateResponse])
_encode = msgspec.json.Encoder()
# Greedy: SGLang then returns raw log_softmax values, not temperature-scaled ones (`srt/layers/sampler.py`).
_ONE_GREEDY_TOKEN = {"max_new_tokens": 1, "temperature": 0}


class SGLangBackend:
    """A `ScoringBackend` for an SGLang server (or SGLang's router) at `url`.

    From `start()` to `close()`, /generate calls go through a lean HTTP/1.1 connection pool
    (`http1.py`: a sixth of aiohttp's CPU time per call) and the other routes through one
    keep-alive `aiohttp.ClientSession`. `max_connections` is the most /generate calls the caller
    runs at once (`build_runtime`: the branch limit plus one warm-up per admitted request); each
    pool holds CONTROL_CONNECTIONS more, as the one shared pool of before did, and /health and
    /abort_request never wait behind slow calls. `url` may be SGLang's router (docs/sglang.md).
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        max_connections: int = 64,
        startup_timeout: float = 1800.0,
        context_length: int | None = None,
        expected_model: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._api_key = api_key
        self._max_connections = max_connections
        self._startup_timeout = startup_timeout
        self._configured_context = context_length
        self._expected_model = expected_model
        self._session: aiohttp.ClientSession | None = None  # every route but /generate
        self._generate_pool: Http1Pool | None = None  # /generate
        self._context: int | None = context_length
        self._abort_route_missing = False
        self._health = HealthMonitor(self._probe_health, name=f"SGLang at {self.url}")
        self._incompatible: str | None = None  # set at the first reply without label log-probabilities
        self.model_info: dict[str, Any] = {}
        self.kv_cache_dtype: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Wait for SGLang's /health within the start-up budget, then read what the model allows."""
        if self._session is None:
            self._session = self._new_session()
            self._generate_pool = self._new_pool()
        loop = asyncio.get_running_loop()
        began = loop.time()
        deadline = began + self._startup_timeout
        delay, next_report = 0.5, began + 10.0
        log.info("sglang_waiting", url=self.url, budget_s=self._startup_timeout)
        while True:
            remaining = deadline - loop.time()
            problem = await self._probe_health(min(STARTUP_PROBE_TIMEOUT, max(remaining, 0.1)))
            if problem is None:
                break
            now = loop.time()
            if now >= deadline:
                raise BackendUnavailable(
                    f"SGLang at {self.url} did not become healthy within {self._startup_timeout:g} s "
                    f"(last check: {problem}). If it is still loading, raise OPENJEV_STARTUP_TIMEOUT; "
                    "otherwise check SGLang's log."
                )
            if now >= next_report:
                log.info("sglang_still_waiting", url=self.url, waited_s=round(now - began), last=problem)
                next_report = now + 30.0
            await asyncio.sleep(min(delay, max(deadline - now, 0.0)))
            delay = min(delay * 1.5, 2.0)
        await self._read_info()
        if self._api_key:
            await verify_key_enforced(self._session, self.url)
        report_kv_cache(self.url, self.kv_cache_dtype)
        log.info(
            "sglang_ready",
            url=self.url,
            waited_s=round(loop.time() - began, 1),
            model=self.model_info.get("model_path"),
            context_tokens=self._context,
            kv_cache_dtype=self.kv_cache_dtype,
        )

    async def close(self) -> None:
        await self._health.close()
        session, self._session = self._session, None
        pool, self._generate_pool = self._generate_pool, None
        if pool is not None:
            await pool.close()
        if session is not None:
            await session.close()

    def context_tokens(self) -> int | None:
        return self._context

    async def health(self) -> BackendHealth:
        if self._session is None:
            return BackendHealth(ok=False, detail="the SGLang client is not started")
        if self._incompatible is not None:
            return BackendHealth(ok=False, detail=self._incompatible)
        return await self._health.check()  # coalesced; slow is not down (health.py)

    # -- calls ---------------------------------------------------------------------------------------

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        body = {
            "input_ids": _ids(token_ids),
            "sampling_params": _ONE_GREEDY_TOKEN,
            "rid": rid_for(call_id),
        }
        (meta,) = await self._generate(body, None)
        return _usage(meta)

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        (scores,) = await self.score_many((ScoreCall(call_id, token_ids, label_ids),))
        return scores

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """Every call in one /generate: a batch body for two or more, the plain body for one."""
        if not calls:
            return []
        if self._incompatible is not None:
            raise BackendError(self._incompatible)
        batch = None if len(calls) == 1 else len(calls)

        def per_call(values: list[Any]) -> Any:
            """A batch carries one value per call; a plain body carries the one call's value."""
            return values if batch else values[0]

        body = {
            "input_ids": per_call([_ids(c.token_ids) for c in calls]),
            # Scalars and the one sampling_params object apply to every item of a batch.
            "sampling_params": _ONE_GREEDY_TOKEN,
            "return_logprob": True,
            "token_ids_logprob": per_call([_ids(c.label_ids) for c in calls]),
            "logprob_start_len": -1,  # output position only: no prompt logprobs, full cache reuse.
            "rid": per_call([rid_for(c.call_id) for c in calls]),
        }
        metas = await self._generate(body, batch)
        return [self._label_scores(meta, call.label_ids) for meta, call in zip(metas, calls, strict=True)]

    def _label_scores(self, meta: _MetaInfo, label_ids: Sequence[int]) -> LabelScores:
        if not meta.output_token_ids_logprobs or meta.output_token_ids_logprobs[0] is None:
            # Not a bad call but a backend that can never serve openjev: fail now, and stay failed.
            self._incompatible = NO_LABEL_LOGPROBS
            log.error("sglang_no_label_logprobs", url=self.url, detail=NO_LABEL_LOGPROBS)
            raise BackendError(NO_LABEL_LOGPROBS)
        return LabelScores(logprobs=_label_logprobs(meta, label_ids), usage=_usage(meta))

    async def abort(self, call_ids: Sequence[str]) -> None:
        """POST /abort_request for each call; best effort, quick, never raises (but lets a cancel through)."""
        session = self._session
        if session is None or not call_ids:
            return
        await asyncio.gather(*(self._abort_one(session, rid_for(c)) for c in call_ids))

    async def _abort_one(self, session: aiohttp.ClientSession, rid: str) -> None:
        try:
            async with session.post(
                f"{self.url}/abort_request",
                data=_encode.encode({"rid": rid}),
                headers=self._headers(json=True),
                timeout=aiohttp.ClientTimeout(total=ABORT_TIMEOUT),
            ) as response:
                await response.read()
                if response.status == 404 and not self._abort_route_missing:
                    self._abort_route_missing = True
                    log.warning(
                        "sglang_abort_unsupported",
                        url=self.url,
                        detail="no /abort_request (SGLang's router has none): aborted calls run to the end",
                    )
                elif response.status >= 400:
                    log.debug("sglang_abort_refused", status=response.status)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.debug("sglang_abort_failed", error=repr(exc))

    # -- HTTP plumbing ------------------------------------------------------------------------------

    def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._max_connections + CONTROL_CONNECTIONS,
            keepalive_timeout=KEEPALIVE_SECONDS,
        )
        # No total timeout: the use case owns the deadline and cancels the call; only connecting
        # is bounded here so that an unreachable host fails fast as unavailable.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
        return aiohttp.ClientSession(connector=connector, timeout=timeout, raise_for_status=False)

    def _new_pool(self) -> Http1Pool:
        """/generate's connections: as many as the aiohttp session allows, with its timeouts and key."""
        return Http1Pool(
            self.url,
            limit=self._max_connections + CONTROL_CONNECTIONS,
            keepalive=KEEPALIVE_SECONDS,
            connect_timeout=CONNECT_TIMEOUT,
            headers=self._headers(),
        )

    def _headers(self, *, json: bool = False) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if json else {}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise BackendUnavailable("the SGLang client is not started (or already closed)")
        return self._session

    async def _generate(self, body: Mapping[str, Any], batch: int | None) -> list[_MetaInfo]:
        """POST /generate; the items' meta_info in order (`batch` items, or one for a plain body).

        Every item is checked: a malformed reply or an item SGLang aborted fails the call. A
        cancelled call closes its connection (a reply may still come on it).
        """
        pool = self._generate_pool
        if pool is None:
            raise BackendUnavailable("the SGLang client is not started (or already closed)")
        try:
            reply = await pool.post("/generate", _encode.encode(body))
        except ConnectFailed as exc:
            raise BackendUnavailable(f"cannot connect to SGLang at {self.url}: {exc}") from None
        except ConnectionDropped as exc:
            raise BackendUnavailable(f"SGLang at {self.url} dropped the connection: {exc}") from None
        except MalformedResponse as exc:
            raise BackendError(f"HTTP error talking to SGLang at {self.url}: {exc}") from None
        if reply.status != 200:
            raise _status_error(reply.status, reply.body, "/generate")
        return _metas(reply.body, batch)

    async def _get_json(self, path: str) -> Any:
        """GET an info route; None when the route is missing (404) or its reply is not JSON."""
        session = self._require_session()
        try:
            async with session.get(
                f"{self.url}{path}",
                headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=INFO_TIMEOUT),
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise BackendUnavailable(f"SGLang at {self.url} did not answer GET {path}: {exc!r}") from None
        if status in (401, 403):
            raise StartupError(
                f"SGLang at {self.url} refused GET {path} with {status}: set OPENJEV_BACKEND_API_KEY to the "
                "--api-key SGLang runs with (or unset it if SGLang has none)"
            )
        if status != 200:
            return None
        try:
            return msgspec.json.decode(raw)
        except msgspec.DecodeError:
            return None

    async def _probe_health(self, limit: float) -> str | None:
        """None when GET /health answers 200, else what went wrong (for logs and /health details)."""
        session = self._require_session()
        try:
            async with session.get(f"{self.url}/health", timeout=aiohttp.ClientTimeout(total=limit)) as response:
                await response.read()
                if response.status == 200:
                    return None
                return f"SGLang /health answered {response.status}"
        except aiohttp.ClientConnectorError as exc:
            return f"cannot connect to SGLang at {self.url}: {exc.os_error}"
        except TimeoutError:
            return f"SGLang /health did not answer within {limit:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            return f"SGLang /health failed: {exc!r}"

    async def _read_info(self) -> None:
        """Model identity from /model_info, request size limit from /server_info or /v1/models."""
        info = await self._get_json("/model_info")
        self.model_info = info if isinstance(info, dict) else {}
        served = {self.model_info.get("model_path"), self.model_info.get("served_model_name")} - {None}
        if self._expected_model and served and self._expected_model not in served:
            log.warning(
                "sglang_model_mismatch",
                detail="SGLang serves another model than OPENJEV_MODEL: the tokenizer must match it",
                sglang=sorted(map(str, served)),
                openjev=self._expected_model,
            )
        server_info = await self._get_json("/server_info")
        self.kv_cache_dtype = kv_cache_dtype(server_info)
        limit = _server_limit(server_info)
        if limit is None:
            limit = _models_limit(await self._get_json("/v1/models"))
        if limit is not None and self._configured_context is not None:
            limit = min(limit, self._configured_context)
        self._context = limit if limit is not None else self._configured_context


def _server_limit(info: Any) -> int | None:
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


def _models_limit(models: Any) -> int | None:
    """`max_model_len` of the first card of /v1/models (the model's context length)."""
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        card = models["data"][0]
        value = card.get("max_model_len") if isinstance(card, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def _metas(raw: bytes, batch: int | None) -> list[_MetaInfo]:
    """The meta_info of each item of a 200 reply; a malformed reply or an aborted item is an error."""
    try:
        if batch is None:
            metas = [_decode_generate.decode(raw).meta_info]
        else:
            metas = [item.meta_info for item in _decode_batch.decode(raw)]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BackendError(f"SGLang /generate returned a malformed reply ({exc}): {_snippet(raw)}") from None
    if batch is not None and len(metas) != batch:
        raise BackendError(f"SGLang /generate returned {len(metas)} results for a batch of {batch}: {_snippet(raw)}")
    for meta in metas:
        reason = meta.finish_reason or {}
        if reason.get("type") == "abort":
            raise BackendError(f"SGLang aborted the call: {reason.get('message') or 'no reason given'}")
    return metas


def _ids(ids: Sequence[int]) -> Sequence[int]:
    """Token ids as the JSON encoder takes them (lists and tuples as they are, without a copy)."""
    return ids if isinstance(ids, list | tuple) else list(ids)


def _usage(meta: _MetaInfo) -> CallUsage:
    # cached_tokens is absent from some frontends: report None (unknown), never an invented 0.
    return CallUsage(prompt_tokens=meta.prompt_tokens, cached_tokens=meta.cached_tokens)


def _label_logprobs(meta: _MetaInfo, label_ids: Sequence[int]) -> tuple[float, ...]:
    positions = meta.output_token_ids_logprobs
    if not positions or positions[0] is None:
        raise BackendError(
            "SGLang returned no output_token_ids_logprobs: the backend (or a router in front of it) "
            "dropped return_logprob/token_ids_logprob"
        )
    by_id: dict[int, float | None] = {entry.token_id: entry.logprob for entry in positions[0]}
    values: list[float] = []
    for label in label_ids:
        if label not in by_id:
            raise BackendError(f"SGLang did not return the log-probability of label token id {label}")
        value = by_id[label]
        if value is None or math.isnan(value) or value == math.inf:
            raise BackendError(f"SGLang returned an invalid log-probability {value!r} for label token id {label}")
        values.append(value)
    return tuple(values)


def _status_error(status: int, raw: bytes, route: str) -> OpenJevError:
    message = _error_message(raw)
    if status in (401, 403):
        return BackendError(
            f"SGLang refused {route} with {status} ({message}): set OPENJEV_BACKEND_API_KEY to the --api-key "
            "SGLang runs with"
        )
    if status in (429, 503):
        return BackendUnavailable(f"SGLang is unavailable ({status} on {route}): {message}")
    if status == 400:
        return BackendError(f"SGLang rejected the call (400 on {route}): {message}")
    return BackendError(f"SGLang answered {status} on {route}: {message}")


def _error_message(raw: bytes) -> str:
    """SGLang's error text: `{"error": "..."}`, `{"error": {"message": ...}}`, `{"detail": ...}` or raw."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return _snippet(raw)
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            value = body.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
            if isinstance(value, str):
                return value
    return _snippet(raw)


def _snippet(raw: bytes, limit: int = 300) -> str:
    text = raw.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"
