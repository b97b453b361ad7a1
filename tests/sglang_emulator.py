"""An SGLang 0.5.23 emulator: the native HTTP routes openjev uses, with SGLang's JSON, and no GPU.

It answers `POST /generate` the way SGLang's `TokenizerManager` does (`srt/managers/tokenizer_manager.py`
and `srt/entrypoints/http_server.py` under https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/):
single or batched `input_ids`, `sampling_params` with
unknown keys rejected (400 `{"error": ...}`), `token_ids_logprob` flat or nested with
out-of-vocabulary ids rejected, `rid` (batch + str rid -> `rid_i`, a rid still in flight -> 400),
and a `meta_info` carrying `prompt_tokens`, `cached_tokens` and
`output_token_ids_logprobs = [[[logprob, token_id, text], ...]]`. It keeps a radix-like cache:
`cached_tokens` is the longest prefix seen before, capped at `len - 1` as SGLang does.

What is deliberately different: it has no tokenizer, so `text` prompts are refused (openjev must
send ids), and the log-probabilities are a deterministic hash of the input ids and the token id
(`logprob_of`), not a model. They are all negative and normalised only in expectation over the
vocabulary; callers renormalise over their labels anyway.

It records every request it receives (`emulator.requests`, or `GET /_emulator/requests`; a batched
/generate split into its items by `emulator.generate_items()`, as SGLang splits it), every
aborted rid (`/abort_request`), and can be told at run time to be slow, fail with a status, close
connections, answer malformed JSON, omit label ids, drop `cached_tokens` (the Rust frontend) or
every label log-probability (SGLang's router over gRPC workers), answer /health slowly or report
itself unhealthy (`emulator.config`, or `POST /_emulator/config`).

Use it in-process (`SGLangEmulator`, `EmulatorThread`) or as a subprocess:

    python tests/sglang_emulator.py --port 0 [--slow S] [--fail 500] [--close] [--malformed]
        [--no-cached-tokens] [--api-key K] [--unhealthy-for S] [--omit-label ID] ...

It prints `sglang-emulator listening on http://127.0.0.1:PORT` once it accepts connections. It only
ever binds loopback addresses.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import hashlib
import ipaddress
import json
import math
import signal
import struct
import sys
import threading
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")
DEFAULT_VOCAB_SIZE = 151_936  # Qwen3's embedding rows: token ids are valid in [0, this).
_SPREAD = 8.0  # logits are uniform in [0, _SPREAD): label probabilities differ by up to e^8.

# `api/v1/api_types.py` at v0.5.23: sampling_params rejects unknown keys.
SAMPLING_PARAM_KEYS = (
    "max_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_new_tokens",
    "n",
    "json_schema",
    "regex",
    "ebnf",
    "structural_tag",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "stream_interval",
    "logit_bias",
    "sampling_seed",
    "custom_params",
    "beam_width",
    "watermark",
    "choice",
)

# Routes that need `Authorization: Bearer <--api-key>` when a key is set (`srt/utils/auth.py`); /health is exempt.
_AUTH_PREFIXES = (
    "/generate",
    "/model_info",
    "/get_model_info",
    "/server_info",
    "/get_server_info",
    "/v1/",
    "/abort_request",
    "/flush_cache",
)


class _BadRequest(Exception):
    """A request SGLang would refuse with 400; `body` is SGLang's error JSON."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.body = body


def _error(message: str) -> _BadRequest:
    return _BadRequest({"error": {"message": message}})


