"""The emulator's HTTP server: SGLang 0.5.23's native routes openjev uses, with SGLang's JSON, no GPU.

It answers `POST /generate` the way SGLang's `TokenizerManager` does (`generate_input.py` checks and
splits a body, `replies.py` words the answer), keeps a radix-like cache (`cached_tokens` is the
longest prefix seen before, capped at `len - 1` as SGLang does), and aborts by rid prefix as
SGLang's scheduler does. LoRA adapters (`config.lora_paths`, as `--lora-paths NAME=PATH`) are listed
in `/v1/models` as SGLang lists them; a call naming one (`lora_path`) gets other answers (the name is
hashed into them) and its own cache, as SGLang keys its radix cache by adapter.

It records every request it receives (`requests`, or `GET /_emulator/requests`), every aborted rid
(`/abort_request`), and can be told at run time to be slow, fail with a status, close connections,
answer malformed JSON, omit label ids, drop `cached_tokens` (the Rust frontend) or every label
log-probability (SGLang's router over gRPC workers), answer /health slowly or report itself
unhealthy (`config`, or `POST /_emulator/config`). An out-of-vocabulary id in `input_ids` takes it
down as it takes the real server down (`crashed` says why; `on_crash` is called).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any

from aiohttp import web

from tests.sglang_emulation import replies
from tests.sglang_emulation.config import AUTH_PREFIXES, EmulatorConfig, RecordedRequest
from tests.sglang_emulation.generate_input import (
    BadRequest,
    Crash,
    body_is_batch,
    expand,
    max_req_input_len,
    split_generate_body,
)
from tests.sglang_emulation.model import Radix, logprob, seed


class SGLangEmulator:
    """The emulator as an aiohttp application, started and stopped in the caller's event loop."""

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.requests: list[RecordedRequest] = []
        self.aborted: list[str] = []  # rids received by /abort_request, in order.
        self.replies: dict[str, dict[str, Any]] = {}  # rid -> the meta_info answered.
        self.crashed: str | None = None  # why it went down, like the real server on an out-of-vocabulary id
        self.on_crash: Callable[[str], None] | None = None
        self._in_flight: dict[str, asyncio.Event] = {}
        self._arrivals: asyncio.Condition | None = None
        self._radixes: dict[str | None, Radix] = {}  # one cache per LoRA adapter (None: the model alone)
        self._closing: set[asyncio.Future[None]] = set()  # the sites a crash is closing
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
        for path in ("/health", "/health_generate"):
            app.router.add_get(path, self._health)
        for path in ("/model_info", "/get_model_info"):  # the second is 0.5.23's deprecated alias
            app.router.add_get(path, self._model_info)
        for path in ("/server_info", "/get_server_info"):
            app.router.add_get(path, self._server_info)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/abort_request", self._abort)
        app.router.add_route("*", "/flush_cache", self._flush)
        app.router.add_get("/_emulator/requests", self._ctl_requests)
        app.router.add_post("/_emulator/config", self._ctl_config)
        app.router.add_post("/_emulator/reset", self._ctl_reset)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
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
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def reset(self) -> None:
        """Forget recorded requests, aborts and the cache."""
        self.requests.clear()
        self.aborted.clear()
        self.replies.clear()
        self._radixes.clear()

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
        if self.crashed is not None:  # the process is gone: nothing answers
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=500)
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
        if key and request.path.startswith(AUTH_PREFIXES) and not authorized:
            return web.json_response({"error": "Unauthorized"}, status=401)
        if raw and body is None and request.method in ("POST", "PUT") and request.path != "/flush_cache":
            return web.json_response({"error": "request body is not valid JSON"}, status=400)
        response = await handler(request)
        return response

    def _crash(self, request: web.Request, why: str) -> web.Response:
        """Go down like the real server: this connection dropped, every other one and the port closed."""
        self.crashed = why
        for event in self._in_flight.values():
            event.set()
        assert request.transport is not None
        request.transport.close()
        if self._runner is not None:
            self._closing.update(asyncio.ensure_future(site.stop()) for site in self._runner.sites)
        if self.on_crash is not None:
            self.on_crash(why)
        return web.Response(status=500)

    # -- SGLang routes -------------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        cfg = self.config
        if cfg.health_delay:
            await asyncio.sleep(cfg.health_delay)
        if cfg.unhealthy or time.monotonic() < cfg.unhealthy_until:
            return web.Response(status=503)
        return web.Response(status=200)  # an empty body, as SGLang's

    def _names(self) -> tuple[str, str]:
        cfg = self.config
        return cfg.model_path, cfg.served_model_name or cfg.model_path

    async def _model_info(self, request: web.Request) -> web.Response:
        return web.json_response(replies.model_info(*self._names()))

    async def _server_info(self, request: web.Request) -> web.Response:
        cfg = self.config
        if not cfg.server_info:
            return web.json_response({"detail": "Not Found"}, status=404)
        path, served = self._names()
        return web.json_response(
            replies.server_info(
                model_path=path, served_model_name=served, context_length=cfg.context_length,
                max_req_input_len=max_req_input_len(cfg), version=cfg.version, frontend=cfg.frontend,
                kv_cache_dtype=cfg.kv_cache_dtype, enable_lora=cfg.lora_enabled, lora_paths=cfg.lora_paths,
            )
        )  # fmt: skip

    async def _models(self, request: web.Request) -> web.Response:
        cfg = self.config
        adapters = cfg.lora_paths if cfg.lora_enabled else {}
        return web.json_response(replies.models(*self._names(), cfg.context_length, adapters))

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
        return web.Response(status=200)  # an empty body, as SGLang's

    async def _flush(self, request: web.Request) -> web.Response:
        self._radixes.clear()
        return web.Response(text=replies.FLUSHED)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        cfg = self.config
        began = time.time()
        if cfg.close:
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=200)
        if cfg.fail is not None:
            return web.json_response({"error": {"message": f"emulated failure {cfg.fail}"}}, status=cfg.fail)
        body = await request.json()  # aiohttp keeps the bytes the middleware read.
        try:
            items = self._expand(body)
        except BadRequest as bad:
            return web.json_response(bad.body, status=400)
        except Crash as crash:
            return self._crash(request, str(crash))
        events = {item["rid"]: asyncio.Event() for item in items}
        self._in_flight.update(events)
        await self._notify()
        try:
            scoring = any(item["token_ids_logprob"] for item in items)
            if cfg.slow > 0 and (scoring or not cfg.slow_scoring_only):
                # Each item ends early if /abort_request hits its rid.
                await asyncio.gather(*(self._wait(event, cfg.slow) for event in events.values()))
            if self.crashed is not None:
                return self._crash(request, self.crashed)
            if cfg.malformed:
                return web.Response(body=b'{"meta_info": {"prompt_tokens": ', content_type="application/json")
            outputs = [self._answer({**item, "began": began}, aborted=events[item["rid"]].is_set()) for item in items]
        finally:
            for rid in events:
                self._in_flight.pop(rid, None)
            await self._notify()
        payload = outputs if body_is_batch(body) else outputs[0]
        return web.json_response(payload)

    def _expand(self, body: Any) -> list[dict[str, Any]]:
        return expand(body, self.config, self._in_flight)

    async def _notify(self) -> None:
        if self._arrivals is not None:
            async with self._arrivals:
                self._arrivals.notify_all()

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=seconds)

    def _answer(self, item: dict[str, Any], *, aborted: bool) -> dict[str, Any]:
        ids: list[int] = item["input_ids"]
        cfg = self.config
        adapter: str | None = item.get("lora_path")
        radix = self._radixes.setdefault(adapter, Radix())
        cached = min(radix.match(ids), len(ids) - 1)
        radix.insert(ids)
        prompt_seed = seed(ids, adapter)
        wanted: list[int] | None = item["token_ids_logprob"]
        scored = [(token, logprob(prompt_seed, token, cfg.vocab_size)) for token in wanted or ()]
        greedy = max(scored, key=lambda pair: pair[1])[0] if scored else prompt_seed[0]
        labels = None
        if wanted is not None and cfg.label_logprobs:
            omit = set(cfg.omit_label_ids)
            labels = [[lp, token, None] for token, lp in scored if token not in omit]
            if cfg.reverse_label_order:
                labels.reverse()
        reply = replies.generate_reply(
            item,
            cached=cached if cfg.cached_tokens else None,
            greedy=(greedy, logprob(prompt_seed, greedy, cfg.vocab_size)),
            labels=labels,
            aborted=aborted,
            began=item.get("began", time.time()),
        )
        self.replies[item["rid"]] = reply["meta_info"]
        return reply

    # -- control routes (subprocess use) ---------------------------------------------------------------

    async def _ctl_requests(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "requests": [asdict(r) for r in self.requests],
                "aborted": list(self.aborted),
                "in_flight": sorted(self._in_flight),
                "crashed": self.crashed,
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
