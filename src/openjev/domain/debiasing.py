"""Bias removal: which option orders to ask in, and how to combine the answers (pure math).

Small models pick answer letters by position as much as by content, and lean towards some answers
whatever the input. Two well-known, cheap corrections undo much of that:

- Option order (after Zheng et al. 2023, "Large Language Models Are Not Robust Multiple Choice
  Selectors"): the question is asked with its options in several orders, every option in every
  position once, and the per-option log-probabilities are averaged. If the model's letter choice is
  "content score × position prior", the position prior is the same for every option after the
  average and cancels in the softmax. The orders are the cyclic rotations of the options as sent
  and of their reverse, a set that is the same whichever of those orders the caller sent, so
  reversing or rotating the options cannot change the answer.
- Both directions (`reverse`): the cheapest set of orders that is the same whichever direction the
  caller sent the options in: the order sent and its reverse, two calls whatever the option count.
  Each option sits at positions k and n − 1 − k, which evens out a lean towards the first or the
  last options (the strongest position bias of small models), and reversing the options cannot
  change the answer; other permutations can. `rotate` removes every position prior at 2n calls.
- Answer prior (contextual calibration, Zhao et al. 2021, "Calibrate Before Use"): the same question
  is asked about a content-free state ("N/A"); that distribution is what the model answers with no
  evidence, and it is divided out (subtracted in log space) before the answer is normalised.
- Fitted offsets (`fit`): the same question is asked about each of the ask's worked examples, whose
  answers are known, and the per-option log-offsets that make those answers most probable are added
  to the case's (`example_fit`). The examples are then data for the fit, not turns of the prompt.

An order is a tuple of original option indices, by position: order[k] is the option shown with the
k-th label.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

import msgspec

DebiasMode = Literal["none", "reverse", "rotate", "calibrate", "rotate+calibrate", "fit", "reverse+fit", "rotate+fit"]
DEBIAS_MODES: tuple[str, ...] = get_args(DebiasMode)
CONTENT_FREE_STATE = "N/A"
Order = tuple[int, ...]


class DebiasPolicy(msgspec.Struct, frozen=True):
    """What a mode turns on; `max_orders` caps the orders a choice question is asked in.

    `fit`: an ask's worked examples are asked about like the case, and fit its answer's per-option
    offsets (`example_fit`) instead of being shown in the prompt.
    """

    rotate: bool
    calibrate: bool
    max_orders: int = 10
    fit: bool = False

    @classmethod
    def of(cls, mode: DebiasMode, max_orders: int = 10) -> DebiasPolicy:
        fit = mode.endswith("fit")
        if mode.startswith("reverse"):  # the order sent and its reverse: `option_orders` with two orders at most
            return cls(rotate=True, calibrate=False, max_orders=2, fit=fit)
        return cls(rotate="rotate" in mode, calibrate="calibrate" in mode, max_orders=max_orders, fit=fit)


def identity(n: int) -> Order:
    return tuple(range(n))


def option_orders(n: int, max_orders: int) -> tuple[Order, ...]:
    """The orders to ask a question with `n` options in, the order as sent first.

    Every cyclic rotation of the options and the reverse of each: 2n orders (2 when n = 2, where the
    two sets coincide), in which every option takes every position twice. When 2n is more than
    `max_orders`, only the order sent and its reverse: each option then sits at positions k and
    n − 1 − k, which evens out a preference for the first or the last options at the cost of two
    calls. Either set is the same whichever direction the caller sent the options in.
    """
    if n < 2 or max_orders < 2:
        return (identity(n),)
    forward = identity(n)
    if n == 2 or 2 * n > max_orders:
        return (forward, forward[::-1])
    rotations = [_rotate(forward, s) for s in range(n)]
    return tuple(rotations) + tuple(r[::-1] for r in rotations)


def _rotate(order: Order, shift: int) -> Order:
    return order[shift:] + order[:shift]


def log_softmax(logprobs: Sequence[float]) -> list[float]:
    """Normalised log-probabilities; a -inf entry stays -inf."""
    top = max(logprobs)
    if top == -math.inf:
        raise ValueError("every label has zero probability")
    total = math.log(math.fsum(math.exp(x - top) for x in logprobs)) + top
    return [x - total for x in logprobs]


def divide_prior(logprobs: Sequence[float], prior: Sequence[float]) -> list[float]:
    """p / prior, renormalised, in log space. The prior's own normalisation does not matter."""
    if len(logprobs) != len(prior):
        raise ValueError("a distribution and its prior must have the same length")
    prior_norm = log_softmax(prior)
    return log_softmax([x - q for x, q in zip(logprobs, prior_norm, strict=True)])


def in_option_order(order: Order, label_logprobs: Sequence[float]) -> list[float]:
    """Label log-probabilities (by position) re-indexed by original option."""
    if sorted(order) != list(range(len(label_logprobs))):
        raise ValueError("an order must be a permutation of the option indices")
    by_option = [0.0] * len(order)
    for position, option in enumerate(order):
        by_option[option] = label_logprobs[position]
    return by_option


def combine_orders(answers: Sequence[tuple[Order, Sequence[float]]], *, arithmetic: bool = False) -> list[float]:
    """One distribution from the same question asked in several orders: the mean log-probability.

    Each element is (order, label log-probabilities by position). The result is normalised
    log-probabilities by original option. A geometric mean (the mean in log space) is what cancels
    a multiplicative position prior exactly; an option any order gives zero probability stays at zero.
    `arithmetic`: the mean probability instead, the rule decision models were fitted with (llama.cpp's
    /v1/systemone averages a lev model's two orders so).
    """
    if not answers:
        raise ValueError("no answers to combine")
    per_order = [log_softmax(in_option_order(order, lp)) for order, lp in answers]
    n = len(per_order[0])
    if arithmetic:
        mean_p = [math.fsum(math.exp(row[i]) for row in per_order) / len(per_order) for i in range(n)]
        return log_softmax([math.log(p) if p > 0 else -math.inf for p in mean_p])
    means = [math.fsum(row[i] for row in per_order) / len(per_order) for i in range(n)]
    return log_softmax(means)