@dataclass
class EmulatorConfig:
    """Behaviour knobs; every field can be changed while the emulator runs."""

    api_key: str | None = None
    slow: float = 0.0  # seconds every /generate takes before answering (an abort ends it early).
    slow_scoring_only: bool = False  # apply `slow` only to calls that ask for token_ids_logprob.
    fail: int | None = None  # answer every /generate with this HTTP status.
    close: bool = False  # close the connection instead of answering /generate.
    malformed: bool = False  # answer /generate with 200 and a body that is not JSON.
    cached_tokens: bool = True  # report meta_info.cached_tokens (False: as the Rust frontend may).
    unhealthy: bool = False  # /health answers 503.
    unhealthy_until: float = 0.0  # time.monotonic() before which /health answers 503 (loading).
    omit_label_ids: list[int] = field(default_factory=list)  # ids left out of output_token_ids_logprobs.
    vocab_size: int = DEFAULT_VOCAB_SIZE
    context_length: int = 32_768
    model_path: str = "emulated/model"
    served_model_name: str | None = None
    frontend: str = "python"
    server_info: bool = True  # False: /server_info answers 404 (as an older gateway might).
    abort_route: bool = True  # False: /abort_request answers 404, like SGLang's router (sgl-model-gateway).
    reverse_label_order: bool = False  # list output_token_ids_logprobs entries in reverse order.
    label_logprobs: bool = True  # False: no output_token_ids_logprobs at all (the router's gRPC path).
    health_delay: float = 0.0  # seconds /health takes (SGLang's own probe waits for a generation).
    kv_cache_dtype: str = "bf16"  # what /server_info reports (SGLang's resolved --kv-cache-dtype).


@dataclass(frozen=True)
class RecordedRequest:
    """One request the emulator received (control routes under /_emulator are not recorded)."""

    method: str
    path: str
    body: Any  # decoded JSON, or None
    authorization: str | None
    at: float  # time.monotonic()


