from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.call_limit import CallLimit
from openjev.contracts import systemone
from openjev.contracts.systemone.wire import SystemOneResponse
from openjev.domain.decision import Decision
from openjev.domain.errors import BackendError, BackendTimeout, InvalidRequest
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.outcome import Outcome
from openjev.domain.ports import CallUsage, LabelScores, ScoreCall
from openjev.evaluation import Evaluator

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Refund?"},
    "dept": {"type": "choice", "criteria": {"billing": "Payments", "technical": "Bugs"}},
    "urgency": {"type": "score", "criteria": ["Routine", "Urgent", "Emergency"]},
}


def parsed(questions: dict[str, Any] | None = None, state: Any = "I was charged twice.") -> systemone.Parsed:
    raw = json.dumps({"model": "jev-latest", "state": state, "questions": questions or QUESTIONS}).encode()
    return systemone.parse(raw, Limits(), frozenset())


def request(questions: dict[str, Any] | None = None, state: Any = "I was charged twice.") -> Decision:
    return parsed(questions, state).decision


def response(outcome: Outcome, questions: dict[str, Any] | None = None) -> SystemOneResponse:
    """The outcome as System One writes it, for the request `questions` made."""
    return systemone.respond(parsed(questions), outcome, "m")


def evaluator(backend: Any, **limits: Any) -> Evaluator:
    return Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=Limits(**limits))


async def test_n_plus_one_calls_with_the_warm_up_first_and_usage() -> None:
    backend = FakeBackend()
    await backend.start()
    ev = evaluator(backend)
    prepared = ev.prepare(request())
    result = await ev.evaluate(prepared)
    kinds = [c[0] for c in backend.calls]
    assert kinds == ["warm", "score", "score", "score"]
    prefix = prepared.plan.prefix_ids
    assert backend.calls[0][2] == prefix
    for call, branch in zip(backend.calls[1:], prepared.plan.branches, strict=True):
        assert call[2] == prefix + branch.suffix_ids and call[3] == branch.label_ids
    assert response(result).usage.output_tokens == 4
    assert response(result).usage.input_tokens == sum(len(c[2]) for c in backend.calls)
    assert result.work.prefix_tokens == len(prefix)
    assert result.work.branch_cached_tokens is not None and result.work.branch_cached_tokens >= 3 * len(prefix)
    assert set(response(result).answers) == set(QUESTIONS)


async def test_answers_do_not_depend_on_ids_other_questions_or_order() -> None:
    backend = FakeBackend()
    await backend.start()
    ev = evaluator(backend)
    one = {"x": QUESTIONS["dept"]}
    two = {"urgency": QUESTIONS["urgency"], "other id": QUESTIONS["dept"]}
    alone = response(await ev.evaluate(ev.prepare(request(one))), one)
    mixed = response(await ev.evaluate(ev.prepare(request(two))), two)
    assert alone.answers["x"] == mixed.answers["other id"]


class _NoCacheReport(FakeBackend):
    async def score(self, call_id: str, token_ids: Any, label_ids: Any) -> LabelScores:
        scores = await super().score(call_id, token_ids, label_ids)
        return LabelScores(scores.logprobs, CallUsage(scores.usage.prompt_tokens, None))


async def test_cached_tokens_are_none_when_the_backend_does_not_report_them() -> None:
    backend = _NoCacheReport()
    ev = evaluator(backend)
    result = await ev.evaluate(ev.prepare(request()))
    assert result.work.branch_cached_tokens is None


class _FailOne(FakeBackend):
    """The first branch fails at once; the others hang until cancelled."""

    async def score(self, call_id: str, token_ids: Any, label_ids: Any) -> LabelScores:
        self.in_flight.add(call_id)
        if len(self.calls) == 1:
            self.calls.append(("score", call_id, (), ()))
            raise BackendError("boom")
        self.calls.append(("score", call_id, (), ()))
        await asyncio.sleep(30)
        raise AssertionError("not cancelled")


async def test_a_failed_branch_cancels_its_siblings_and_aborts_them() -> None:
    backend = _FailOne()
    ev = evaluator(backend)
    with pytest.raises(BackendError, match="boom"):
        await asyncio.wait_for(ev.evaluate(ev.prepare(request())), 5)
    hung = {c[1] for c in backend.calls[2:]}
    assert len(hung) == 2
    assert hung <= set(backend.aborted)


