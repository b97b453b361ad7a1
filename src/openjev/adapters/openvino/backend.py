"""ScoringBackend on OpenVINO's CPU runtime: the embedded model, evaluated in exact canonical pieces.

How a call goes. `warm(prefix)` remembers the prefix (`Prefixes`) and keeps the KV cache after it
(`Snapshots`). `score(prompt)` finds the prefix its prompt continues, restores that cache into one
of the engine's infer requests (or recomputes it, from the same split, if it was evicted), runs the
rest and reads the labels' log-probabilities from the full next-token distribution, which also
gives their exact share of it (the label mass) at no cost.

Scheduling. One engine step runs at a time (the cores are shared anyway), a step is at most
`PIECE` tokens, and steps are granted round-robin over requests (`FairTurns`): a large request
cannot make a small one wait for all of its calls, and a cancelled or aborted call stops before
its next step. Results never depend on this order (engine.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

import numpy as np

from openjev.adapters.openvino.engine import PIECE, Engine, Snapshot, label_logprobs, pieces
from openjev.adapters.openvino.prefixes import Key, Prefixes, Snapshots, key_of
from openjev.adapters.openvino.turns import FairTurns
from openjev.domain.errors import BackendError, BackendUnavailable, StartupError, first_error
from openjev.domain.ports import BackendHealth, CallUsage, LabelScores, ScoreCall
from openjev.logs import get_logger

log = get_logger("openjev.openvino")
T = TypeVar("T")
SNAPSHOT_BYTES = 256 * 1024 * 1024  # KV caches kept after prefixes (57 KB a token on the default model)
REQUESTS = 4  # infer requests for calls of several steps, whose state waits between their steps


class OpenVINOBackend:
    """The embedded model on OpenVINO (`OPENJEV_ENGINE=openvino`, the default where it applies)."""

    def __init__(
        self,
        load_engine: Callable[[], Engine],
        *,
        model: str,
        threads: int,
        context: int,
        snapshot_bytes: int = SNAPSHOT_BYTES,
    ) -> None:
        """`load_engine` verifies and loads the model (blocking, in a worker thread at `start`);
        `model`, `threads` and `context` are what it loads, for /health and the use case's limits."""
        self.model = model
        self.threads = threads
        self.context = context
        self._load_engine = load_engine
        self._engine: Engine | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._requests: asyncio.Queue[Any] = asyncio.Queue()
        self._scratch: Any = None
        self._turns = FairTurns()
        self._prefixes = Prefixes()
        self._snapshots = Snapshots(snapshot_bytes)
        self._aborted: set[str] = set()
        self._running: dict[str, int] = {}
        self._failure: str | None = None
        self._closing = False

    # -- life cycle

    @property
    def started(self) -> bool:
        return self._engine is not None and not self._closing

    @property
    def engine(self) -> Engine:
        if self._engine is None or self._closing:
            raise BackendUnavailable("the embedded OpenVINO engine is not running")
        return self._engine

    async def start(self) -> None:
        if self._engine is not None:
            return
        self._closing = False
        try:
            engine = await asyncio.to_thread(self._load_engine)
        except StartupError as exc:
            self._failure = exc.message
            raise
        except Exception as exc:
            self._failure = f"the embedded OpenVINO engine failed to start: {exc}"
            raise StartupError(self._failure) from exc
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openjev-openvino")
        self._requests = asyncio.Queue()
        for _ in range(REQUESTS):
            self._requests.put_nowait(engine.new_request())
        self._scratch = engine.new_request()  # single-step calls: used only inside a step
        self._engine = engine
        self._failure = None

    async def close(self) -> None:
        if self._engine is None:
            return
        self._closing = True
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)
            self._executor = None
        self._engine = None

    async def health(self) -> BackendHealth:
        engine = self._engine
        if engine is None or self._closing:
            return BackendHealth(ok=False, detail=self._failure or "OpenVINO engine not started")
        return BackendHealth(
            ok=True,
            detail=(
                f"OpenVINO engine: {self.model}, {engine.precision}, "
                f"{self.threads} threads, deterministic (canonical pieces), "
                f"{len(self._running)} calls in flight, "
                f"{self._turns.waiting()} steps waiting, {len(self._snapshots)} prefixes cached "
                f"({self._snapshots.bytes // 2**20} MiB)"
            ),
        )

    def context_tokens(self) -> int | None:
        return self.context if self._engine is not None else None

    def vocab_size(self) -> int | None:
        """The rows of the model's embedding and head (151,936 on the packaged Qwen models)."""
        return self._engine.vocab_size if self._engine is not None else None

    # -- calls

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        if not token_ids:
            raise BackendError("cannot warm an empty prompt")
        key = self._prefixes.add(token_ids)
        if self._snapshots.get(key) is not None:
            self._check_running()
            return CallUsage(prompt_tokens=len(token_ids), cached_tokens=len(token_ids))
        await self._with_request(call_id, key, lambda request: self._prefill(call_id, key, request, token_ids))
        return CallUsage(prompt_tokens=len(token_ids), cached_tokens=0)

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        logprobs, _, cached = await self._score(call_id, token_ids, label_ids)
        return LabelScores(logprobs=logprobs, usage=CallUsage(prompt_tokens=len(token_ids), cached_tokens=cached))

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """Every call concurrently; the label mass, when asked, comes from the same distribution."""

        async def one(call: ScoreCall) -> LabelScores:
            logprobs, mass, cached = await self._score(call.call_id, call.token_ids, call.label_ids)
            usage = CallUsage(prompt_tokens=len(call.token_ids), cached_tokens=cached)
            return LabelScores(logprobs=logprobs, usage=usage, label_mass=mass if call.label_mass else None)

        if not calls:
            return []
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(call)) for call in calls]
        except BaseExceptionGroup as failed:
            raise first_error(failed) from None
        return [task.result() for task in tasks]

    async def abort(self, call_ids: Sequence[str]) -> None:
        """A call stops before its next step (at most `PIECE` tokens away)."""
        self._aborted.update(call_id for call_id in call_ids if call_id in self._running)

    # -- internals

    async def _score(
        self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]
    ) -> tuple[tuple[float, ...], float, int]:
        engine = self.engine
        if not token_ids:
            raise BackendError("cannot score an empty prompt")
        bad = [label for label in dict.fromkeys(label_ids) if not 0 <= label < engine.vocab_size]
        if bad or not label_ids:
            raise BackendError(
                f"label token ids {bad or '[]'} are not in the model's vocabulary of {engine.vocab_size}"
            )
        prefix = self._prefixes.longest(token_ids)
        group: Hashable = prefix if prefix is not None else key_of(token_ids)
        start = prefix[0] if prefix is not None else 0
        snapshot = self._snapshots.get(prefix) if prefix is not None else None
        cached = start if snapshot is not None else 0
        if len(token_ids) - start <= PIECE and (prefix is None or snapshot is not None):
            # The common case, a question after a cached prefix: one step on the shared scratch request.
            def one_step() -> np.ndarray:
                if snapshot is not None:
                    engine.restore(self._scratch, snapshot)
                else:
                    engine.reset(self._scratch)
                return engine.evaluate(self._scratch, token_ids[start:], start)

            logits = await self._with_running(call_id, self._step(call_id, group, one_step))
            return (*label_logprobs(logits, label_ids), cached)

        async def run(request: Any) -> np.ndarray:
            await self._resume(call_id, group, request, prefix, snapshot, token_ids)
            *before, (at, end) = pieces(start, len(token_ids))  # token_ids is longer than any prefix of it
            for first, last in before:
                await self._step(call_id, group, partial(engine.advance, request, token_ids[first:last], first))
            return await self._step(call_id, group, partial(engine.evaluate, request, token_ids[at:end], at))

        logits = await self._with_request(call_id, group, run)
        return (*label_logprobs(logits, label_ids), cached)

    async def _prefill(self, call_id: str, key: Key, request: Any, token_ids: Sequence[int]) -> None:
        """Evaluate a prefix in its canonical pieces, and keep its KV cache.

        A prefix that extends another warmed one (a request's prefix after its worked examples' start,
        warmed first) continues from it, restored or recomputed the same way, so the split is the
        same whatever the cache holds; any other starts from position 0.
        """
        engine = self.engine
        base = self._prefixes.longest(token_ids)
        start = 0 if base is None else base[0]
        snapshot = self._snapshots.get(base) if base is not None else None
        await self._resume(call_id, key, request, base, snapshot, token_ids)
        for at, end in pieces(start, len(token_ids)):
            await self._step(call_id, key, partial(engine.advance, request, token_ids[at:end], at))
        snapshot = await self._step(call_id, key, lambda: engine.snapshot(request, len(token_ids)))
        self._snapshots.put(key, snapshot)

    async def _resume(
        self,
        call_id: str,
        group: Hashable,
        request: Any,
        base: Key | None,
        snapshot: Snapshot | None,
        token_ids: Sequence[int],
    ) -> None:
        """Put `request` at the end of `base`, a warmed prefix of `token_ids` (position 0 without one).

        Its kept KV cache (`snapshot`) is restored; evicted since it was warmed, it is recomputed with
        the same split, so the bits do not depend on what the cache holds.
        """
        engine = self.engine
        if snapshot is not None:
            await self._step(call_id, group, partial(engine.restore, request, snapshot))
        elif base is not None:
            await self._prefill(call_id, base, request, token_ids[: base[0]])
        else:
            await self._step(call_id, group, partial(engine.reset, request))

    async def _with_request(self, call_id: str, group: Hashable, work: Callable[[Any], Awaitable[T]]) -> T:
        """Run `work` (several steps) on an infer request of its own: its state waits there between steps."""

        async def held() -> T:
            request = await self._requests.get()
            try:
                return await work(request)
            finally:
                self._requests.put_nowait(request)

        return await self._with_running(call_id, held())

    async def _with_running(self, call_id: str, work: Awaitable[T]) -> T:
        """Await `work` with `call_id` counted as running, so that `abort` can reach it."""
        self._check_running()
        self._running[call_id] = self._running.get(call_id, 0) + 1
        try:
            return await work
        finally:
            left = self._running[call_id] - 1
            if left:
                self._running[call_id] = left
            else:
                del self._running[call_id]
                self._aborted.discard(call_id)

    async def _step(self, call_id: str, group: Hashable, step: Callable[[], T]) -> T:
        """One engine step in the group's turn; an aborted call or a closing engine stops here."""
        async with self._turns.turn(group):
            if call_id in self._aborted:
                raise BackendError(f"call {call_id} was aborted")
            self._check_running()
            executor = self._executor
            if executor is None:
                raise BackendUnavailable("the embedded OpenVINO engine is shutting down")
            future = asyncio.get_running_loop().run_in_executor(executor, step)
            # The step finishes even if the caller goes away: the infer request stays consistent.
            return await asyncio.shield(future)

    def _check_running(self) -> None:
        if self._engine is None or self._closing:
            raise BackendUnavailable("the embedded OpenVINO engine is not running")
