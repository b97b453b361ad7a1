"""Bias-removal math: the orders asked, combining them, dividing out a prior."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.domain.debiasing import (
    DebiasPolicy,
    combine_orders,
    divide_prior,
    in_option_order,
    log_softmax,
    option_orders,
)


def probs(logs: list[float]) -> list[float]:
    return [math.exp(x) for x in logs]


def test_orders_are_rotations_of_the_options_and_of_their_reverse() -> None:
    assert option_orders(4, 10) == (
        (0, 1, 2, 3),
        (1, 2, 3, 0),
        (2, 3, 0, 1),
        (3, 0, 1, 2),
        (3, 2, 1, 0),
        (0, 3, 2, 1),
        (1, 0, 3, 2),
        (2, 1, 0, 3),
    )


def test_two_options_need_only_both_orders() -> None:
    assert option_orders(2, 10) == ((0, 1), (1, 0))


def test_every_option_takes_every_position_once_per_direction() -> None:
    for n in range(3, 6):
        orders = option_orders(n, 2 * n)
        assert len(set(orders)) == 2 * n
        for position in range(n):
            assert sorted(o[position] for o in orders) == sorted(list(range(n)) * 2)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_the_set_of_orders_is_the_same_for_the_reversed_options(n: int) -> None:
    """Reversing the options a caller sends must not change which arrangements the model sees."""
    orders = option_orders(n, 2 * n)
    reversed_sent = [tuple(n - 1 - i for i in o) for o in option_orders(n, 2 * n)]
    assert set(orders) == set(reversed_sent)


def test_beyond_the_cap_the_order_sent_and_its_reverse() -> None:
    assert option_orders(64, 10) == (tuple(range(64)), tuple(range(63, -1, -1)))
    assert option_orders(5, 9) == ((0, 1, 2, 3, 4), (4, 3, 2, 1, 0))
    assert len(option_orders(5, 10)) == 10
    assert len(option_orders(32, 64)) == 64


def test_no_rotation_below_two_orders() -> None:
    assert option_orders(5, 1) == ((0, 1, 2, 3, 4),)


def test_policy_from_mode() -> None:
    assert DebiasPolicy.of("none") == DebiasPolicy(rotate=False, calibrate=False)
    assert DebiasPolicy.of("rotate") == DebiasPolicy(rotate=True, calibrate=False)
    assert DebiasPolicy.of("calibrate") == DebiasPolicy(rotate=False, calibrate=True)
    assert DebiasPolicy.of("rotate+calibrate", 6) == DebiasPolicy(rotate=True, calibrate=True, max_orders=6)
    assert DebiasPolicy.of("fit") == DebiasPolicy(rotate=False, calibrate=False, fit=True)
    assert DebiasPolicy.of("rotate+fit", 6) == DebiasPolicy(rotate=True, calibrate=False, max_orders=6, fit=True)
    assert DebiasPolicy.of("reverse+fit", 6) == DebiasPolicy(rotate=True, calibrate=False, max_orders=2, fit=True)


def test_reverse_asks_the_order_sent_and_its_reverse_whatever_the_cap() -> None:
    policy = DebiasPolicy.of("reverse", 10)
    assert policy == DebiasPolicy(rotate=True, calibrate=False, max_orders=2)
    assert option_orders(5, policy.max_orders) == ((0, 1, 2, 3, 4), (4, 3, 2, 1, 0))


def test_in_option_order_maps_positions_back_to_options() -> None:
    assert in_option_order((2, 0, 1), [-1.0, -2.0, -3.0]) == [-2.0, -3.0, -1.0]
    with pytest.raises(ValueError, match="permutation"):
        in_option_order((0, 0, 1), [-1.0, -2.0, -3.0])


def test_combining_cancels_a_multiplicative_position_prior_exactly() -> None:
    """p(label at position k) ∝ content(option) × position_prior(k): the mean in log space removes the prior."""
    content = [0.5, 0.3, 0.2]
    position_prior = [0.7, 0.2, 0.1]
    answers = []
    for order in option_orders(3, 6):
        raw = [math.log(content[option] * position_prior[k]) for k, option in enumerate(order)]
        answers.append((order, raw))
    assert probs(combine_orders(answers)) == pytest.approx(content, abs=1e-12)


def test_combining_is_the_normalised_geometric_mean() -> None:
    a = [math.log(0.6), math.log(0.4)]
    b = [math.log(0.2), math.log(0.8)]  # asked as (1, 0): option 0 got 0.8, option 1 got 0.2
    combined = probs(combine_orders([((0, 1), a), ((1, 0), b)]))
    g0, g1 = math.sqrt(0.6 * 0.8), math.sqrt(0.4 * 0.2)
    assert combined == pytest.approx([g0 / (g0 + g1), g1 / (g0 + g1)], abs=1e-15)


def test_combining_one_order_is_that_distribution() -> None:
    raw = [math.log(0.1), math.log(0.6), math.log(0.3)]
    assert probs(combine_orders([((0, 1, 2), raw)])) == pytest.approx([0.1, 0.6, 0.3], abs=1e-15)


def test_combining_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no answers"):
        combine_orders([])


def test_dividing_out_the_prior() -> None:
    p = [math.log(0.6), math.log(0.4)]
    prior = [math.log(0.75), math.log(0.25)]
    calibrated = probs(divide_prior(p, prior))
    assert calibrated == pytest.approx([(0.6 / 0.75) / (0.6 / 0.75 + 0.4 / 0.25), (0.4 / 0.25) / 2.4], abs=1e-15)


def test_a_uniform_prior_changes_nothing_and_the_prior_scale_does_not_matter() -> None:
    p = [math.log(0.2), math.log(0.5), math.log(0.3)]
    assert probs(divide_prior(p, [0.0, 0.0, 0.0])) == pytest.approx([0.2, 0.5, 0.3], abs=1e-15)
    assert divide_prior(p, [-1.0, -2.0, -3.0]) == pytest.approx(divide_prior(p, [4.0, 3.0, 2.0]), abs=1e-12)


def test_dividing_the_prior_by_itself_is_uniform() -> None:
    prior = [math.log(0.7), math.log(0.2), math.log(0.1)]
    assert probs(divide_prior(prior, prior)) == pytest.approx([1 / 3] * 3, abs=1e-15)


def test_prior_length_must_match() -> None:
    with pytest.raises(ValueError, match="same length"):
        divide_prior([0.0, 0.0], [0.0])


@given(st.lists(st.floats(min_value=-50, max_value=0), min_size=2, max_size=6))
def test_log_softmax_is_normalised(logs: list[float]) -> None:
    assert math.fsum(probs(log_softmax(logs))) == pytest.approx(1.0, abs=1e-12)


@given(st.permutations(range(4)), st.lists(st.floats(min_value=-30, max_value=0), min_size=4, max_size=4))
def test_a_combined_answer_does_not_depend_on_the_order_sent(sent: list[int], content: list[float]) -> None:
    """Whatever order the caller sends, asking every dihedral arrangement gives the same distribution."""
    position_prior = [0.0, -1.0, -2.5, -0.5]

    def ask(options: list[int]) -> list[float]:
        answers = []
        for order in option_orders(4, 8):
            shown = [options[i] for i in order]
            answers.append((order, [content[o] + position_prior[k] for k, o in enumerate(shown)]))
        by_sent = combine_orders(answers)
        return [by_sent[options.index(o)] for o in range(4)]

    reference = ask([0, 1, 2, 3])
    for options in (sent, sent[::-1]):
        assert ask(list(options)) == pytest.approx(reference, abs=1e-9)


def test_all_orders_of_three_are_used() -> None:
    assert set(option_orders(3, 6)) == set(itertools.permutations(range(3)))
