"""Offsets fitted on worked examples: the optimum of a convex fit, and what it does to a leaning model."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.domain.debiasing import log_softmax
from openjev.domain.example_fit import fit_offsets, shifted


def logs(*p: float) -> list[float]:
    return [math.log(x) for x in p]


def argmax(values: list[float]) -> int:
    return values.index(max(values))


def gradient(cases: list[tuple[list[float], int]], offsets: list[float], ridge: float) -> list[float]:
    n = len(offsets)
    grad = [ridge * b for b in offsets]
    for logprobs, answer in cases:
        p = [math.exp(x) for x in log_softmax(shifted(logprobs, offsets))]
        for k in range(n):
            grad[k] += (p[k] - (k == answer)) / len(cases)
    return grad


def test_no_example_gives_no_offsets() -> None:
    assert fit_offsets([]) == []


def test_the_ridge_must_be_positive() -> None:
    with pytest.raises(ValueError, match="ridge"):
        fit_offsets([(logs(0.5, 0.5), 0)], ridge=0)


def test_every_case_needs_a_value_per_option_and_an_answer_among_them() -> None:
    with pytest.raises(ValueError):
        fit_offsets([(logs(0.5, 0.5), 0), (logs(0.2, 0.3, 0.5), 1)])
    with pytest.raises(ValueError):
        fit_offsets([(logs(0.5, 0.5), 2)])


def test_a_model_leaning_to_one_option_is_moved_off_it() -> None:
    """It answers the first option on every case, the second one's too: the offsets undo the lean."""
    cases = [(logs(0.7, 0.2, 0.1), 1), (logs(0.6, 0.3, 0.1), 1), (logs(0.9, 0.05, 0.05), 0), (logs(0.5, 0.1, 0.4), 2)]
    offsets = fit_offsets(cases)
    assert [argmax(shifted(lp, offsets)) for lp, _ in cases] == [1, 1, 0, 2]
    assert offsets[1] > offsets[0]
    case = logs(0.65, 0.25, 0.1)  # a new case the model leans on the same way
    assert argmax(case) == 0
    assert argmax(shifted(case, offsets)) == 1


def test_examples_answered_right_leave_a_sure_answer_alone() -> None:
    cases = [(logs(0.98, 0.01, 0.01), 0), (logs(0.01, 0.98, 0.01), 1), (logs(0.01, 0.01, 0.98), 2)]
    offsets = fit_offsets(cases)
    assert max(abs(b) for b in offsets) < 1e-6
    assert argmax(shifted(logs(0.2, 0.7, 0.1), offsets)) == 1


cases_strategy = st.lists(
    st.tuples(st.lists(st.floats(-12, 0), min_size=3, max_size=3), st.integers(0, 2)), min_size=1, max_size=12
)


@given(cases_strategy, st.sampled_from([0.003, 0.01, 0.1, 1.0]))
def test_the_offsets_are_the_optimum_and_sum_to_zero(cases: list[tuple[list[float], int]], ridge: float) -> None:
    normalised = [(log_softmax(lp), answer) for lp, answer in cases]
    offsets = fit_offsets(normalised, ridge)
    assert max(abs(g) for g in gradient(normalised, offsets, ridge)) < 1e-6
    assert math.fsum(offsets) == pytest.approx(0, abs=1e-6)


@given(cases_strategy, st.floats(-5, 5))
def test_a_case_s_normalisation_does_not_matter(cases: list[tuple[list[float], int]], shift: float) -> None:
    moved = [([x + shift for x in lp], answer) for lp, answer in cases]
    assert fit_offsets(moved) == pytest.approx(fit_offsets(cases), abs=1e-6)
