from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.domain.scoring_math import (
    argmax,
    entropy_confidence,
    expected_level,
    softmax,
    typesafe_choice_confidence,
    typesafe_score_confidence,
)

logprob_lists = st.lists(st.floats(min_value=-1e4, max_value=0.0, allow_nan=False), min_size=2, max_size=255)
temperatures = st.floats(min_value=0.05, max_value=20.0)


@given(logprob_lists, temperatures)
def test_softmax_is_a_distribution(logprobs: list[float], temperature: float) -> None:
    p = softmax(logprobs, temperature)
    assert len(p) == len(logprobs)
    assert all(0.0 <= x <= 1.0 and math.isfinite(x) for x in p)
    assert math.fsum(p) == pytest.approx(1.0, abs=1e-9)


@given(logprob_lists)
def test_softmax_keeps_the_order_of_the_logprobs(logprobs: list[float]) -> None:
    p = softmax(logprobs)
    assert p[argmax(logprobs)] == max(p)
    assert all(p[i] >= p[j] for i in range(len(p)) for j in range(len(p)) if logprobs[i] > logprobs[j])


def test_softmax_is_stable_for_extreme_values() -> None:
    assert softmax([-1e6, -1e6 - 1.0]) == pytest.approx([1 / (1 + math.e**-1), 1 - 1 / (1 + math.e**-1)])
    assert softmax([0.0, -math.inf]) == [1.0, 0.0]


def test_temperature_flattens_or_sharpens() -> None:
    base = softmax([0.0, -1.0])
    hot = softmax([0.0, -1.0], temperature=2.0)
    cold = softmax([0.0, -1.0], temperature=0.5)
    assert cold[0] > base[0] > hot[0] > 0.5
    assert hot[0] == pytest.approx(1 / (1 + math.exp(-0.5)))


@pytest.mark.parametrize("bad", [[], [math.nan, 0.0], [math.inf, 0.0], [-math.inf, -math.inf]])
def test_softmax_refuses_inputs_it_cannot_normalise(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        softmax(bad)


def test_softmax_refuses_a_bad_temperature() -> None:
    with pytest.raises(ValueError):
        softmax([0.0, -1.0], temperature=0.0)


@given(logprob_lists)
def test_expected_level_is_the_weighted_sum(logprobs: list[float]) -> None:
    p = softmax(logprobs)
    score = expected_level(p)
    assert score == pytest.approx(sum(i * x for i, x in enumerate(p)), abs=1e-9)
    assert 0.0 <= score <= len(p) - 1 + 1e-9


@given(logprob_lists)
def test_confidences_are_bounded(logprobs: list[float]) -> None:
    p = softmax(logprobs)
    for confidence in (entropy_confidence(p), typesafe_choice_confidence(p), typesafe_score_confidence(p)):
        assert 0.0 <= confidence <= 1.0


@pytest.mark.parametrize("n", [2, 3, 10, 64, 255])
def test_uniform_is_zero_and_one_hot_is_one(n: int) -> None:
    uniform = [1.0 / n] * n
    one_hot = [0.0] * n
    one_hot[n // 2] = 1.0
    assert entropy_confidence(uniform) == pytest.approx(0.0, abs=1e-12)
    assert typesafe_choice_confidence(uniform) == pytest.approx(0.0, abs=1e-12)
    assert typesafe_score_confidence(uniform) < 1.0
    assert entropy_confidence(one_hot) == 1.0
    assert typesafe_choice_confidence(one_hot) == 1.0
    assert typesafe_score_confidence(one_hot) == 1.0


def test_entropy_confidence_value() -> None:
    p = [0.75, 0.25]
    entropy = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert entropy_confidence(p) == pytest.approx(1 - entropy / math.log(2))


def test_typesafe_choice_formula() -> None:
    assert typesafe_choice_confidence([0.5, 0.3, 0.2]) == pytest.approx((0.5 - 1 / 3) / (1 - 1 / 3))


def test_typesafe_score_formula() -> None:
    # n = 3: u = (1 + 0 + 1) / 3; mode = 1; spread = 0.2 * 1 + 0.3 * 1.
    assert typesafe_score_confidence([0.2, 0.5, 0.3]) == pytest.approx(1 - 0.5 / (2 / 3))
    # A spread wider than the uniform's clamps to 0.
    assert typesafe_score_confidence([0.45, 0.1, 0.45]) == 0.0


def test_argmax_takes_the_first_on_ties() -> None:
    assert argmax([0.4, 0.4, 0.2]) == 0
