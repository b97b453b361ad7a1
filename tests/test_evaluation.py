from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.domain.errors import BackendError, BackendTimeout, InvalidRequest
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.ports import CallUsage, LabelScores
from openjev.evaluation import Evaluator, parse_request

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Refund?"},
    "dept": {"type": "choice", "criteria": {"billing": "Payments", "technical": "Bugs"}},
    "urgency": {"type": "score", "criteria": ["Routine", "Urgent", "Emergency"]},
}


def request(questions: dict[str, Any] | None = None, state: Any = "I was charged twice.") -> Any:
    raw = json.dumps({"model": "jev-latest", "state": state, "questions": questions or QUESTIONS}).encode()
    return parse_request(raw, Limits(), frozenset())


def evaluator(backend: Any, **limits: Any) -> Evaluator:
    return Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=Limits(**limits), public_model="m")


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
    assert result.response.usage.output_tokens == 4
    assert result.response.usage.input_tokens == sum(len(c[2]) for c in backend.calls)
    assert result.prefix_tokens == len(prefix)
    assert result.cached_tokens is not None and result.cached_tokens >= 3 * len(prefix)
    assert set(result.response.answers) == set(QUESTIONS)


async def test_answers_do_not_depend_on_ids_other_questions_or_order() -> None:
    backend = FakeBackend()
    await backend.start()
    ev = evaluator(backend)
    alone = await ev.evaluate(ev.prepare(request({"x": QUESTIONS["dept"]})))
    mixed = await ev.evaluate(ev.prepare(request({"urgency": QUESTIONS["urgency"], "other id": QUESTIONS["dept"]})))
    assert alone.response.answers["x"] == mixed.response.answers["other id"]


class _NoCacheReport(FakeBackend):
    async def score(self, call_id: str, token_ids: Any, label_ids: Any) -> LabelScores:
        scores = await super().score(call_id, token_ids, label_ids)
        return LabelScores(scores.logprobs, CallUsage(scores.usage.prompt_tokens, None))


async def test_cached_tokens_are_none_when_the_backend_does_not_report_them() -> None:
    backend = _NoCacheReport()
    ev = evaluator(backend)
    result = await ev.evaluate(ev.prepare(request()))
    assert result.cached_tokens is None


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
    ev = Evaluator(
        backend=FakeBackend(), codec=CODEC, labels=LABELS, limits=Limits(), public_model="m", branch_context=80
    )
    assert ev.branch_limit == 80
    with pytest.raises(InvalidRequest, match="limit per question is 80"):
        ev.prepare(request())
