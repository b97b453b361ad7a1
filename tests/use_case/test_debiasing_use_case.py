"""Bias removal inside the evaluation use case, with the fake backend: fan-out, combining, prior cache."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from openjev.adapters.fake.backend import FakeBackend, label_logprob
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.contracts import systemone
from openjev.domain.debiasing import combine_orders, divide_prior, option_orders
from openjev.domain.errors import InvalidRequest
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.evaluation import Evaluator
from openjev.prior_cache import PriorCache, prior_key
from tests.use_case.systemone_use_case import OverSystemOne

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
CHOICE: dict[str, Any] = {
    "type": "choice",
    "instructions": "Topic?",
    "criteria": {"world": "World", "sports": "Sports", "tech": None},
}
NOUL = {"type": "noul", "instructions": "Positive?"}
SCORE = {"type": "score", "criteria": ["Low", "Mid", "High"]}


def request(questions: dict[str, Any], *, state: Any = "Team wins the cup.", debias: str | None = None) -> Any:
    body: dict[str, Any] = {"model": "jev-latest", "state": state, "questions": questions}
    if debias is not None:
        body["x_debias"] = debias
    return systemone.parse(json.dumps(body).encode(), Limits(), frozenset())


async def started(**kwargs: Any) -> tuple[FakeBackend, OverSystemOne]:
    backend = FakeBackend()
    await backend.start()
    ev = Evaluator(backend=backend, codec=CODEC, labels=LABELS, limits=Limits(), **kwargs)
    return backend, OverSystemOne(ev)


def probabilities(answer: Any) -> list[float]:
    return list(answer.probabilities.values())


async def test_rotate_asks_a_choice_question_in_every_order_and_combines_them() -> None:
    backend, ev = await started(debias="rotate")
    prepared = ev.prepare(request({"c": CHOICE, "n": NOUL, "s": SCORE}))
    result = await ev.evaluate(prepared)
    orders = option_orders(3, 10)
    assert [b.order for b in prepared.plan.branches if prepared.qid(b) == "c"] == list(orders)
    assert [b.order for b in prepared.plan.branches if prepared.qid(b) != "c"] == [(), ()]  # yes/no, score: once
    assert [c[0] for c in backend.calls] == ["warm"] + ["score"] * (len(orders) + 2)
    usage = result.response.usage
    assert usage.output_tokens == 1 + len(orders) + 2
    assert usage.input_tokens == sum(len(c[2]) for c in backend.calls)
    assert result.debias_calls == len(orders) - 1
    by_order = {
        b.order: c for b, c in zip(prepared.plan.branches, backend.calls[1:], strict=True) if prepared.qid(b) == "c"
    }
    expected = [math.exp(x) for x in combine_orders([(o, _logprobs(by_order[o])) for o in orders])]
    assert probabilities(result.response.answers["c"]) == pytest.approx(expected, abs=1e-12)


async def test_rotated_answers_do_not_depend_on_the_order_the_options_were_sent_in() -> None:
    _, ev = await started(debias="rotate")
    forward = await ev.evaluate(ev.prepare(request({"c": CHOICE})))
    names = list(CHOICE["criteria"])
    for sent in (names[::-1], names[1:] + names[:1]):
        shuffled = {**CHOICE, "criteria": {n: CHOICE["criteria"][n] for n in sent}}
        other = await ev.evaluate(ev.prepare(request({"c": shuffled})))
        a, b = forward.response.answers["c"], other.response.answers["c"]
        assert a.choice == b.choice  # type: ignore[union-attr]
        for name in names:
            assert a.probabilities[name] == pytest.approx(b.probabilities[name], abs=1e-12)  # type: ignore[union-attr]


async def test_reverse_asks_two_orders_and_a_reversed_request_gets_the_same_answer() -> None:
    _, ev = await started(debias="reverse")
    prepared = ev.prepare(request({"c": CHOICE, "n": NOUL}))
    forward = await ev.evaluate(prepared)
    assert [b.order for b in prepared.plan.branches] == [(0, 1, 2), (2, 1, 0), ()]  # yes/no: once
    names = list(CHOICE["criteria"])
    backward = {**CHOICE, "criteria": {n: CHOICE["criteria"][n] for n in names[::-1]}}
    other = await ev.evaluate(ev.prepare(request({"c": backward})))
    a, b = forward.response.answers["c"], other.response.answers["c"]
    for name in names:
        assert a.probabilities[name] == pytest.approx(b.probabilities[name], abs=1e-12)  # type: ignore[union-attr]


async def test_without_rotation_the_answer_depends_on_the_order() -> None:
    """The fake is position-sensitive like a real model: this is what rotation removes."""
    _, ev = await started()
    forward = await ev.evaluate(ev.prepare(request({"c": CHOICE})))
    names = list(CHOICE["criteria"])
    backward = {**CHOICE, "criteria": {n: CHOICE["criteria"][n] for n in names[::-1]}}
    other = await ev.evaluate(ev.prepare(request({"c": backward})))
    assert forward.response.answers["c"].probabilities != pytest.approx(  # type: ignore[union-attr]
        {n: other.response.answers["c"].probabilities[n] for n in names}  # type: ignore[union-attr]
    )


async def test_calibrate_divides_out_the_prior_measured_on_a_content_free_state() -> None:
    backend, ev = await started(debias="calibrate")
    prepared = ev.prepare(request({"n": NOUL, "s": SCORE}))
    result = await ev.evaluate(prepared)
    assert prepared.priors is not None
    assert [prepared.qid(b) for b in prepared.priors.branches] == ["n"]  # score levels are not calibrated
    kinds = [c[0] for c in backend.calls]
    assert kinds == ["warm", "score", "score", "score"]
    prior_call = backend.calls[-1]
    assert prior_call[2] == prepared.priors.prefix_ids + prepared.priors.branches[0].suffix_ids
    assert "N/A" in CODEC.decode(prior_call[2])
    answer_call = backend.calls[1]
    expected = divide_prior(_logprobs(answer_call), _logprobs(prior_call))
    assert result.response.answers["n"].noul == pytest.approx(math.exp(expected[0]), abs=1e-12)  # type: ignore[union-attr]
    assert result.response.usage.output_tokens == 4
    assert result.prior_hits == 0


async def test_a_prior_is_paid_for_once_and_then_served_from_the_cache() -> None:
    backend, ev = await started(debias="rotate+calibrate")
    first = await ev.evaluate(ev.prepare(request({"c": CHOICE})))
    calls_first = len(backend.calls)
    assert calls_first == 1 + 6 + 6  # warm, six orders, six priors
    assert first.response.usage.output_tokens == 13
    second = await ev.evaluate(ev.prepare(request({"again": CHOICE}, state="Another text entirely.")))
    assert len(backend.calls) - calls_first == 1 + 6  # priors come from the cache
    assert second.response.usage.output_tokens == 7
    assert second.prior_hits == 6
    assert second.debias_calls == 5


async def test_the_content_free_state_keeps_the_form_of_a_conversation() -> None:
    _, ev = await started(debias="calibrate")
    conversation = [{"role": "user", "content": "I love it"}]
    prepared = ev.prepare(request({"n": NOUL}, state=conversation))
    await ev.evaluate(prepared)
    assert prepared.priors is not None
    text = CODEC.decode(prepared.priors.prefix_ids + prepared.priors.branches[0].suffix_ids)
    assert "conversation above" in text and "N/A" in text and "<data>" not in text


async def test_the_request_field_overrides_the_server_setting() -> None:
    backend, ev = await started(debias="rotate+calibrate")
    result = await ev.evaluate(ev.prepare(request({"c": CHOICE}, debias="none")))
    assert [c[0] for c in backend.calls] == ["warm", "score"]
    assert result.response.usage.output_tokens == 2
    backend2, plain = await started()
    await plain.evaluate(plain.prepare(request({"c": CHOICE}, debias="rotate")))
    assert len(backend2.calls) == 1 + 6


def test_an_unknown_mode_is_a_422_naming_the_field() -> None:
    with pytest.raises(InvalidRequest) as caught:
        request({"c": CHOICE}, debias="sideways")
    assert caught.value.issues[0].loc == ("body", "x_debias")


async def test_the_cap_limits_the_orders() -> None:
    backend, ev = await started(debias="rotate", max_orders=4)
    criteria = {f"o{i}": f"Option {i}" for i in range(8)}
    await ev.evaluate(ev.prepare(request({"c": {"type": "choice", "criteria": criteria}})))
    assert len(backend.calls) == 1 + 2  # 16 orders would exceed the cap: the order sent and its reverse


def test_the_prior_cache_is_a_bounded_lru() -> None:
    cache = PriorCache(entries=2)
    keys = [prior_key([i, i + 1], [7, 8]) for i in range(3)]
    cache.put(keys[0], [-1.0, -2.0])
    cache.put(keys[1], [-1.0, -3.0])
    assert cache.get(keys[0]) == (-1.0, -2.0)  # now the most recent
    cache.put(keys[2], [-2.0, -1.0])
    assert cache.get(keys[1]) is None
    assert cache.get(keys[0]) == (-1.0, -2.0)
    assert len(cache) == 2
    assert (cache.hits, cache.misses) == (2, 1)
    assert prior_key([1, 2], [3]) != prior_key([1, 2, 3], [])


def _logprobs(call: tuple[str, str, tuple[int, ...], tuple[int, ...]]) -> list[float]:
    """What the fake answered for this call: it is deterministic in the tokens and labels."""
    return [label_logprob(call[2], label) for label in call[3]]
