"""ScoringBackend on xllamacpp: llama.cpp's own C++ server engine, running inside this process.

Exact label probabilities. A branch call asks for one token with a uniform `logit_bias` on exactly
the label ids, `top_k` equal to the number of labels, only the top-k and temperature (1.0) samplers,
and `post_sampling_probs`: the probabilities llama.cpp reports are then the softmax over the label
logits alone, because a uniform bias cancels in that softmax. They are normalised over the labels
(they sum to 1 over the labels), so the log-probabilities returned here equal the model's raw
log-probabilities up to one constant per call; the domain's softmax removes that constant. The bias
is small (32) because it is added in float32: a bias of 1e5 would cost ~4e-4 in precision. If a
label is so improbable that another token outranks it even with the bias, it drops out of the top
k: the call is retried once with a large bias, and a label still missing is a BackendError.

Prompt cache and slots. llama.cpp keeps one KV cache per slot and reuses the longest common prefix
of the previous prompt in the same slot. Each call is pinned to a slot (`id_slot`) chosen by
`SlotRouter`: the slot whose cache shares the most tokens with the prompt, unless its queue makes
another slot cheaper. The branches of one request therefore follow their warm-up into its slot and
pay only for their suffix, while other requests use other slots in parallel. At most one call runs
per slot at a time; the others wait in an asyncio FIFO, where they can still be cancelled for free.

Batch invariance. The KV cache is F32 and flash attention is off (see `engine_params`): a branch
evaluated on a cached prefix then gives the same probabilities as a cold evaluation of the same
prompt, to float precision, which llama.cpp's defaults do not.

Abort. A call streams with `return_progress`, so llama.cpp reports after each prompt batch
(`BATCH_TOKENS`); when the call is aborted or its coroutine cancelled, the stream callback answers
"stop" at the next report and llama.cpp cancels the task. A call that was cancelled keeps its slot
until the engine has really let go of it, so the slot's cache and queue stay consistent.

The engine also starts llama.cpp's HTTP server (xllamacpp always does). It listens on 127.0.0.1 on
a random port and requires a random per-process API key, so nothing else can use it; openjev only
calls its /props, /health and /tokenize routes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import secrets
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gguf
import msgspec
import xllamacpp  # type: ignore[import-untyped]

from openjev.adapters.embedded.model import read_gguf_metadata
from openjev.domain.errors import BackendError, BackendUnavailable, StartupError
from openjev.domain.ports import BackendHealth, CallUsage, ChatMessage, LabelScores, PromptCodec

log = logging.getLogger(__name__)

LABEL_BIAS = 32.0  # exact to ~1e-7 in probability; enough for labels within 32 nats of the best token
FALLBACK_LABEL_BIAS = 1024.0  # retry for labels far below the best token: ~1e-4 precision at worst
# A label whose probability underflows float32 (more than ~103 nats below the best label) reads as
# this log-probability: the smallest positive float32, i.e. "at most this".
LOG_PROB_FLOOR = -149 * math.log(2)
BATCH_TOKENS = 512  # llama.cpp prompt batch: the granularity at which an abort takes effect
PROMPT_CACHE_MIB = 256  # llama.cpp's host-memory cache of evicted slot prompts (its default is 8 GiB)
QUEUE_WEIGHT = 0.125  # how much a token waiting in a slot's queue counts against a token of prefill
HTTP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class EngineConfig:
    """How to start llama.cpp: the GGUF, CPU threads, parallel slots and the context of each slot."""

    model_path: Path
    threads: int
    parallel_slots: int = 4
    slot_context: int = 4096
    verbose: bool = False
    batch_tokens: int = BATCH_TOKENS
    prompt_cache_mib: int = PROMPT_CACHE_MIB
    exact: bool = True  # F32 KV cache, no flash attention: batch-invariant results, 2x KV memory

    @classmethod
    def create(
        cls,
        model_path: Path,
        *,
        threads: int | None,
        parallel_slots: int,
        slot_context: int,
        verbose: bool = False,
    ) -> EngineConfig:
        return cls(
            model_path=model_path,
            threads=threads or available_cpus(),
            parallel_slots=parallel_slots,
            slot_context=slot_context,
            verbose=verbose,
        )


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask in a container), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --- Requests and replies (pure) -------------------------------------------------------------------


def warm_request(token_ids: Sequence[int], *, slot: int) -> dict[str, Any]:
    """Prefill `token_ids` into `slot` and sample one throw-away token as cheaply as possible."""
    return {
        **_common(token_ids, slot),
        "samplers": ["top_k"],
        "top_k": 1,
    }


def score_request(token_ids: Sequence[int], label_ids: Sequence[int], *, slot: int, bias: float) -> dict[str, Any]:
    """The next-token distribution over exactly `label_ids` (distinct), normalised over them."""
    return {
        **_common(token_ids, slot),
        "logit_bias": [[label, bias] for label in label_ids],
        "samplers": ["top_k", "temperature"],
        "top_k": len(label_ids),
        "temperature": 1.0,
        "n_probs": len(label_ids),
        "post_sampling_probs": True,
    }


def _common(token_ids: Sequence[int], slot: int) -> dict[str, Any]:
    return {
        "prompt": list(token_ids),
        "n_predict": 1,
        "cache_prompt": True,
        "id_slot": slot,
        "stream": True,
        "return_progress": True,
        "stream_options": {"include_usage": True},
        "seed": 0,
    }


class ReplyCollector:
    """Stream callback: merges llama.cpp's chunks into one reply and says when to stop.

    Called by xllamacpp from the engine thread for each chunk (raw JSON bytes); returning True stops
    the stream, and llama.cpp cancels the task. It must never raise: xllamacpp would swallow it.
    """

    def __init__(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        self._should_stop = should_stop
        self.top_probs: list[dict[str, Any]] | None = None
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None
        self.error: str | None = None
        self.stopped = False

    def __call__(self, chunk: bytes | str | dict[str, Any]) -> bool:
        try:
            self.feed(chunk if isinstance(chunk, dict) else msgspec.json.decode(chunk))
        except Exception as exc:
            self.error = f"unreadable reply chunk: {exc}"
        if self.error is None and self._should_stop():
            self.stopped = True
        return self.stopped or self.error is not None

    def feed(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            raise TypeError(f"expected a JSON object, got {type(chunk).__name__}")
        error = chunk.get("error")
        if error is not None or ("message" in chunk and "choices" not in chunk):
            detail = error if isinstance(error, dict) else chunk
            self.error = str(detail.get("message") or detail) if isinstance(detail, dict) else str(detail)
            return
        for choice in chunk.get("choices") or ():
            logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
            content = logprobs.get("content") if isinstance(logprobs, dict) else None
            if content:
                self.top_probs = list(content[0].get("top_probs") or [])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]

    def call_usage(self) -> CallUsage:
        """Prompt tokens and the prompt tokens llama.cpp did not re-evaluate (taken from its cache)."""
        if self.usage is None:
            raise BackendError("the llama.cpp engine ended the call without reporting usage")
        prompt = self.usage.get("prompt_tokens")
        details = self.usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if cached is None and self.timings is not None:
            cached = self.timings.get("cache_n")
        if not isinstance(prompt, int):
            raise BackendError(f"the llama.cpp engine reported no prompt token count: {self.usage}")
        return CallUsage(prompt_tokens=prompt, cached_tokens=cached if isinstance(cached, int) else None)


def label_probabilities(reply: ReplyCollector, label_ids: Sequence[int]) -> dict[int, float] | None:
    """The reported probability of every label id, or None when one is missing from the reply."""
    if reply.top_probs is None:
        raise BackendError("the llama.cpp engine returned no token probabilities")
    found: dict[int, float] = {}
    for entry in reply.top_probs:
        token, prob = entry.get("id"), entry.get("prob")
        if isinstance(token, int) and isinstance(prob, int | float):
            found[token] = float(prob)
    if any(label not in found for label in label_ids):
        return None
    return {label: found[label] for label in label_ids}


def to_logprobs(probs: Mapping[int, float], label_ids: Sequence[int]) -> tuple[float, ...]:
    """Label-normalised log-probabilities in the order asked; an underflowed zero reads as the floor."""
    out: list[float] = []
    for label in label_ids:
        p = probs[label]
        if not math.isfinite(p) or p < 0.0 or p > 1.0 + 1e-6:
            raise BackendError(f"the llama.cpp engine reported probability {p} for token {label}")
        out.append(math.log(p) if p > 0.0 else LOG_PROB_FLOOR)
    return tuple(out)


# --- Slot routing (pure) ---------------------------------------------------------------------------


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix, compared block by block (C speed on long prompts)."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(i + 256, n)
        if a[i:j] != b[i:j]:  # a difference in this block (or a tuple against a list): find it
            while i < j and a[i] == b[i]:
                i += 1
            if i < j:
                return i
        i = j
    return n


@dataclass
class _SlotState:
    tail: tuple[int, ...] = ()  # the prompt of the last call routed here: what its cache will hold
    pending_calls: int = 0
    pending_tokens: int = 0  # tokens still to prefill for the calls routed here and not finished
    last_routed: int = -1


@dataclass(frozen=True)
class Route:
    slot: int
    new_tokens: int  # the tokens this call is expected to prefill


@dataclass
class SlotRouter:
    """Chooses a slot per call: least prefill work plus a fraction of the slot's queued work.

    On a CPU every slot shares the same cores, so total prefill is what costs. A call joins a busy
    slot only when it continues that slot's prompt: a branch that reuses at least half of its tokens
    there, or a warm-up whose whole prefix is already there. Another request's warm-up, which may
    share a long chat header and data frame, must not evict a prefix whose branches are still coming.
    The queue term lets a very long queue spill to another slot when the prefix is cheap to
    recompute. Ties go to the least recently used slot, which keeps the most recent caches alive.
    """

    slots: int
    queue_weight: float = QUEUE_WEIGHT
    _states: list[_SlotState] = field(init=False)
    _clock: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._states = [_SlotState() for _ in range(self.slots)]

    def route(self, token_ids: Sequence[int], *, warm_up: bool = False) -> Route:
        tokens = tuple(token_ids)
        continues = len(tokens) - 1 if warm_up else (len(tokens) + 1) // 2
        options: list[tuple[tuple[float, int, int], Route, bool]] = []
        for slot, state in enumerate(self._states):
            reused = min(common_prefix_length(state.tail, tokens), max(len(tokens) - 1, 0))
            new = len(tokens) - reused
            eligible = state.pending_calls == 0 or reused >= continues
            key = (new + self.queue_weight * state.pending_tokens, state.pending_calls, state.last_routed)
            options.append((key, Route(slot=slot, new_tokens=new), eligible))
        candidates = [o for o in options if o[2]] or options
        chosen = min(candidates, key=lambda o: o[0])[1]
        state = self._states[chosen.slot]
        self._clock += 1
        state.tail = tokens
        state.pending_calls += 1
        state.pending_tokens += chosen.new_tokens
        state.last_routed = self._clock
        return chosen

    def done(self, route: Route) -> None:
        state = self._states[route.slot]
        state.pending_calls -= 1
        state.pending_tokens -= route.new_tokens

    def busy(self) -> int:
        return sum(s.pending_calls for s in self._states)


# --- The backend -----------------------------------------------------------------------------------

_CODEC_PROBES = (
    "Hello, world! It's a test: don't, won't, we'll, I'd, you're, they've.",
    "Café, naïve, façade, Ångström, São Paulo, Zürich, Ελληνικά, русский текст, עברית, العربية.",
    "日本語のテキスト、中文文本，한국어 텍스트。 emoji: 🎉🚀👍🏽 ❤️ 🇫🇷 👩‍👩‍👧",
    "def f(x):\n\treturn {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n\n\n    if x >= 10_000: pass\r\n",
    "Numbers 0 7 42 123 1234 12345 3.14159 -1e-9 2026-11-30 $9.99 100% #1",
    "   leading spaces, trailing spaces   \n\n\n  multiple\t\ttabs \u00a0nbsp \u2003emspace  ",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nAnswer: A<|im_end|><|endoftext|>",
    "x<|im_start|>y<|im_end|>z <|im_start|> <|im_end|>",
)


class Engine(Protocol):
    """The blocking engine the backend drives: llama.cpp (`LlamaEngine`) or a test double."""

    slots: int
    slot_context: int  # per slot, as the engine really allocated it
    vocab_size: int

    def complete(self, body: bytes, on_chunk: Callable[[bytes], bool]) -> None:
        """Run one streamed completion; `on_chunk` gets each JSON chunk and returns True to stop."""

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]: ...

    def check_health(self) -> None:
        """Raise when the engine does not answer."""

    def shutdown(self) -> None:
        """Free the engine (joins its threads: call it off the event loop)."""


class LlamaEngine:
    """xllamacpp's `Server`: llama.cpp's server engine loaded in this process."""

    def __init__(self, server: Any, api_key: str, *, slots: int, slot_context: int, vocab_size: int) -> None:
        self._server: Any = server
        self._api_key = api_key
        self._address = str(server.listening_address)
        self.slots = slots
        self.slot_context = slot_context
        self.vocab_size = vocab_size

    @classmethod
    def load(cls, config: EngineConfig) -> LlamaEngine:
        """Load the GGUF (seconds). Raises StartupError with what to check when llama.cpp refuses."""
        path = config.model_path
        if not path.is_file():
            raise StartupError(f"the embedded model file {path} does not exist (OPENJEV_MODEL)")
        vocab = read_gguf_metadata(path, arrays=False).get(gguf.Keys.Tokenizer.LIST)
        api_key = secrets.token_urlsafe(32)
        started = time.perf_counter()
        try:
            server = xllamacpp.Server(engine_params(config, api_key))
        except Exception as exc:
            raise StartupError(
                f"llama.cpp could not load {path} with {config.parallel_slots} slots of {config.slot_context} "
                f"tokens: {exc} (is it a GGUF chat model this llama.cpp build supports, with enough memory for "
                "that context? OPENJEV_LOG_LEVEL=debug shows llama.cpp's own log)"
            ) from None
        engine = cls(server, api_key, slots=0, slot_context=0, vocab_size=vocab if isinstance(vocab, int) else 0)
        del server
        try:
            props = engine._http_json("GET", "/props")
            engine.slot_context = int((props.get("default_generation_settings") or {}).get("n_ctx") or 0)
            engine.slots = int(props.get("total_slots") or 0)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            engine.shutdown()
            raise StartupError(f"the llama.cpp engine started but its /props route failed: {exc}") from None
        if engine.slots != config.parallel_slots or engine.slot_context <= 0:
            engine.shutdown()
            raise StartupError(
                f"llama.cpp started {engine.slots} slots of {engine.slot_context} tokens "
                f"instead of {config.parallel_slots} slots"
            )
        log.info(
            "embedded engine loaded %s in %.1f s: %d slots x %d tokens, %d threads",
            path.name,
            time.perf_counter() - started,
            engine.slots,
            engine.slot_context,
            config.threads,
        )
        return engine

    def complete(self, body: bytes, on_chunk: Callable[[bytes], bool]) -> None:
        server = self._server
        if server is None:
            raise BackendUnavailable("the embedded llama.cpp engine was shut down")
        server.handle_completions(body, on_chunk)  # releases the GIL while llama.cpp works

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return [int(t) for t in self._http_json("POST", "/tokenize", body)["tokens"]]

    def check_health(self) -> None:
        self._http_json("GET", "/health")

    def shutdown(self) -> None:
        self._server = None  # the last reference: llama.cpp's destructor stops and joins its threads here

    def _http_json(self, method: str, path: str, body: Any = None) -> Any:
        """llama.cpp's HTTP routes on its private localhost port, with this process's random key."""
        if self._server is None:
            raise BackendUnavailable("the embedded llama.cpp engine was shut down")
        request = urllib.request.Request(
            self._address + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read())


class EmbeddedBackend:
    """ScoringBackend for the in-process llama.cpp engine (xllamacpp)."""

    def __init__(self, config: EngineConfig, *, load_engine: Callable[[EngineConfig], Engine] | None = None) -> None:
        self.config = config
        self._load_engine: Callable[[EngineConfig], Engine] = load_engine or LlamaEngine.load
        self._engine: Engine | None = None
        self._router = SlotRouter(config.parallel_slots)
        self._locks: list[asyncio.Lock] = []
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: dict[str, int] = {}  # call id -> engine calls not finished (a retry reuses the id)
        self._aborted: set[str] = set()
        self._engine_calls: set[asyncio.Future[None]] = set()
        self._closing = False
        self._failure: str | None = None

    # -- life cycle

    @property
    def started(self) -> bool:
        return self._engine is not None and not self._closing

    @property
    def engine(self) -> Engine:
        if self._engine is None or self._closing:
            raise BackendUnavailable("the embedded llama.cpp engine is not running")
        return self._engine

    async def start(self) -> None:
        """Load the GGUF into llama.cpp (seconds, in a worker thread). Raises StartupError on failure."""
        if self._engine is not None:
            return
        self._closing = False
        loading = asyncio.ensure_future(asyncio.to_thread(self._load_engine, self.config))
        try:
            engine = await asyncio.shield(loading)
        except asyncio.CancelledError:  # shutting down mid-load: free the engine once it is up
            loading.add_done_callback(_shutdown_when_loaded)
            raise
        except StartupError as exc:
            self._failure = exc.message
            raise
        except Exception as exc:
            self._failure = f"the embedded llama.cpp engine failed to start: {exc}"
            raise StartupError(self._failure) from exc
        self._engine = engine
        self._router = SlotRouter(engine.slots)
        self._locks = [asyncio.Lock() for _ in range(engine.slots)]
        self._executor = ThreadPoolExecutor(max_workers=engine.slots, thread_name_prefix="openjev-llama")
        self._failure = None

    async def close(self) -> None:
        """Stop every call at its next progress report, wait for the engine to let go, free it."""
        engine = self._engine
        if engine is None:
            return
        self._closing = True
        pending = list(self._engine_calls)
        if pending:
            await asyncio.wait(pending, timeout=30.0)
        self._engine = None
        await asyncio.to_thread(engine.shutdown)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def health(self) -> BackendHealth:
        engine = self._engine
        if engine is None or self._closing:
            return BackendHealth(ok=False, detail=self._failure or "llama.cpp engine not started")
        try:
            await asyncio.wait_for(asyncio.to_thread(engine.check_health), HTTP_TIMEOUT_SECONDS)
        except Exception as exc:
            return BackendHealth(ok=False, detail=f"llama.cpp engine does not answer: {exc}")
        return BackendHealth(
            ok=True,
            detail=(
                f"llama.cpp engine: {self.config.model_path.name}, {engine.slots} slots x "
                f"{engine.slot_context} tokens, {self.config.threads} threads, {self._router.busy()} calls in flight"
            ),
        )

    def context_tokens(self) -> int | None:
        return self._engine.slot_context if self._engine is not None else None

    # -- calls

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        reply = await self._call(call_id, token_ids, lambda slot: warm_request(token_ids, slot=slot), warm_up=True)
        return reply.call_usage()

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        distinct = list(dict.fromkeys(label_ids))
        vocab = self.engine.vocab_size
        bad = [label for label in distinct if not 0 <= label < vocab]
        if bad or not distinct:
            raise BackendError(f"label token ids {bad or '[]'} are not in the model's vocabulary of {vocab}")
        reply = await self._call(
            call_id, token_ids, lambda slot: score_request(token_ids, distinct, slot=slot, bias=LABEL_BIAS)
        )
        usage = reply.call_usage()
        probs = label_probabilities(reply, distinct)
        if probs is None:  # some other token outranked a label even with the bias
            reply = await self._call(
                call_id, token_ids, lambda slot: score_request(token_ids, distinct, slot=slot, bias=FALLBACK_LABEL_BIAS)
            )
            probs = label_probabilities(reply, distinct)
            if probs is None:
                raise BackendError(f"the llama.cpp engine did not return every label token of {distinct}")
        return LabelScores(logprobs=to_logprobs(probs, label_ids), usage=usage)

    async def abort(self, call_ids: Sequence[str]) -> None:
        """Queued calls never reach the engine; a running one stops at its next progress report."""
        for call_id in call_ids:
            if call_id in self._in_flight:
                self._aborted.add(call_id)

    async def _call(
        self,
        call_id: str,
        token_ids: Sequence[int],
        make_request: Callable[[int], dict[str, Any]],
        *,
        warm_up: bool = False,
    ) -> ReplyCollector:
        """One engine call, pinned to the routed slot, FIFO per slot, abortable at each progress report."""
        engine, executor = self._engine, self._executor
        if engine is None or executor is None or self._closing:
            raise BackendUnavailable("the embedded llama.cpp engine is not running")
        if not token_ids:
            raise BackendError("cannot score an empty prompt")
        route = self._router.route(token_ids, warm_up=warm_up)
        lock = self._locks[route.slot]
        self._enter(call_id)
        future: asyncio.Future[None] | None = None
        try:
            await lock.acquire()
            try:
                if self._closing:
                    raise BackendUnavailable("the embedded llama.cpp engine is shutting down")
                if self._stop_requested(call_id):
                    raise BackendError(f"call {call_id} was aborted before it reached the engine")
                body = msgspec.json.encode(make_request(route.slot))
                reply = ReplyCollector(lambda: self._stop_requested(call_id))
                try:
                    future = asyncio.get_running_loop().run_in_executor(executor, engine.complete, body, reply)
                except RuntimeError as exc:  # the executor was shut down by close()
                    raise BackendUnavailable(f"the embedded llama.cpp engine is shutting down: {exc}") from None
            finally:
                if future is None:
                    lock.release()
            self._engine_calls.add(future)
            future.add_done_callback(lambda done: self._engine_call_done(done, lock, route, call_id))
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                self._aborted.add(call_id)  # the engine stops at its next progress report
                task = asyncio.current_task()
                if future.cancelled() and task is not None and not task.cancelling():
                    raise BackendUnavailable("the embedded llama.cpp engine shut down") from None
                raise
            except (BackendError, BackendUnavailable):
                raise
            except Exception as exc:
                raise BackendError(f"the llama.cpp engine failed: {exc}") from exc
        finally:
            if future is None:
                self._router.done(route)
                self._leave(call_id)
        if reply.error is not None:
            raise BackendError(f"the llama.cpp engine refused the call: {reply.error}")
        if reply.stopped:
            if self._closing:
                raise BackendUnavailable("the embedded llama.cpp engine is shutting down")
            raise BackendError(f"call {call_id} was aborted")
        return reply

    def _engine_call_done(self, future: asyncio.Future[None], lock: asyncio.Lock, route: Route, call_id: str) -> None:
        """The engine let go of the slot: release it (also after a cancelled await) and forget the call."""
        self._engine_calls.discard(future)
        lock.release()
        self._router.done(route)
        self._leave(call_id)
        if not future.cancelled() and future.exception() is not None:
            log.debug("llama.cpp engine call failed: %s", future.exception())

    def _enter(self, call_id: str) -> None:
        self._in_flight[call_id] = self._in_flight.get(call_id, 0) + 1

    def _leave(self, call_id: str) -> None:
        left = self._in_flight.get(call_id, 1) - 1
        if left > 0:
            self._in_flight[call_id] = left
        else:
            self._in_flight.pop(call_id, None)
            self._aborted.discard(call_id)

    def _stop_requested(self, call_id: str) -> bool:
        return self._closing or call_id in self._aborted

    # -- the engine's own tokenizer (blocking; start-up checks and tests)

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]:
        """Token ids of `text` from llama.cpp itself, nothing added; special tokens parsed or not."""
        return self.engine.tokenize(text, parse_special=parse_special)

    def check_codec(self, codec: PromptCodec, samples: Iterable[str] = ()) -> None:
        """Refuse to serve when the Python codec and llama.cpp tokenize differently (StartupError)."""
        probe = codec.render(
            [ChatMessage(role="system", content="Judge the data."), ChatMessage(role="user", content="Is it?")]
        )
        for text in (*_CODEC_PROBES, probe, *samples):
            ours, theirs = codec.encode_template(text), self.tokenize(text)
            if ours == theirs:
                ours, theirs = codec.encode_caller_text(text), self.tokenize(text, parse_special=False)
            if ours != theirs:
                at = common_prefix_length(ours, theirs)
                raise StartupError(
                    f"the tokenizer rebuilt from {self.config.model_path.name} disagrees with llama.cpp at token {at} "
                    f"of a built-in probe ({ours[at : at + 5]} vs {theirs[at : at + 5]}): this GGUF's pre-tokenizer "
                    "is not reproduced exactly, so prompts would be mis-tokenized"
                )


def engine_params(config: EngineConfig, api_key: str) -> Any:
    """llama.cpp server parameters: one slot per parallel call, each with the full slot context."""
    params = xllamacpp.CommonParams()
    params.model.path = str(config.model_path)
    params.n_parallel = config.parallel_slots
    params.kv_unified = False
    params.n_ctx = config.parallel_slots * config.slot_context
    params.n_batch = config.batch_tokens
    params.n_ubatch = config.batch_tokens
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    # Exact mode: with flash attention or an F16 KV cache, llama.cpp's result depends on how the prompt
    # was batched (a cached prefix plus a suffix vs one cold batch differ by up to ~2e-2 in probability
    # on SmolLM2). Plain attention over an F32 cache makes the cached and the cold evaluation identical,
    # so an answer never depends on what ran before it; it costs twice the KV memory (SmolLM2: 46 KB per
    # token of context, 755 MB for 4 slots of 4096 tokens) and some prefill speed.
    if config.exact:
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cache_type_k = xllamacpp.ggml_type.GGML_TYPE_F32
        params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.cache_prompt = True
    params.cache_ram_mib = config.prompt_cache_mib
    params.ctx_shift = False  # a prompt longer than a slot is an error, never silently truncated
    params.verbosity = 3 if config.verbose else 1  # 1: errors only
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [api_key]
    params.ui = False
    return params


def _shutdown_when_loaded(loading: asyncio.Future[Engine]) -> None:
    if not loading.cancelled() and loading.exception() is None:
        threading.Thread(target=loading.result().shutdown, name="openjev-llama-shutdown", daemon=True).start()