def logprob_of(input_ids: Sequence[int], token_id: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> float:
    """The emulator's log-probability of `token_id` as the next token after `input_ids`.

    Exposed so that tests can compute the exact numbers an answer must be built from.
    """
    return _logprob(_seed(input_ids), token_id, vocab_size)


def _seed(input_ids: Sequence[int]) -> bytes:
    return hashlib.blake2b(struct.pack(f"<{len(input_ids)}q", *input_ids), digest_size=16).digest()


def _logprob(seed: bytes, token_id: int, vocab_size: int) -> float:
    digest = hashlib.blake2b(seed + struct.pack("<q", token_id), digest_size=8).digest()
    logit = _SPREAD * int.from_bytes(digest, "little") / 2**64
    # log Z for logits uniform in [0, S) over V tokens, in expectation: log(V * (e^S - 1) / S).
    log_z = math.log(vocab_size) + math.log(math.expm1(_SPREAD) / _SPREAD)
    return logit - log_z


class _Radix:
    """Prefix tree of token ids: the longest previously seen prefix, like SGLang's radix cache."""

    def __init__(self) -> None:
        self.root: dict[int, Any] = {}

    def match(self, ids: Sequence[int]) -> int:
        node, depth = self.root, 0
        for token in ids:
            child = node.get(token)
            if child is None:
                break
            node, depth = child, depth + 1
        return depth

    def insert(self, ids: Sequence[int]) -> None:
        node = self.root
        for token in ids:
            node = node.setdefault(token, {})


class SGLangEmulator:
    """The emulator as an aiohttp application, started and stopped in the caller's event loop."""

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.requests: list[RecordedRequest] = []
        self.aborted: list[str] = []  # rids received by /abort_request, in order.
        self.replies: dict[str, dict[str, Any]] = {}  # rid -> the meta_info answered.
        self._in_flight: dict[str, asyncio.Event] = {}
        self._arrivals: asyncio.Condition | None = None
        self._radix = _Radix()
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on host:port (0 = a free port); returns the base URL."""
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the emulator only binds loopback addresses, not {host}")
        self._arrivals = asyncio.Condition()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.middlewares.append(self._middleware)
        app.router.add_route("*", "/generate", self._generate)
        app.router.add_get("/health", self._health)
        app.router.add_get("/health_generate", self._health)
        app.router.add_get("/model_info", self._model_info)
        app.router.add_get("/server_info", self._server_info)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/abort_request", self._abort)
        app.router.add_route("*", "/flush_cache", self._flush)
        app.router.add_get("/_emulator/requests", self._ctl_requests)
        app.router.add_post("/_emulator/config", self._ctl_config)
        app.router.add_post("/_emulator/reset", self._ctl_reset)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, reuse_address=True)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        return self.url

    async def stop(self) -> None:
        for event in self._in_flight.values():
            event.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def reset(self) -> None:
        """Forget recorded requests, aborts and the cache."""
        self.requests.clear()
        self.aborted.clear()
        self.replies.clear()
        self._radix = _Radix()

    # -- views for tests ---------------------------------------------------------------------------

    def generate_bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of every /generate received, in arrival order."""
        return [r.body for r in self.requests if r.path == "/generate" and isinstance(r.body, dict)]

    def generate_items(self) -> list[dict[str, Any]]:
        """Every /generate item received, a batch split into its items (`split_generate_body`), in order."""
        return [item for body in self.generate_bodies() for item in split_generate_body(body)]

    @property
    def in_flight(self) -> frozenset[str]:
        return frozenset(self._in_flight)

    async def wait_in_flight(self, count: int) -> frozenset[str]:
        """Wait (in the emulator's loop) until at least `count` /generate items are being served."""
        assert self._arrivals is not None, "start() the emulator first"
        async with self._arrivals:
            await self._arrivals.wait_for(lambda: len(self._in_flight) >= count)
        return self.in_flight

    async def wait_idle(self) -> None:
        """Wait until no /generate item is being served (e.g. after an abort ended them)."""
        assert self._arrivals is not None, "start() the emulator first"
        async with self._arrivals:
            await self._arrivals.wait_for(lambda: not self._in_flight)

    # -- plumbing ------------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/_emulator/"):
            response: web.StreamResponse = await handler(request)
            return response
        body: Any = None
        raw = await request.read()
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        self.requests.append(
            RecordedRequest(request.method, request.path, body, request.headers.get("Authorization"), time.monotonic())
        )
        key = self.config.api_key
        authorized = request.headers.get("Authorization") == f"Bearer {key}"
        if key and request.path.startswith(_AUTH_PREFIXES) and not authorized:
            return web.json_response({"error": "Unauthorized"}, status=401)
        if raw and body is None and request.method in ("POST", "PUT") and request.path != "/flush_cache":
            return web.json_response({"error": "request body is not valid JSON"}, status=400)
        response = await handler(request)
        return response

    # -- SGLang routes -------------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        cfg = self.config
        if cfg.health_delay:
            await asyncio.sleep(cfg.health_delay)
        if cfg.unhealthy or time.monotonic() < cfg.unhealthy_until:
            return web.Response(status=503)
        return web.Response(status=200)

    async def _model_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        return web.json_response(
            {
                "model_path": cfg.model_path,
                "served_model_name": cfg.served_model_name or cfg.model_path,
                "tokenizer_path": cfg.model_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "model_type": "emulated",
                "architectures": ["EmulatedForCausalLM"],
            }
        )

    def _max_req_input_len(self) -> int:
        # v0.5.23 `srt/managers/tp_worker.py`: max_req_len = min(context_len - 1, kv_capacity - 1); input = that - 5.
        return self.config.context_length - 1 - 5

    async def _server_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        if not cfg.server_info:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response(
            {
                "model_path": cfg.model_path,
                "served_model_name": cfg.served_model_name or cfg.model_path,
                "context_length": cfg.context_length,
                "max_total_num_tokens": 1_000_000,
                "max_req_input_len": self._max_req_input_len(),
                "version": "0.5.23",
                "frontend": cfg.frontend,
                "kv_cache_dtype": cfg.kv_cache_dtype,
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        cfg = self.config
        name = cfg.served_model_name or cfg.model_path
        card = {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "sglang",
            "root": cfg.model_path,
            "max_model_len": cfg.context_length,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _abort(self, request: web.Request) -> web.Response:
        if not self.config.abort_route:
            return web.json_response({"detail": "Not Found"}, status=404)
        body = await request.json()
        rid = str(body.get("rid", "")) if isinstance(body, dict) else ""
        abort_all = bool(body.get("abort_all")) if isinstance(body, dict) else False
        self.aborted.append(rid)
        for live_rid, event in self._in_flight.items():
            # SGLang's scheduler matches by prefix: req.rid.startswith(recv_req.rid) (`srt/managers/scheduler.py`).
            if abort_all or (rid and live_rid.startswith(rid)):
                event.set()
        return web.Response(status=200)

    async def _flush(self, request: web.Request) -> web.Response:
        self._radix = _Radix()
        return web.Response(text="Cache flushed.")

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        cfg = self.config
        if cfg.close:
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)
        if cfg.fail is not None:
            return web.json_response({"error": {"message": f"emulated failure {cfg.fail}"}}, status=cfg.fail)
        body = await request.json()  # aiohttp keeps the bytes the middleware read.
        try:
            items = self._expand(body)
        except _BadRequest as bad:
            return web.json_response(bad.body, status=400)
        events = {item["rid"]: asyncio.Event() for item in items}
        self._in_flight.update(events)
        if self._arrivals is not None:
            async with self._arrivals:
                self._arrivals.notify_all()
        try:
            scoring = any(item["token_ids_logprob"] for item in items)
            if cfg.slow > 0 and (scoring or not cfg.slow_scoring_only):
                # Each item ends early if /abort_request hits its rid.
                await asyncio.gather(*(self._wait(event, cfg.slow) for event in events.values()))
            if cfg.malformed:
                return web.Response(body=b'{"meta_info": {"prompt_tokens": ', content_type="application/json")
            outputs = [self._answer(item, aborted=events[item["rid"]].is_set()) for item in items]
        finally:
            for rid in events:
                self._in_flight.pop(rid, None)
            if self._arrivals is not None:
                async with self._arrivals:
                    self._arrivals.notify_all()
        payload = outputs if body_is_batch(body) else outputs[0]
        return web.json_response(payload)

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=seconds)

    def _expand(self, body: Any) -> list[dict[str, Any]]:  # noqa: C901 - SGLang's checks, one by one, in its order
        """Validate a /generate body like SGLang and split it into per-item requests."""
        if not isinstance(body, dict):
            raise _BadRequest({"error": "the request body must be a JSON object"})
        if body.get("text") is not None or body.get("input_embeds") is not None:
            raise _error("sglang-emulator has no tokenizer: send input_ids")
        input_ids = body.get("input_ids")
        if input_ids is None:
            raise _error("Either text, input_ids or input_embeds should be provided.")
        if not isinstance(input_ids, list) or not input_ids:
            raise _error("input_ids cannot be empty.")
        batch = body_is_batch(body)
        prompts: list[list[int]] = input_ids if batch else [input_ids]
        n = len(prompts)
        for prompt in prompts:
            if not isinstance(prompt, list) or not prompt:
                raise _error("input_ids should be a list of lists for batch processing.")
            for token in prompt:
                if not isinstance(token, int) or isinstance(token, bool):
                    raise _error("input_ids must be integers")
                if not 0 <= token < self.config.vocab_size:
                    raise _error(f"input_ids contains out-of-vocabulary token id {token}")
        sampling = self._per_item(body.get("sampling_params"), n, "sampling_params", dict)
        for params in sampling:
            if params is None:
                continue
            unknown = sorted(set(params) - set(SAMPLING_PARAM_KEYS))
            if unknown:
                expected = ", ".join(SAMPLING_PARAM_KEYS)
                raise _BadRequest({"error": f"unknown field `{unknown[0]}`, expected one of {expected}"})
        rids = self._rids(body.get("rid"), n, batch)
        for rid in rids:
            if rid in self._in_flight:
                raise _error(f"Duplicate request ID detected: {rid}")
        if len(set(rids)) != len(rids):
            duplicates = sorted({r for r in rids if rids.count(r) > 1})
            raise _error(f"Duplicate request IDs detected within the request: {duplicates}")
        return_logprob = self._per_item(body.get("return_logprob"), n, "return_logprob", bool)
        token_ids = body.get("token_ids_logprob")
        if token_ids is None or token_ids == []:
            wanted: list[list[int] | None] = [None] * n
        elif all(isinstance(t, int) for t in token_ids):
            wanted = [list(token_ids) for _ in range(n)]  # a flat list is copied to every item.
        elif len(token_ids) == n and all(isinstance(t, list) for t in token_ids):
            wanted = [list(t) or None for t in token_ids]
        else:
            raise _error("token_ids_logprob must be a list of ints or one list per batch item")
        for ids in wanted:
            for token in ids or ():
                if not isinstance(token, int) or not 0 <= token < self.config.vocab_size:
                    raise _error(f"token_ids_logprob contains out-of-vocabulary token id {token}")
        limit = self._max_req_input_len()
        items = []
        for i, prompt in enumerate(prompts):
            if len(prompt) >= limit:
                raise _error(
                    f"Input length ({len(prompt)} tokens) exceeds the maximum allowed length "
                    f"({limit} tokens). Use a shorter input or enable --allow-auto-truncate."
                )
            params = sampling[i] or {}
            max_new = params.get("max_new_tokens")
            items.append(
                {
                    "rid": rids[i],
                    "input_ids": prompt,
                    "max_new_tokens": 128 if max_new is None else int(max_new),
                    "return_logprob": bool(return_logprob[i]),
                    "token_ids_logprob": wanted[i],
                }
            )
        return items

    @staticmethod
    def _per_item(value: Any, n: int, name: str, kind: type) -> list[Any]:
        if isinstance(value, list):
            if len(value) != n:
                raise _error(f"{name} has {len(value)} items for a batch of {n}")
            return value
        if value is not None and not isinstance(value, kind):
            raise _error(f"{name} has the wrong type")
        return [value] * n

    @staticmethod
    def _rids(rid: Any, n: int, batch: bool) -> list[str]:
        if rid is None:
            import uuid

            return [uuid.uuid4().hex for _ in range(n)]
        if isinstance(rid, list):
            if len(rid) != n:
                raise _error("The rid should have the same length as the batch")
            return [str(r) for r in rid]
        return [f"{rid}_{i}" for i in range(n)] if batch else [str(rid)]

    def _answer(self, item: dict[str, Any], *, aborted: bool) -> dict[str, Any]:
        ids: list[int] = item["input_ids"]
        cfg = self.config
        cached = min(self._radix.match(ids), len(ids) - 1)
        self._radix.insert(ids)
        seed = _seed(ids)
        wanted: list[int] | None = item["token_ids_logprob"]
        scored = [(token, _logprob(seed, token, cfg.vocab_size)) for token in wanted or ()]
        greedy = max(scored, key=lambda pair: pair[1])[0] if scored else seed[0]
        n_out = 0 if aborted else min(item["max_new_tokens"], 1)
        meta: dict[str, Any] = {
            "id": item["rid"],
            "finish_reason": (
                {"type": "abort", "message": "Abort in waiting queue"}
                if aborted
                else {"type": "length", "length": n_out}
            ),
            "prompt_tokens": len(ids),
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": n_out,
        }
        if cfg.cached_tokens:
            meta["cached_tokens"] = cached
        if item["return_logprob"] and not aborted:
            meta["input_token_logprobs"] = []
            meta["output_token_logprobs"] = [[_logprob(seed, greedy, cfg.vocab_size), greedy, None]]
            meta["output_token_logprobs_length"] = 1
            if wanted is not None and cfg.label_logprobs:
                omit = set(cfg.omit_label_ids)
                meta["input_token_ids_logprobs"] = []
                entries = [[lp, token, None] for token, lp in scored if token not in omit]
                if cfg.reverse_label_order:
                    entries.reverse()
                meta["output_token_ids_logprobs"] = [entries]
        meta["e2e_latency"] = 0.001
        self.replies[item["rid"]] = meta
        return {"text": "", "output_ids": [greedy] * n_out, "meta_info": meta}

    # -- control routes (subprocess use) ---------------------------------------------------------------

    async def _ctl_requests(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": [asdict(r) for r in self.requests],
                "aborted": list(self.aborted),
                "in_flight": sorted(self._in_flight),
            }
        )

    async def _ctl_config(self, request: web.Request) -> web.Response:
        changes = await request.json()
        known = {f.name for f in fields(EmulatorConfig)}
        unknown = set(changes) - known - {"unhealthy_for"}
        if unknown:
            return web.json_response({"error": f"unknown config keys {sorted(unknown)}"}, status=400)
        for key, value in changes.items():
            if key == "unhealthy_for":
                self.config.unhealthy_until = time.monotonic() + float(value)
            else:
                setattr(self.config, key, value)
        return web.json_response(asdict(self.config))

    async def _ctl_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.Response(status=204)


def body_is_batch(body: dict[str, Any]) -> bool:
    """SGLang: `input_ids` is a batch when its first element is a list (io_struct `_determine_batch_size`)."""
    ids = body.get("input_ids")
    return isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)


