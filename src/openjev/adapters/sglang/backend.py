"""The SGLang scoring backend: the `ScoringBackend` port on SGLang's native HTTP API.

What goes into a /generate body and how its reply is read is `wire.py` (pure); the calls travel
over a lean HTTP/1.1 pool (`http1.py`). The control routes (the start-up wait, limit discovery,
/health, /abort_request) are `control.py`; the checks on a backend openjev did not configure, and
the watch on label log-probabilities, are `checks.py`. Whether the peer is an SGLang worker or
SGLang's router, and what follows, is `peer.py`: a worker gets a request's branches in one batch
body, a router (which refuses batch bodies) one body per branch, sent at once. A LoRA adapter SGLang
serves (OPENJEV_ADAPTER) is checked at start-up and named in every call (`lora.py`). This module
puts them together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import msgspec

from openjev.adapters.sglang.checks import NO_LABEL_LOGPROBS, LabelLogprobWatch, report_kv_cache, verify_key_enforced
from openjev.adapters.sglang.control import CONNECT_TIMEOUT, KEEPALIVE_SECONDS, ControlClient
from openjev.adapters.sglang.health import HealthMonitor
from openjev.adapters.sglang.http1 import (
    ConnectFailed,
    ConnectionDropped,
    Http1Pool,
    HTTPFailure,
    ReplyStalled,
    ReplyTooLarge,
)
from openjev.adapters.sglang.lora import check_served, not_served, refused
from openjev.adapters.sglang.peer import (
    HEALTH_ROUTE,
    PROBE_LABEL_ID,
    Peer,
    PeerSetting,
    range_checked,
    vocab_from_refusal,
)
from openjev.adapters.sglang.wire import (
    Generate,
    MetaInfo,
    error_message,
    label_logprobs,
    label_mass,
    max_reply_bytes,
    read_reply,
    rid_for,
    score_body,
    status_error,
    usage,
    warm_body,
)
from openjev.domain.errors import (
    BackendError,
    BackendUnavailable,
    OpenJevError,
    StartupError,
    first_error,
)
from openjev.domain.limits import Limits
from openjev.domain.ports import BackendHealth, CallUsage, LabelScores, ScoreCall
from openjev.ids import random_id
from openjev.logs import get_logger

log = get_logger("openjev.sglang")

# Connections kept beyond the branch limit: one warm-up per admitted request can run beside the
# branches, and /health and /abort_request must never queue behind a full pool of slow calls.
CONTROL_CONNECTIONS = 4
# Once a /generate reply has begun, the most seconds between two of its reads. SGLang writes a
# non-streamed reply at once; before its first byte only the caller's deadline applies.
READ_TIMEOUT = 10.0
LABEL_CHECK_TIMEOUT = 25.0
_DEFAULT_LIMITS = Limits()
_encode = msgspec.json.Encoder()


class SGLangBackend:
    """A `ScoringBackend` for an SGLang server (or SGLang's router) at `url`.

    From `start()` to `close()`, /generate calls go through a lean HTTP/1.1 connection pool
    (`http1.py`: a sixth of aiohttp's CPU time per call) and the other routes through one
    keep-alive `aiohttp.ClientSession`. `max_connections` is the most /generate calls the caller
    runs at once (`build_runtime`: the branch limit plus one warm-up per admitted request); each
    pool holds CONTROL_CONNECTIONS more, and /health and /abort_request never wait behind slow
    calls. `reply_cap` is the largest /generate reply taken (`wire.max_reply_bytes` for the limits
    in force), and `read_timeout` the longest silence within one. `url` may be SGLang's router
    (docs/sglang.md §3); `peer` forces how it is driven when start-up would guess wrong (peer.py).
    `adapter` names a LoRA adapter SGLang serves: start-up refuses an SGLang that does not list it,
    and every /generate carries it as `lora_path` (lora.py).

    `vocab_size()` is the bound the use case holds every request's ids to before any call
    (`domain.validation.validate_vocabulary`): an id outside the vocabulary in `input_ids` makes
    SGLang 0.5.23 exit. It is SGLang's own size (its refusal of an out-of-vocabulary label says it),
    else the tokenizer's (`use_tokenizer_vocab`).
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
        reply_cap: int = max_reply_bytes(_DEFAULT_LIMITS.max_concurrent_branches, _DEFAULT_LIMITS.max_options),
        read_timeout: float = READ_TIMEOUT,
        peer: PeerSetting = "auto",
        adapter: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.adapter = adapter
        self._api_key = api_key
        self._max_connections = max_connections
        self._startup_timeout = startup_timeout
        self._configured_context = context_length
        self._expected_model = expected_model
        self.reply_cap = reply_cap
        self._read_timeout = read_timeout
        self._control = ControlClient(self.url, api_key=api_key, connections=max_connections + CONTROL_CONNECTIONS)
        self._generate_pool: Http1Pool | None = None  # /generate
        self._context: int | None = context_length
        self._health = HealthMonitor(self._probe, name=f"SGLang at {self.url}")
        self._labels = LabelLogprobWatch(self.url)
        self._peer_setting: PeerSetting = peer
        self.peer: Peer = "worker" if peer == "auto" else peer  # what start-up found (or was told)
        self._vocab: int | None = None  # SGLang's vocabulary size, when it says
        self._tokenizer_vocab: int | None = None
        self.model_info: dict[str, Any] = {}
        self.kv_cache_dtype: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Wait for SGLang's /health within the start-up budget, read what the model allows, check it."""
        if not self._control.is_open:
            self._control.open()
            self._generate_pool = self._new_pool()
        loop = asyncio.get_running_loop()
        began = loop.time()
        await self._control.wait_healthy(self._startup_timeout)
        facts = await self._control.read_info(
            expected_model=self._expected_model, configured_context=self._configured_context, peer=self._peer_setting
        )
        self.peer = facts.peer.peer
        self.model_info, self.kv_cache_dtype = facts.model_info, facts.kv_cache_dtype
        self._context = facts.context_tokens
        log.info("sglang_peer", url=self.url, peer=self.peer, how=facts.peer.reason)
        self._control.health_route = HEALTH_ROUTE[self.peer]
        if self.peer == "router":
            self._control.takes_aborts = False
            log.warning(
                "sglang_abort_unsupported",
                url=self.url,
                detail="SGLang's router has no /abort_request: calls of a request that fails, times out or is "
                "abandoned run to completion on the workers",
            )
            # A router's /health is 200 with no healthy worker; its /health_generate is not.
            await self._control.wait_healthy(max(self._startup_timeout - (loop.time() - began), 0.1))
            if self._context is None:  # no OPENJEV_CONTEXT_LENGTH: the workers say theirs
                self._context = await self._control.router_context()
        if self._api_key:
            await verify_key_enforced(self._control.session, self.url)
        if self.adapter is not None:
            await check_served(self._control, self.adapter, self.peer)
        if self.peer == "worker" and range_checked(facts.server_info):
            await self._learn_vocab()
        await self._check_label_logprobs()
        if self.peer == "worker":
            report_kv_cache(self.url, self.kv_cache_dtype)
        log.info(
            "sglang_ready",
            url=self.url,
            peer=self.peer,
            waited_s=round(loop.time() - began, 1),
            model=self.model_info.get("model_path"),
            context_tokens=self._context,
            vocab_size=self._vocab,
            kv_cache_dtype=self.kv_cache_dtype,
            reply_cap_bytes=self.reply_cap,
            adapter=self.adapter,
        )

    async def close(self) -> None:
        await self._health.close()
        pool, self._generate_pool = self._generate_pool, None
        if pool is not None:
            await pool.close()
        await self._control.close()

    def context_tokens(self) -> int | None:
        return self._context

    def vocab_size(self) -> int | None:
        """SGLang's vocabulary size when it said, else the tokenizer's (`use_tokenizer_vocab`), else None."""
        return self._vocab if self._vocab is not None else self._tokenizer_vocab

    def use_tokenizer_vocab(self, size: int | None) -> None:
        """The tokenizer's vocabulary size: the bound on sent ids when SGLang does not say its own."""
        self._tokenizer_vocab = size

    async def health(self) -> BackendHealth:
        if not self._control.is_open:
            return BackendHealth(ok=False, detail="the SGLang client is not started")
        return await self._health.check()  # coalesced; slow is not down (health.py)

    async def _probe(self, limit: float) -> str | None:
        """/health's answer, and while replies lack label log-probabilities, a fresh look at that too."""
        problem = await self._control.probe_health(limit)
        if problem is None and self._labels.problem is not None:
            await self._recheck_label_logprobs(limit)
        return problem or self._labels.problem

    # -- calls ---------------------------------------------------------------------------------------

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        (meta,) = await self._generate(warm_body(call_id, token_ids, self.adapter))
        return usage(meta)

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        (scores,) = await self.score_many((ScoreCall(call_id, token_ids, label_ids),))
        return scores

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """A worker: every call in one /generate (a batch body for two or more, the plain body for one).

        A router refuses batch bodies: one /generate per call, all at once, so that cache-aware
        routing sees them together and keeps them on the worker that holds their prefix. The first
        failure cancels the others and is raised.
        """
        if not calls:
            return []
        if self.peer == "worker" or len(calls) == 1:
            metas = await self._generate(score_body(calls, self.adapter))
        else:
            metas = await self._generate_each(calls)
        self._labels_seen(metas)
        results: list[LabelScores] = []
        for meta, call in zip(metas, calls, strict=True):
            logprobs = label_logprobs(meta, call.label_ids)
            mass = label_mass(logprobs) if call.label_mass else None
            results.append(LabelScores(logprobs=logprobs, usage=usage(meta), label_mass=mass))
        return results

    def _labels_seen(self, metas: Sequence[MetaInfo]) -> None:
        """Feed the watch; a reply without label log-probabilities fails its own request (502)."""
        complete = all(meta.has_label_logprobs for meta in metas)
        self._labels.answered(complete)
        if not complete:
            raise BackendError(NO_LABEL_LOGPROBS)

    async def _check_label_logprobs(self) -> None:
        """Start-up: one label's log-probability asked and none returned proves the backend unfit."""
        try:
            metas = await self._generate(score_body([ScoreCall(random_id(), (0,), (0,))], self.adapter))
        except OpenJevError as exc:
            if self.adapter is not None and refused(exc.message):  # an adapter list check_served could not read
                raise StartupError(not_served(self.adapter, self.url, said=exc.message)) from None
            log.warning("sglang_label_check_failed", url=self.url, detail=exc.message)
            return
        if not metas[0].has_label_logprobs:
            raise StartupError(NO_LABEL_LOGPROBS)

    async def _recheck_label_logprobs(self, limit: float) -> None:
        try:
            async with asyncio.timeout(min(limit, LABEL_CHECK_TIMEOUT)):
                metas = await self._generate(score_body([ScoreCall(random_id(), (0,), (0,))], self.adapter))
        except (OpenJevError, TimeoutError) as exc:
            log.debug("sglang_label_recheck_failed", url=self.url, error=repr(exc))
            return
        self._labels.answered(metas[0].has_label_logprobs)

    async def abort(self, call_ids: Sequence[str]) -> None:
        """POST /abort_request for each call (not to a router); best effort, quick, never raises."""
        await self._control.abort([rid_for(c) for c in call_ids])

    # -- the vocabulary --------------------------------------------------------------------------------

    async def _learn_vocab(self) -> None:
        """Ask for one label no vocabulary has: SGLang >= 0.5.23 refuses it with 400 naming its vocabulary size.

        Only asked of an SGLang whose /server_info version is known to check label ids (`peer.range_checked`);
        an older one might fail inside the model instead.
        """
        pool = self._generate_pool
        if pool is None:
            return
        body = score_body([ScoreCall(random_id(), (0,), (PROBE_LABEL_ID,))], self.adapter).body
        try:
            reply = await pool.post("/generate", _encode.encode(body))
        except (ConnectFailed, ConnectionDropped, ReplyTooLarge, ReplyStalled, HTTPFailure) as exc:
            log.warning("sglang_vocab_unknown", url=self.url, detail=f"the vocabulary probe failed: {exc}")
            return
        self._vocab = vocab_from_refusal(error_message(reply.body)) if reply.status == 400 else None
        if self._vocab is None:
            log.warning(
                "sglang_vocab_unknown",
                url=self.url,
                detail=f"SGLang did not say its vocabulary size (the probe got {reply.status}): "
                "the tokenizer's bounds the ids sent",
            )

    # -- /generate ------------------------------------------------------------------------------------

    def _new_pool(self) -> Http1Pool:
        return Http1Pool(
            self.url,
            limit=self._max_connections + CONTROL_CONNECTIONS,
            keepalive=KEEPALIVE_SECONDS,
            connect_timeout=CONNECT_TIMEOUT,
            max_reply_bytes=self.reply_cap,
            read_timeout=self._read_timeout,
            headers=self._control.headers(),
        )

    async def _generate_each(self, calls: Sequence[ScoreCall]) -> list[MetaInfo]:
        """One plain /generate per call, concurrently; the first failure cancels the rest and is raised."""
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._generate(score_body([call], self.adapter))) for call in calls]
        except BaseExceptionGroup as failed:
            raise first_error(failed) from None
        return [task.result()[0] for task in tasks]

    async def _generate(self, sent: Generate) -> list[MetaInfo]:
        """POST /generate; the items' meta_info in order, each checked against `sent` (wire.read_reply).

        A cancelled call closes its connection (a reply may still come on it).
        """
        pool = self._generate_pool
        if pool is None:
            raise BackendUnavailable("the SGLang client is not started (or already closed)")
        try:
            reply = await pool.post("/generate", _encode.encode(sent.body))
        except ConnectFailed as exc:
            raise BackendUnavailable(f"cannot connect to SGLang at {self.url}: {exc}") from None
        except ConnectionDropped as exc:
            raise BackendUnavailable(f"SGLang at {self.url} dropped the connection: {exc}") from None
        except ReplyTooLarge as exc:
            raise BackendError(
                f"SGLang at {self.url} sent a /generate reply over openjev's cap of {self.reply_cap} bytes "
                f"(docs/sglang.md): {exc}"
            ) from None
        except ReplyStalled as exc:
            raise BackendError(f"SGLang at {self.url} stopped half-way through a /generate reply: {exc}") from None
        except HTTPFailure as exc:
            raise BackendError(f"HTTP error talking to SGLang at {self.url}: {exc}") from None
        if reply.status != 200:
            failure = status_error(reply.status, reply.body, "/generate")
            if self.adapter is not None and reply.status == 400 and refused(failure.message):
                # e.g. a worker added behind the router without the adapter
                raise BackendError(
                    f"SGLang at {self.url} does not serve OPENJEV_ADAPTER={self.adapter}: {failure.message}"
                )
            raise failure
        return read_reply(reply.body, sent)


__all__ = ["CONTROL_CONNECTIONS", "SGLangBackend", "rid_for"]
