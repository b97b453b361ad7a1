"""ScoringBackend on xllamacpp: llama.cpp's own C++ server engine, running inside this process.

How a call goes: `SlotRouter` (slot_router.py) picks the slot whose prompt cache serves it best;
the request is built and its streamed reply read by llama_protocol.py; the blocking engine call
runs in a worker thread on `LlamaEngine` (llama_engine.py). At most one call runs per slot at a
time; the others wait in an asyncio FIFO, where they can still be cancelled for free.

Deterministic mode (the default, `OPENJEV_DETERMINISTIC`): one engine call at a time, whatever the
slot, so llama.cpp never batches two calls' tokens together, and each call is evaluated from a
point `cache_plan.py` chooses, so the answer is bit-identical to a cold evaluation of its prompt.
The backend tracks what each slot's cache holds (`_held`) to plan against it.

Abort. A call streams with `return_progress`, so llama.cpp reports after each prompt batch
(`BATCH_TOKENS`); when the call is aborted or its coroutine cancelled, the stream callback answers
"stop" at the next report and llama.cpp cancels the task. A call that was cancelled keeps its slot
until the engine has really let go of it, so the slot's cache and queue stay consistent.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec

from openjev.adapters.common_prefix import common_prefix_length
from openjev.adapters.embedded.cache_plan import CachePlan, canonical_start, plan_score, warm_prefix
from openjev.adapters.embedded.llama_engine import HTTP_TIMEOUT_SECONDS, Engine, EngineConfig, LlamaEngine
from openjev.adapters.embedded.llama_protocol import (
    FALLBACK_LABEL_BIAS,
    LABEL_BIAS,
    ReplyCollector,
    label_mass,
    label_probabilities,
    raw_request,
    score_request,
    to_logprobs,
    warm_request,
)
from openjev.adapters.embedded.slot_router import Route, SlotRouter
from openjev.adapters.score_each import score_each
from openjev.domain.errors import BackendError, BackendUnavailable, StartupError
from openjev.domain.ports import BackendHealth, CallUsage, ChatMessage, LabelScores, PromptCodec, ScoreCall
from openjev.logs import get_logger

log = get_logger("openjev.embedded")
RAW_EXTRA_PROBS = 32  # raw probabilities read beyond the labels' count, for the label mass
Held = tuple[int, ...] | None  # what a slot's cache holds; None: not known (after a failed call)
Done = tuple[ReplyCollector, Held]  # a finished engine call: its reply, and what its slot holds now

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


class EmbeddedBackend:
    """ScoringBackend for the in-process llama.cpp engine (xllamacpp)."""

    def __init__(self, config: EngineConfig, *, load_engine: Callable[[EngineConfig], Engine] | None = None) -> None:
        self.config = config
        self._load_engine: Callable[[EngineConfig], Engine] = load_engine or LlamaEngine.load
        self._engine: Engine | None = None
        self._router = SlotRouter(config.parallel_slots)
        self._locks: list[asyncio.Lock] = []
        self._held: list[Held] = []
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: dict[str, int] = {}  # call id -> engine calls not finished (a retry reuses the id)
        self._aborted: set[str] = set()
        self._engine_calls: set[asyncio.Future[Done]] = set()
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
        # Deterministic: one lock shared by every slot (one engine call at a time, FIFO).
        self._locks = (
            [asyncio.Lock()] * engine.slots
            if self.config.deterministic
            else [asyncio.Lock() for _ in range(engine.slots)]
        )
        self._held = [()] * engine.slots
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
        except Exception as exc:  # noqa: BLE001 - any failure of the probe is the answer "unhealthy"
            return BackendHealth(ok=False, detail=f"llama.cpp engine does not answer: {exc}")
        return BackendHealth(
            ok=True,
            detail=(
                f"llama.cpp engine: {self.config.model_path.name}, {engine.slots} slots x "
                f"{engine.slot_context} tokens, {self.config.threads} threads, "
                f"{'deterministic: one engine call at a time' if self.config.deterministic else 'not deterministic'}, "
                f"{self._router.busy()} calls in flight"
            ),
        )

    def context_tokens(self) -> int | None:
        return self._engine.slot_context if self._engine is not None else None

    def vocab_size(self) -> int | None:
        return self._engine.vocab_size if self._engine is not None and self._engine.vocab_size > 0 else None

    # -- calls

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        """Prefill the shared prefix. Deterministic: only its whole groups now (cache_plan.py), the
        last few tokens with each branch; the usage still counts the whole prefix."""
        prefix = warm_prefix(token_ids) if self.config.deterministic else token_ids
        if not prefix:  # shorter than one group: nothing to warm, but a stopped engine is still an error
            if not self.started:
                raise BackendUnavailable("the embedded llama.cpp engine is not running")
            return CallUsage(prompt_tokens=len(token_ids), cached_tokens=0)
        reply = await self._call(call_id, prefix, lambda slot: warm_request(prefix, slot=slot), warm_up=True)
        return CallUsage(prompt_tokens=len(token_ids), cached_tokens=reply.call_usage().cached_tokens)

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

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """Each call as its own engine call, concurrently: the slot router and the slots' FIFO queues
        already schedule a request's branches together (no HTTP round trip to save in-process).

        A call that asks for its label mass makes one more engine call on the same tokens (cached in
        its slot: one token is evaluated again, or at least `MIN_BATCH` after a cut in deterministic mode),
        reading the raw distribution.
        """
        results = await score_each(self.score, calls)
        measured = [(call, result) for call, result in zip(calls, results, strict=True) if call.label_mass]
        if not measured:
            return results
        masses = iter(await asyncio.gather(*(self._label_mass(call, result) for call, result in measured)))
        return [
            msgspec.structs.replace(r, label_mass=next(masses)) if c.label_mass else r
            for c, r in zip(calls, results, strict=True)
        ]

    async def _label_mass(self, call: ScoreCall, scores: LabelScores) -> float:
        token_ids, label_ids = call.token_ids, call.label_ids
        n_probs = len(label_ids) + RAW_EXTRA_PROBS
        reply = await self._call(
            call.call_id, token_ids, lambda slot: raw_request(token_ids, slot=slot, n_probs=n_probs)
        )
        return label_mass(reply, label_ids, scores.logprobs)

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
        future = await self._submit(call_id, token_ids, make_request, warm_up=warm_up)
        reply, _ = await self._await_engine(future, call_id)
        return self._checked(reply, call_id)

    async def _submit(
        self,
        call_id: str,
        token_ids: Sequence[int],
        make_request: Callable[[int], dict[str, Any]],
        *,
        warm_up: bool,
    ) -> asyncio.Future[Done]:
        """Route the call, wait for its slot's turn and hand it to the engine.

        From then on the slot stays held until the engine lets go of the call (`_engine_call_done`),
        even when the caller stops waiting.
        """
        engine, executor = self._engine, self._executor
        if engine is None or executor is None or self._closing:
            raise BackendUnavailable("the embedded llama.cpp engine is not running")
        if not token_ids:
            raise BackendError("cannot score an empty prompt")
        route = self._router.route(token_ids, warm_up=warm_up)
        lock = self._locks[route.slot]
        self._enter(call_id)
        submitted = False
        try:
            await lock.acquire()
            try:
                work = self._work(engine, call_id, route.slot, token_ids, make_request(route.slot))
                future = self._start_engine_call(executor, work)
            except BaseException:
                lock.release()
                raise
            submitted = True
        finally:
            if not submitted:
                self._router.done(route)
                self._leave(call_id)
        self._engine_calls.add(future)
        future.add_done_callback(lambda done: self._engine_call_done(done, lock, route, call_id))
        return future

    def _work(
        self,
        engine: Engine,
        call_id: str,
        slot: int,
        token_ids: Sequence[int],
        request: dict[str, Any],
    ) -> Callable[[], Done]:
        """What the worker thread runs for this call, planned against what the slot holds now."""
        if self._closing:
            raise BackendUnavailable("the embedded llama.cpp engine is shutting down")
        if self._stop_requested(call_id):
            raise BackendError(f"call {call_id} was aborted before it reached the engine")
        body = msgspec.json.encode(request)
        prompt = tuple(token_ids)

        def stop() -> bool:
            return self._stop_requested(call_id)

        if not self.config.deterministic:
            return lambda: _held_after(_complete(engine, body, stop), prompt)
        plan = plan_score(self._held[slot], prompt, vocab_size=engine.vocab_size)
        return lambda: _run_planned(engine, slot, prompt, body, plan, stop)

    def _start_engine_call(self, executor: ThreadPoolExecutor, work: Callable[[], Done]) -> asyncio.Future[Done]:
        """Run the call's work in a worker thread (llama.cpp releases the GIL)."""
        try:
            return asyncio.get_running_loop().run_in_executor(executor, work)
        except RuntimeError as exc:  # the executor was shut down by close()
            raise BackendUnavailable(f"the embedded llama.cpp engine is shutting down: {exc}") from None

    async def _await_engine(self, future: asyncio.Future[Done], call_id: str) -> Done:
        """Wait for the engine; a cancelled caller marks the call aborted so the engine stops it soon."""
        try:
            return await asyncio.shield(future)
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

    def _checked(self, reply: ReplyCollector, call_id: str) -> ReplyCollector:
        """The finished reply, or the error it stands for (refused, aborted, or stopped by shutdown)."""
        if reply.error is not None:
            raise BackendError(f"the llama.cpp engine refused the call: {reply.error}")
        if reply.stopped:
            if self._closing:
                raise BackendUnavailable("the embedded llama.cpp engine is shutting down")
            raise BackendError(f"call {call_id} was aborted")
        return reply

    def _engine_call_done(self, future: asyncio.Future[Done], lock: asyncio.Lock, route: Route, call_id: str) -> None:
        """The engine let go of the slot: record what it holds, release it (also after a cancelled
        await) and forget the call."""
        self._engine_calls.discard(future)
        failed = future.cancelled() or future.exception() is not None
        if self._held:
            self._held[route.slot] = None if failed else future.result()[1]
        lock.release()
        self._router.done(route)
        self._leave(call_id)
        if not future.cancelled() and future.exception() is not None:
            log.debug("embedded_engine_call_failed", error=str(future.exception()))

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