async def test_the_deadline_gives_a_timeout_and_aborts_in_flight_calls() -> None:
    backend = FakeBackend(latency=5)
    ev = evaluator(backend, request_timeout_seconds=0.2)
    with pytest.raises(BackendTimeout, match=r"0\.2 s"):
        await ev.evaluate(ev.prepare(request()))
    assert backend.aborted == [backend.calls[0][1]]  # the warm-up was in flight


async def test_a_cancelled_caller_aborts_its_branches() -> None:
    backend = FakeBackend(latency=0.05)
    ev = evaluator(backend)
    task = asyncio.ensure_future(ev.evaluate(ev.prepare(request())))
    for _ in range(500):  # bounded: the four calls start within a few event-loop turns
        if len(backend.calls) == 4:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert set(backend.aborted) == {c[1] for c in backend.calls[1:]}


class _Counting(FakeBackend):
    def __init__(self) -> None:
        super().__init__(latency=0.02)
        self.peak = 0

    async def _enter(self, kind: str, call_id: str, token_ids: Any, label_ids: Any) -> None:
        self.peak = max(self.peak, len(self.in_flight) + 1)
        await super()._enter(kind, call_id, token_ids, label_ids)


async def test_backend_calls_stay_under_the_branch_limit() -> None:
    backend = _Counting()
    ev = evaluator(backend, max_concurrent_branches=3)
    many = {f"q{i}": {"type": "noul", "instructions": f"Question {i}?"} for i in range(12)}
    await asyncio.gather(*(ev.evaluate(ev.prepare(request(many))) for _ in range(3)))
    assert backend.peak == 3


def test_token_limits_are_checked_before_any_inference() -> None:
    backend = FakeBackend()
    ev = evaluator(backend, max_input_tokens=50)
    with pytest.raises(InvalidRequest) as info:
        ev.prepare(request())
    assert info.value.issues[0].type == "tokens_exceeded"
    assert info.value.issues[0].loc[:2] == ("body", "questions")
    ev = evaluator(backend, max_total_input_tokens=100)
    with pytest.raises(InvalidRequest, match="the limit is 100"):
        ev.prepare(request())
    assert backend.calls == []


def test_the_backend_context_lowers_the_branch_limit() -> None:
    ev = Evaluator(backend=FakeBackend(), codec=CODEC, labels=LABELS, limits=Limits(), branch_context=80)
    assert ev.branch_limit == 80
    with pytest.raises(InvalidRequest, match="limit per question is 80"):
        ev.prepare(request())


