"""`fit` bias removal in the use case, with the fake backend: examples asked about, offsets fitted, cached."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from openjev.adapters.fake.backend import FakeBackend, label_logprob
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.contracts import systemone
from openjev.domain.debiasing import combine_orders, log_softmax
from openjev.domain.errors import InvalidRequest
from openjev.domain.example_fit import fit_offsets
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.evaluation import Evaluator
from tests.use_case.systemone_use_case import OverSystemOne

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
CASES = [("Please refund the double charge.", "billing"), ("The app crashes at login.", "tech"), ("Hi!", "other")]
CHOICE: dict[str, Any] = {
    "type": "choice",
    "instructions": "Which team?",
    "criteria": {"billing": "Payments", "tech": "Bugs", "other": None},
    "x_examples": [{"state": text, "answer": answer} for text, answer in CASES],
}
STATE = "I was charged twice for order 7."


def request(questions: dict[str, Any], debias: str, state: str = STATE, limits: Limits | None = None) -> Any:
    body = {"model": "jev-latest", "state": state, "questions": questions, "x_debias": debias}
    return systemone.parse(json.dumps(body).encode(), limits or Limits(), frozenset())


async def started(limits: Limits | None = None) -> tuple[FakeBackend, OverSystemOne]:
    backend = FakeBackend()
    await backend.start()
    return backend, OverSystemOne(Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=limits or Limits()))


def read(call: tuple[Any, ...]) -> list[float]:
    """What the fake answered for a call: it is deterministic in the tokens and labels."""
    return [label_logprob(call[2], label) for label in call[3]]


async def test_fit_asks_each_example_like_the_case_and_shifts_the_answer_by_the_fitted_offsets() -> None:
    backend, ev = await started()
    prepared = ev.prepare(request({"team": CHOICE}, "reverse+fit"))
    result = await ev.evaluate(prepared)
    assert "Solved example" not in CODEC.decode(prepared.plan.prefix_ids)  # not shown in the prompt
    examples = prepared.prepared.example_plans
    assert [(e.ask, e.example) for e in examples] == [(0, 0), (0, 1), (0, 2)]
    for example, (text, _) in zip(examples, CASES, strict=True):
        assert [b.order for b in example.plan.branches] == [(0, 1, 2), (2, 1, 0)]
        assert text in CODEC.decode(example.plan.prefix_ids)
    scores = backend.calls[1:]  # after the warm-up: the case's two orders, then each example's two
    assert len(scores) == 2 + 3 * 2
    orders = [(0, 1, 2), (2, 1, 0)]

    def combined(calls: list[tuple[Any, ...]]) -> list[float]:
        return combine_orders([(order, read(call)) for order, call in zip(orders, calls, strict=True)])

    offsets = fit_offsets([(combined(scores[2 + 2 * j : 4 + 2 * j]), j) for j in range(3)])
    expected = log_softmax([x + b for x, b in zip(combined(scores[:2]), offsets, strict=True)])
    got = result.response.answers["team"].probabilities  # type: ignore[union-attr]
    assert list(got.values()) == pytest.approx([math.exp(x) for x in expected], abs=1e-12)
    assert result.debias_calls == 1 + 6  # the reverse order, and the examples' calls


async def test_the_answers_on_examples_are_paid_for_once() -> None:
    backend, ev = await started()
    await ev.evaluate(ev.prepare(request({"team": CHOICE}, "reverse+fit")))
    before = len(backend.calls)
    second = await ev.evaluate(ev.prepare(request({"team": CHOICE}, "reverse+fit", state="The app froze.")))
    assert len(backend.calls) - before == 1 + 2  # warm-up and the case's two orders: the examples are cached
    assert second.prior_hits == 6


async def test_without_fit_the_examples_are_shown_and_a_question_without_examples_is_not_shifted() -> None:
    _, ev = await started()
    shown = ev.prepare(request({"team": CHOICE}, "reverse"))
    assert "Solved example" in CODEC.decode(shown.plan.prefix_ids) and not shown.prepared.example_plans
    bare = {k: v for k, v in CHOICE.items() if k != "x_examples"}
    plain = await ev.evaluate(ev.prepare(request({"team": bare}, "reverse")))
    fitted = await ev.evaluate(ev.prepare(request({"team": bare}, "reverse+fit")))
    assert fitted.response.answers == plain.response.answers


async def test_an_example_too_long_for_a_call_is_refused_before_any_call() -> None:
    limits = Limits(max_input_tokens=400)
    backend, ev = await started(limits)
    long_case = {**CHOICE, "x_examples": [{"state": "word " * 300, "answer": "billing"}]}
    with pytest.raises(InvalidRequest) as caught:
        ev.prepare(request({"team": long_case}, "reverse+fit", limits=limits))
    [issue] = caught.value.issues
    assert issue.loc == ("body", "questions", "team") and "worked example" in issue.msg
    assert backend.calls == []