def _complete(engine: Engine, body: bytes, stop: Callable[[], bool]) -> ReplyCollector:
    reply = ReplyCollector(stop)
    engine.complete(body, reply)
    return reply


def _held_after(reply: ReplyCollector, prompt: tuple[int, ...]) -> Done:
    """A finished call's slot holds its prompt; after an error or an abort, an unknown part of it."""
    return reply, prompt if reply.error is None and not reply.stopped else None


def _run_planned(
    engine: Engine, slot: int, prompt: tuple[int, ...], body: bytes, plan: CachePlan, stop: Callable[[], bool]
) -> Done:
    """The cut the plan asks for, then the call; the call again from a cold cache if llama.cpp
    reused another prefix than planned (its `cache_n` says so), so the answer is the cold one."""
    for attempt in (plan, plan_score(None, prompt, vocab_size=engine.vocab_size)):
        if attempt.cut is not None:
            cut = _complete(engine, msgspec.json.encode(warm_request(attempt.cut, slot=slot)), stop)
            if cut.error is not None or cut.stopped:
                return cut, None
        reply = _complete(engine, body, stop)
        if reply.error is not None or reply.stopped or canonical_start(reply.reused(), len(prompt)):
            return _held_after(reply, prompt)
        log.warning("embedded_cache_plan_missed", slot=slot, planned=attempt.start, reused=reply.reused())
    raise BackendError(f"llama.cpp reused {reply.reused()} tokens of a slot just cut to none: not reproducible")


def _shutdown_when_loaded(loading: asyncio.Future[Engine]) -> None:
    if not loading.cancelled() and loading.exception() is None:
        threading.Thread(target=loading.result().shutdown, name="openjev-llama-shutdown", daemon=True).start()