def split_generate_body(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A /generate body as one plain body per item, the way SGLang normalises a batch
    (`srt/managers/io_struct.py` `GenerateReqInput.normalize_batch_and_arguments` and `__getitem__`):
    a key whose value is a per-item list is split, any other value (a dict `sampling_params`, a
    scalar, a flat `token_ids_logprob`) is repeated. For tests: it does not validate."""
    if not body_is_batch(body):
        return [dict(body)]
    n = len(body["input_ids"])
    per_item = {"input_ids", "rid"}
    wanted = body.get("token_ids_logprob")
    if isinstance(wanted, list) and wanted and isinstance(wanted[0], list):
        per_item.add("token_ids_logprob")
    for key in ("sampling_params", "return_logprob", "logprob_start_len"):
        if isinstance(body.get(key), list):
            per_item.add(key)
    items = []
    for i in range(n):
        item = {}
        for key, value in body.items():
            if key == "rid" and isinstance(value, str):
                item[key] = f"{value}_{i}"
            elif key in per_item and isinstance(value, list):
                item[key] = value[i]
            else:
                item[key] = value
        items.append(item)
    return items


class EmulatorThread:
    """The emulator on its own event loop in a daemon thread, for synchronous tests.

    `with EmulatorThread() as emu:` gives `emu.url`, `emu.emulator.config`, `emu.emulator.requests`.
    Config fields are plain attributes: setting them from the test thread is safe.
    """

    def __init__(self, config: EmulatorConfig | None = None, port: int = 0) -> None:
        self.emulator = SGLangEmulator(config)
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-emulator", daemon=True)
        self.url = ""

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self.emulator.start(port=self._port), self._loop)
        self.url = future.result(timeout=10)
        return self

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine (e.g. `emulator.wait_in_flight(3)`) in the emulator's loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine in the emulator's loop and wait for its result."""
        return self.submit(coroutine).result(timeout=timeout)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.emulator.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The emulator's behaviour flags (shared with the SGLang stand-in used by the launcher tests)."""
    parser.add_argument("--slow", type=float, default=0.0, help="seconds each /generate takes")
    parser.add_argument("--fail", type=int, default=None, help="answer every /generate with this status")
    parser.add_argument("--close", action="store_true", help="drop /generate connections")
    parser.add_argument("--malformed", action="store_true", help="answer /generate with invalid JSON")
    parser.add_argument("--no-cached-tokens", action="store_true", help="omit meta_info.cached_tokens")
    parser.add_argument("--unhealthy-for", type=float, default=0.0, help="/health answers 503 this long")
    parser.add_argument("--omit-label", type=int, action="append", default=[], help="leave this id out")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--emulated-context-length", type=int, default=32_768)


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    return EmulatorConfig(
        slow=args.slow,
        fail=args.fail,
        close=args.close,
        malformed=args.malformed,
        cached_tokens=not args.no_cached_tokens,
        unhealthy_until=time.monotonic() + args.unhealthy_for,
        omit_label_ids=list(args.omit_label),
        vocab_size=args.vocab_size,
        context_length=args.emulated_context_length,
    )


async def serve_forever(emulator: SGLangEmulator, host: str, port: int, announce: bool = True) -> None:
    """Run until SIGTERM or SIGINT; announce the URL on stdout once listening."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    url = await emulator.start(host, port)
    if announce:
        print(f"sglang-emulator listening on {url}", flush=True)
    try:
        await stop.wait()
    finally:
        await emulator.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SGLang 0.5.23 emulator for openjev tests (loopback only).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY like --api-key")
    parser.add_argument("--model-path", default="emulated/model")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--frontend", choices=("python", "rust"), default="python")
    add_cli_arguments(parser)
    args = parser.parse_args(argv)
    config = config_from_args(args)
    config.api_key = args.api_key
    config.model_path = args.model_path
    config.served_model_name = args.served_model_name
    config.frontend = args.frontend
    asyncio.run(serve_forever(SGLangEmulator(config), args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
