"""The evaluation use case: plan → warm the prefix → branches → answers (docs/spec.md#how-an-answer-is-computed).

Depends only on the domain and its ports. After the warm-up, every branch of a request (and every
prior the cache lacks) goes to the backend in one `score_many` batch, under a process-wide limit on
backend calls that counts each branch of a batch as one call (`CallLimit`); a batch larger than the
limit is sent as several batches of at most the limit, concurrently. The first failure, the
deadline or a cancelled caller cancels every sibling and asks the backend to abort every call
still in flight. Bias removal (docs/quality.md) only changes which
branches run, one per option order and per uncached prior, and how their distributions combine
(`openjev.domain.debiasing`); backends never know.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

import msgspec

from openjev.domain.answers import make_answer
from openjev.domain.debiasing import (
    CONTENT_FREE_STATE,
    DebiasMode,
    DebiasPolicy,
    combine_orders,
    divide_prior,
    identity,
    option_orders,
)
from openjev.domain.errors import BackendError, BackendTimeout, first_error
from openjev.domain.labels import LabelSet
from openjev.domain.limits import Limits
from openjev.domain.ports import CallUsage, LabelScores, PromptCodec, ScoreCall, ScoringBackend
from openjev.domain.prompt import Branch, PromptPlan, build_plan, content_free, prompt_text, token_floors
from openjev.domain.request_parsing import decode_request
from openjev.domain.scoring_math import ConfidenceFormula
from openjev.domain.validation import check_model, validate_request, validate_token_floor, validate_tokens
from openjev.domain.wire import (
    Answer,
    ChoiceQuestion,
    NoulQuestion,
    Question,
    SystemOneRequest,
    SystemOneResponse,
    Usage,
)
from openjev.ids import random_id
from openjev.logs import get_logger
from openjev.prior_cache import PriorCache, prior_key

T = TypeVar("T")
log = get_logger("openjev.evaluation")
ABORT_TIMEOUT_SECONDS = 5.0


class Timings(msgspec.Struct, frozen=True):
    """Seconds spent prefilling the shared prefix and running the branches (the HTTP layer times preparation)."""

    prefill: float
    branches: float


class Prepared(msgspec.Struct, frozen=True):
    request: SystemOneRequest
    plan: PromptPlan
    priors: PromptPlan | None = None  # the calibrated questions on a content-free state


class Evaluation(msgspec.Struct, frozen=True):
    response: SystemOneResponse
    prefix_tokens: int
    cached_tokens: int | None  # sum over branches; None when the backend does not report it
    timings: Timings
    debias_calls: int = 0  # calls beyond one per question: extra option orders and priors not cached
    prior_hits: int = 0  # priors served from the cache


def parse_request(body: bytes, limits: Limits, accepted_models: frozenset[str]) -> SystemOneRequest:
    """Everything that can be checked without the tokenizer: schema, counts, model."""
    request = decode_request(body)
    validate_request(request, limits)
    check_model(request.model, accepted_models)
    return request


class Evaluator:
    """Answers requests with one backend; shared by every request of the process."""

    def __init__(
        self,
        *,
        backend: ScoringBackend,
        codec: PromptCodec,
        labels: LabelSet,
        limits: Limits,
        public_model: str,
        temperature: float = 1.0,
        confidence: ConfidenceFormula = "typesafe",
        debias: DebiasMode = "none",
        max_orders: int = 10,
        priors: PriorCache | None = None,
        branch_context: int | None = None,
        new_call_id: Callable[[], str] = random_id,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._backend = backend
        self._codec = codec
        self._labels = labels
        self._limits = limits
        self._public_model = public_model
        self._temperature = temperature
        self._confidence: ConfidenceFormula = confidence
        self._debias: DebiasMode = debias
        self._max_orders = max_orders
        self._priors = priors if priors is not None else PriorCache()
        self._branch_limit = min(limits.max_input_tokens, branch_context or limits.max_input_tokens)
        self._new_call_id = new_call_id
        self._clock = clock
        self._calls = CallLimit(limits.max_concurrent_branches)

    @property
    def branch_limit(self) -> int:
        return self._branch_limit

    @property
    def debias(self) -> DebiasMode:
        return self._debias

    @property
    def labels(self) -> LabelSet:
        return self._labels

    def prepare(self, request: SystemOneRequest) -> Prepared:
        """Build and check the prompt plan (CPU only). Raises InvalidRequest before any inference."""
        policy = DebiasPolicy.of(request.x_debias or self._debias, self._max_orders)

        def orders(question: Question) -> tuple[tuple[int, ...], ...]:
            if policy.rotate and isinstance(question, ChoiceQuestion):
                return option_orders(len(question.criteria), policy.max_orders)
            return ((),)

        # What cannot fit is refused from the byte counts, before tokenizing (seconds for a large state).
        text = prompt_text(request.state, request.questions, self._labels)
        prefix_floor, question_floors = token_floors(text, self._codec)
        validate_token_floor(prefix_floor, question_floors, self._limits, self._branch_limit)
        plan = build_plan(request.state, request.questions, self._codec, self._labels, orders, text)
        validate_tokens(plan, self._limits, self._branch_limit)
        calibrated = {qid: q for qid, q in request.questions.items() if policy.calibrate and calibrates(q)}
        priors = None
        if calibrated:
            empty = content_free(request.state, CONTENT_FREE_STATE)
            priors = build_plan(empty, calibrated, self._codec, self._labels, orders)
        return Prepared(request=request, plan=plan, priors=priors)

    async def evaluate(self, prepared: Prepared) -> Evaluation:
        in_flight: set[str] = set()
        try:
            async with asyncio.timeout(self._limits.request_timeout_seconds):
                return await self._run(prepared, in_flight)
        except TimeoutError:
            await self._abort(in_flight)
            raise BackendTimeout(
                f"the backend did not answer within {self._limits.request_timeout_seconds:g} s"
            ) from None
        except BaseExceptionGroup as group:
            await self._abort(in_flight)
            raise first_error(group) from None
        except BaseException:
            await self._abort(in_flight)
            raise

    async def _run(self, prepared: Prepared, in_flight: set[str]) -> Evaluation:
        plan = prepared.plan
        prefix = list(plan.prefix_ids)
        known, missing = self._cached_priors(prepared.priors)
        start = self._clock()
        warm = await self._call(in_flight, lambda cid: self._backend.warm(cid, prefix))
        warmed = self._clock()
        wanted = [(prefix + list(b.suffix_ids), b.label_ids) for b in plan.branches]
        wanted += [(token_ids, branch.label_ids) for _, branch, token_ids in missing]
        results = await self._score_all(in_flight, wanted)
        done = self._clock()
        scores, fresh = results[: len(plan.branches)], results[len(plan.branches) :]
        for (key, branch, _), score in zip(missing, fresh, strict=True):
            self._priors.put(key, score.logprobs)
            known[(branch.question_id, branch.order)] = score.logprobs
        answers = self._answers(prepared.request, plan.branches, scores, known)
        calls = [*scores, *fresh]
        return Evaluation(
            response=SystemOneResponse(
                model=self._public_model,
                answers=answers,
                usage=Usage(
                    input_tokens=warm.prompt_tokens + sum(s.usage.prompt_tokens for s in calls),
                    output_tokens=len(calls) + 1,
                ),
            ),
            prefix_tokens=len(plan.prefix_ids),
            cached_tokens=_cached(calls),
            timings=Timings(prefill=warmed - start, branches=done - warmed),
            debias_calls=len(calls) - len(prepared.request.questions),
            prior_hits=len(known) - len(fresh),
        )

    def _cached_priors(
        self, priors: PromptPlan | None
    ) -> tuple[dict[tuple[str, tuple[int, ...]], tuple[float, ...]], list[tuple[bytes, Branch, list[int]]]]:
        """Priors the cache holds, by (question id, order), and the calls still needed for the others."""
        known: dict[tuple[str, tuple[int, ...]], tuple[float, ...]] = {}
        missing: list[tuple[bytes, Branch, list[int]]] = []
        if priors is None:
            return known, missing
        for branch in priors.branches:
            token_ids = [*priors.prefix_ids, *branch.suffix_ids]
            key = prior_key(token_ids, branch.label_ids)
            cached = self._priors.get(key)
            if cached is None:
                missing.append((key, branch, token_ids))
            else:
                known[(branch.question_id, branch.order)] = cached
        return known, missing

    def _answers(
        self,
        request: SystemOneRequest,
        branches: tuple[Branch, ...],
        scores: list[LabelScores],
        priors: dict[tuple[str, tuple[int, ...]], tuple[float, ...]],
    ) -> dict[str, Answer]:
        """One answer per question: its orders combined, its prior divided out where one was measured."""
        by_question: dict[str, list[tuple[tuple[int, ...], tuple[float, ...]]]] = {}
        for branch, score in zip(branches, scores, strict=True):
            by_question.setdefault(branch.question_id, []).append((branch.order, score.logprobs))
        answers: dict[str, Answer] = {}
        for qid, asked in by_question.items():
            question = request.questions[qid]
            if len(asked) == 1 and (qid, asked[0][0]) not in priors:
                logprobs: Sequence[float] = asked[0][1]
            else:
                logprobs = combine_orders(
                    [(order or identity(len(lp)), _calibrated(lp, priors.get((qid, order)))) for order, lp in asked]
                )
            answers[qid] = make_answer(question, logprobs, temperature=self._temperature, confidence=self._confidence)
        return answers

    async def _score_all(
        self, in_flight: set[str], wanted: list[tuple[list[int], tuple[int, ...]]]
    ) -> list[LabelScores]:
        """Every branch in one backend batch, or in batches of at most the call limit (concurrently)."""
        size = self._calls.total
        if len(wanted) <= size:
            return await self._batch(in_flight, wanted)
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(self._batch(in_flight, wanted[i : i + size])) for i in range(0, len(wanted), size)
            ]
        return [score for task in tasks for score in task.result()]

    async def _batch(self, in_flight: set[str], wanted: list[tuple[list[int], tuple[int, ...]]]) -> list[LabelScores]:
        """One `score_many` holding one call of the limit per branch; every id stays in `in_flight` until it returns."""
        if not wanted:
            return []
        async with self._calls.hold(len(wanted)):
            calls = [ScoreCall(self._new_call_id(), token_ids, label_ids) for token_ids, label_ids in wanted]
            ids = [call.call_id for call in calls]
            in_flight.update(ids)
            results = await self._backend.score_many(calls)
            if len(results) != len(calls):
                raise BackendError(f"the backend returned {len(results)} scores for {len(calls)} calls")
            in_flight.difference_update(ids)
            return results

    async def _call(self, in_flight: set[str], call: Callable[[str], Awaitable[T]]) -> T:
        """One backend call under the process-wide limit; its id stays in `in_flight` unless it ends normally."""
        async with self._calls.hold(1):
            call_id = self._new_call_id()
            in_flight.add(call_id)
            result = await call(call_id)
            in_flight.discard(call_id)
            return result

    async def _abort(self, in_flight: set[str]) -> None:
        if not in_flight:
            return
        ids = sorted(in_flight)
        in_flight.clear()
        log.info("branches_aborted", calls=len(ids))
        try:
            await asyncio.wait_for(asyncio.shield(self._backend.abort(ids)), ABORT_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - abort is best effort, never masks the cause
            pass


def calibrates(question: Question) -> bool:
    """The question types whose answer prior is divided out when calibration is on (see docs/quality.md)."""
    return isinstance(question, NoulQuestion | ChoiceQuestion)


def _calibrated(logprobs: Sequence[float], prior: Sequence[float] | None) -> Sequence[float]:
    return logprobs if prior is None else divide_prior(logprobs, prior)


def _cached(scores: list[LabelScores]) -> int | None:
    reported: list[CallUsage] = [s.usage for s in scores]
    if any(u.cached_tokens is None for u in reported):
        return None
    return sum(u.cached_tokens or 0 for u in reported)


class CallLimit:
    """The process-wide limit on backend calls in flight, where a batch of n calls holds n.

    A batch waits until all its n places are free and takes them at once, so two batches never hold
    part of the limit each while waiting for the rest; waiters are served first come, first served,
    so a large batch is not starved by single calls. `hold(n)` needs n <= total.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[None]:
        await self._acquire(n)
        try:
            yield
        finally:
            self._release(n)

    async def _acquire(self, n: int) -> None:
        if n > self.total:
            raise ValueError(f"a batch of {n} calls cannot fit a limit of {self.total}")
        if not self._waiters and self._free >= n:
            self._free -= n
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (n, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release(n)  # granted, then cancelled before it could run: give the places back
            else:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                self._wake()  # a waiter behind this one may fit now
            raise

    def _release(self, n: int) -> None:
        self._free += n
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._free:
            n, waiter = self._waiters.popleft()
            if waiter.done():  # cancelled while queued: its task takes itself out
                continue
            self._free -= n
            waiter.set_result(None)
