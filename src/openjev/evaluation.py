"""The use case: decision → plan → warm the prefix → branches → outcome (docs/prompt-format.md).

Depends only on the domain and its ports, and knows no wire format: every contract hands it a
`Decision` and turns its `Outcome` into a response. After the warm-up, every branch of a decision
(and every prior the cache lacks) goes to the backend in one `score_many` batch, under a
process-wide limit on backend calls that counts each branch of a batch as one call (`CallLimit`); a
batch larger than the limit is sent as several batches of at most the limit, concurrently. The
first failure, the deadline or a cancelled caller cancels every sibling and asks the backend to
abort every call still in flight. Bias removal (docs/quality.md) only changes which branches run,
one per option order and per uncached prior, and how their distributions combine
(`openjev.domain.debiasing`); backends never know. The refusal policy declines an ask whose label
mass falls below its threshold, only for contracts that can express a refusal.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from openjev.call_limit import CallLimit
from openjev.domain.answers import Asked, distribution, under_policy
from openjev.domain.debiasing import DebiasMode, DebiasPolicy, Order, option_orders
from openjev.domain.decision import Ask, Decision
from openjev.domain.errors import BackendError, BackendTimeout, InvalidRequest, echo, first_error
from openjev.domain.kinds import rules
from openjev.domain.labels import LabelSet
from openjev.domain.limits import Limits
from openjev.domain.outcome import Outcome, Result, Timings, Work
from openjev.domain.ports import CallUsage, LabelScores, PromptCodec, ScoreCall, ScoringBackend
from openjev.domain.prompt import Branch, PromptPlan, build_plan, prompt_text, token_floors
from openjev.domain.scoring_math import ConfidenceFormula, is_logprob, is_share
from openjev.domain.state import content_free
from openjev.domain.validation import validate_token_floor, validate_tokens, validate_vocabulary
from openjev.ids import random_id
from openjev.logs import get_logger
from openjev.prior_cache import PriorCache, prior_key

T = TypeVar("T")
log = get_logger("openjev.evaluation")
ABORT_TIMEOUT_SECONDS = 5.0
Wanted = tuple[list[int], tuple[int, ...], bool]  # token ids, label ids, whether to measure the label mass


class Prepared(msgspec.Struct, frozen=True):
    decision: Decision
    plan: PromptPlan
    priors: PromptPlan | None = None  # the calibrated asks on a content-free state
    label_mass: bool = False  # measure each branch's label mass (asked for, or the refusal policy needs it)


class Evaluator:
    """Answers decisions with one backend; shared by every request of the process."""

    def __init__(
        self,
        *,
        backend: ScoringBackend,
        codec: PromptCodec,
        labels: LabelSet,
        limits: Limits,
        temperature: float = 1.0,
        confidence: ConfidenceFormula = "typesafe",
        debias: DebiasMode = "none",
        max_orders: int = 10,
        refuse_below: float | None = None,
        client_debias: frozenset[DebiasMode] | None = None,
        priors: PriorCache | None = None,
        branch_context: int | None = None,
        new_call_id: Callable[[], str] = random_id,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._backend = backend
        self._codec = codec
        self._labels = labels
        self._limits = limits
        self._temperature = temperature
        self._confidence: ConfidenceFormula = confidence
        self._debias: DebiasMode = debias
        self._max_orders = max_orders
        self._refuse_below = refuse_below
        self._client_debias = client_debias  # the modes a request's own choice may name; None: any
        self._priors = priors if priors is not None else PriorCache()
        self._branch_limit = min(limits.max_input_tokens, branch_context or limits.max_input_tokens)
        self._new_call_id = new_call_id
        self._clock = clock
        self._calls = CallLimit(limits.max_concurrent_branches)

    @property
    def limits(self) -> Limits:
        return self._limits

    @property
    def branch_limit(self) -> int:
        return self._branch_limit

    @property
    def debias(self) -> DebiasMode:
        return self._debias

    @property
    def labels(self) -> LabelSet:
        return self._labels

    @property
    def codec(self) -> PromptCodec:
        return self._codec

    def prepare(self, decision: Decision) -> Prepared:
        """Build and check the prompt plan (CPU only). Raises InvalidRequest before any inference."""
        self._check_client_debias(decision)
        policy = DebiasPolicy.of(decision.policy.debias or self._debias, self._max_orders)

        def orders(ask: Ask) -> tuple[Order, ...]:
            if policy.rotate and rules(ask).rotatable:
                return option_orders(len(ask.options), policy.max_orders)
            return ((),)

        calibrated = [i for i, ask in enumerate(decision.asks) if policy.calibrate and rules(ask).calibratable]
        # What cannot fit is refused from the byte counts, before tokenizing (seconds for a large state),
        # every call bias removal adds counted.
        text = prompt_text(decision.state, decision.asks, self._labels)
        prefix_floor, ask_floors = token_floors(text, self._codec)
        counts = [len(orders(ask)) for ask in decision.asks]
        calls = [(n, n if i in calibrated else 0) for i, n in enumerate(counts)]
        validate_token_floor(prefix_floor, ask_floors, decision, self._limits, self._branch_limit, calls)
        plan = build_plan(decision.state, decision.asks, self._codec, self._labels, orders, text, decision.state_where)
        validate_vocabulary(plan, decision, self._backend.vocab_size())
        priors = None
        if calibrated:
            asks = [decision.asks[i] for i in calibrated]
            empty = build_plan(content_free(decision.state), asks, self._codec, self._labels, orders)
            branches = tuple(msgspec.structs.replace(b, ask=calibrated[b.ask]) for b in empty.branches)
            priors = PromptPlan(prefix_ids=empty.prefix_ids, branches=branches)
            validate_vocabulary(priors, decision, self._backend.vocab_size())
        validate_tokens(plan, decision, self._limits, self._branch_limit, priors)
        refusing = decision.policy.refusals and self._refuse_below is not None
        return Prepared(decision=decision, plan=plan, priors=priors, label_mass=decision.policy.label_mass or refusing)

    def _check_client_debias(self, decision: Decision) -> None:
        """A request may choose its bias removal only among the modes the operator allows."""
        asked = decision.policy.debias
        if asked is None or asked == self._debias or self._client_debias is None or asked in self._client_debias:
            return
        allowed = ", ".join(sorted({self._debias, *self._client_debias}))
        raise InvalidRequest.one(
            (*decision.root, "x_debias"),
            f"x_debias {echo(asked)} is not allowed on this server (its operator's OPENJEV_CLIENT_DEBIAS): "
            f"send one of {allowed}, or leave x_debias out for the server's {self._debias!r}",
            "debias_not_allowed",
        )

    async def evaluate(self, prepared: Prepared) -> Outcome:
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

    async def _run(self, prepared: Prepared, in_flight: set[str]) -> Outcome:
        plan = prepared.plan
        prefix = list(plan.prefix_ids)
        known, missing = self._cached_priors(prepared.priors)
        start = self._clock()
        warm = await self._call(in_flight, lambda cid: self._backend.warm(cid, prefix))
        warmed = self._clock()
        wanted: list[Wanted] = [(prefix + list(b.suffix_ids), b.label_ids, prepared.label_mass) for b in plan.branches]
        wanted += [(token_ids, branch.label_ids, False) for _, branch, token_ids in missing]
        results = await self._score_all(in_flight, wanted)
        done = self._clock()
        scores, fresh = results[: len(plan.branches)], results[len(plan.branches) :]
        for (key, branch, _), score in zip(missing, fresh, strict=True):
            self._priors.put(key, score.logprobs)
            known[(branch.ask, branch.order)] = score.logprobs
        calls = [*scores, *fresh]
        return Outcome(
            results=self._results(prepared.decision, plan.branches, scores, known),
            work=Work(
                calls=len(calls) + 1,
                input_tokens=warm.prompt_tokens + sum(s.usage.prompt_tokens for s in calls),
                prefix_tokens=len(plan.prefix_ids),
                warm_prompt_tokens=warm.prompt_tokens,
                warm_cached_tokens=warm.cached_tokens,
                branch_cached_tokens=_cached(calls),
                debias_calls=len(calls) - len(prepared.decision.asks),
                prior_hits=len(known) - len(fresh),
            ),
            timings=Timings(prefill=warmed - start, branches=done - warmed),
        )

    def _cached_priors(
        self, priors: PromptPlan | None
    ) -> tuple[dict[tuple[int, Order], tuple[float, ...]], list[tuple[bytes, Branch, list[int]]]]:
        """Priors the cache holds, by (ask, order), and the calls still needed for the others."""
        known: dict[tuple[int, Order], tuple[float, ...]] = {}
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
                known[(branch.ask, branch.order)] = cached
        return known, missing

    def _results(
        self,
        decision: Decision,
        branches: tuple[Branch, ...],
        scores: list[LabelScores],
        priors: dict[tuple[int, Order], tuple[float, ...]],
    ) -> tuple[Result, ...]:
        """One result per ask: its orders combined, its prior divided out, under the refusal policy."""
        asked: list[list[Asked]] = [[] for _ in decision.asks]
        for branch, score in zip(branches, scores, strict=True):
            asked[branch.ask].append(Asked(branch.order, score.logprobs, score.label_mass))
        measured: list[dict[Order, tuple[float, ...]]] = [{} for _ in decision.asks]
        for (i, order), logprobs in priors.items():
            measured[i][order] = logprobs
        refuse_below = self._refuse_below if decision.policy.refusals else None
        answers = (
            distribution(ask, asked[i], measured[i], temperature=self._temperature, confidence=self._confidence)
            for i, ask in enumerate(decision.asks)
        )
        return tuple(under_policy(answer, refuse_below) for answer in answers)

    async def _score_all(self, in_flight: set[str], wanted: list[Wanted]) -> list[LabelScores]:
        """Every branch in one backend batch, or in batches of at most the call limit (concurrently)."""
        size = self._calls.total
        if len(wanted) <= size:
            return await self._batch(in_flight, wanted)
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(self._batch(in_flight, wanted[i : i + size])) for i in range(0, len(wanted), size)
            ]
        return [score for task in tasks for score in task.result()]

    async def _batch(self, in_flight: set[str], wanted: list[Wanted]) -> list[LabelScores]:
        """One `score_many` holding one call of the limit per branch; every id stays in `in_flight` until it returns."""
        if not wanted:
            return []
        async with self._calls.hold(len(wanted)):
            calls = [ScoreCall(self._new_call_id(), ids, labels, mass) for ids, labels, mass in wanted]
            ids = [call.call_id for call in calls]
            in_flight.update(ids)
            results = await self._backend.score_many(calls)
            if len(results) != len(calls):
                raise BackendError(f"the backend returned {len(results)} scores for {len(calls)} calls")
            for score in results:
                _check_scores(score)
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


def _check_scores(score: LabelScores) -> None:
    """A backend's numbers are checked before they are used: a broken backend is a 502, never a 500 or a certainty."""
    bad = next((value for value in score.logprobs if not is_logprob(value)), None)
    if bad is not None:
        raise BackendError(f"the backend returned an invalid label log-probability {bad!r} (must be finite and ≤ 0)")
    if score.label_mass is not None and not is_share(score.label_mass):
        raise BackendError(f"the backend returned an invalid label mass {score.label_mass!r} (must be in [0, 1])")


def _cached(scores: list[LabelScores]) -> int | None:
    reported: list[CallUsage] = [s.usage for s in scores]
    if any(u.cached_tokens is None for u in reported):
        return None
    return sum(u.cached_tokens or 0 for u in reported)