class _Batches(FakeBackend):
    """Records the size of every score_many batch."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.batches: list[int] = []

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        self.batches.append(len(calls))
        return await super().score_many(calls)


async def test_every_branch_and_every_missing_prior_goes_in_one_batch_after_the_warm_up() -> None:
    backend = _Batches()
    ev = Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=Limits(), debias="rotate+calibrate")
    prepared = ev.prepare(request())
    assert prepared.priors is not None
    result = await ev.evaluate(prepared)
    branches = len(prepared.plan.branches) + len(prepared.priors.branches)
    assert backend.batches == [branches]
    assert [c[0] for c in backend.calls] == ["warm"] + ["score"] * branches
    assert response(result).usage.output_tokens == branches + 1
    assert response(result).usage.input_tokens == sum(len(c[2]) for c in backend.calls)
    again = await ev.evaluate(prepared)  # the priors are cached now: only the branches are asked
    assert backend.batches == [branches, len(prepared.plan.branches)]
    assert response(again).answers == response(result).answers


async def test_a_request_with_more_branches_than_the_limit_sends_batches_of_at_most_the_limit() -> None:
    backend = _Batches(latency=0.01)
    ev = evaluator(backend, max_concurrent_branches=5)
    many = {f"q{i}": {"type": "noul", "instructions": f"Question {i}?"} for i in range(12)}
    prepared = ev.prepare(request(many))
    result = await ev.evaluate(prepared)
    assert backend.batches == [5, 5, 2]
    scored = [c for c in backend.calls if c[0] == "score"]
    # Results land on their own questions: the same answers as with no batching limit.
    single = await evaluator(FakeBackend()).evaluate(prepared)
    assert response(result, many).answers == response(single, many).answers
    assert len(scored) == 12


async def test_call_limit_counts_each_call_of_a_batch_and_serves_waiters_in_order() -> None:
    limit = CallLimit(4)
    order: list[str] = []
    held = asyncio.Event()

    async def take(name: str, n: int) -> None:
        async with limit.hold(n):
            order.append(name)
            await held.wait()

    first = asyncio.ensure_future(take("three", 3))
    await asyncio.sleep(0)
    big = asyncio.ensure_future(take("four", 4))  # must wait for all four places
    await asyncio.sleep(0)
    small = asyncio.ensure_future(take("one", 1))  # fits now, but waits its turn behind "four"
    await asyncio.sleep(0.01)
    assert order == ["three"]
    held.set()
    await asyncio.gather(first, big, small)
    assert order == ["three", "four", "one"]
    assert limit._free == 4


async def test_call_limit_gives_back_the_places_of_a_cancelled_waiter() -> None:
    limit = CallLimit(2)
    release = asyncio.Event()

    async def hold(n: int) -> None:
        async with limit.hold(n):
            await release.wait()

    holder = asyncio.ensure_future(hold(2))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(hold(2))
    behind = asyncio.ensure_future(hold(1))
    await asyncio.sleep(0)
    waiter.cancel()
    release.set()
    await holder
    await behind
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit._free == 2
    with pytest.raises(ValueError, match="cannot fit"):
        async with limit.hold(3):
            pass


class _SmallVocabulary(FakeBackend):
    """A backend whose model has fewer ids than the codec makes: a tokenizer that does not match it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def vocab_size(self) -> int | None:
        return self.size


def test_an_id_outside_the_models_vocabulary_is_refused_before_any_call() -> None:
    prepared = evaluator(FakeBackend()).prepare(request())
    plan = prepared.plan
    state_top = max(plan.prefix_ids)
    question_top = max(max((*b.suffix_ids, *b.label_ids)) for b in plan.branches)
    assert question_top > state_top  # the questions' text and labels reach further than this state
    backend = _SmallVocabulary(question_top)  # only the top id is missing
    with pytest.raises(InvalidRequest) as info:
        evaluator(backend).prepare(request())
    [issue] = info.value.issues
    assert issue.type == "token_out_of_vocabulary"
    assert issue.loc[:2] == ("body", "questions")
    assert f"token id {question_top} is outside the model's vocabulary (ids 0 to {question_top - 1})" in issue.msg
    with pytest.raises(InvalidRequest) as info:
        evaluator(_SmallVocabulary(state_top)).prepare(request())
    assert info.value.issues[0].loc == ("body", "state")
    assert backend.calls == []
    assert evaluator(_SmallVocabulary(question_top + 1)).prepare(request()).plan == plan  # all inside: served


async def test_worked_examples_are_warmed_first_on_their_own_and_every_call_is_counted() -> None:
    backend = FakeBackend()
    await backend.start()
    ev = evaluator(backend)
    examples: dict[str, Any] = {"type": "choice", "criteria": {"billing": "Payments", "technical": "Bugs"}}
    examples["x_examples"] = [{"state": "Refund me", "answer": "billing"}]
    prepared = ev.prepare(request({"dept": examples, "refund": QUESTIONS["refund"]}))
    result = await ev.evaluate(prepared)
    prefix, head = prepared.plan.prefix_ids, prepared.plan.head_tokens
    assert 0 < head < len(prefix)
    assert [(c[0], c[2]) for c in backend.calls[:2]] == [("warm", prefix[:head]), ("warm", prefix)]
    assert [c[0] for c in backend.calls[2:]] == ["score", "score"]
    assert result.work.calls == 4
    assert result.work.input_tokens == sum(len(c[2]) for c in backend.calls)
    limit = Limits(max_total_input_tokens=result.work.input_tokens - 1)
    with pytest.raises(InvalidRequest, match="input tokens"):  # the budget counts the extra warm-up too
        Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=limit).prepare(prepared.decision)
    assert Evaluator(
        backend=backend, codec=CODEC, labels=LABELS, limits=Limits(max_total_input_tokens=result.work.input_tokens)
    ).prepare(prepared.decision)
