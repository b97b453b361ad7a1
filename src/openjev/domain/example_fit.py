"""Fitting an answer's per-option offsets on the caller's worked examples (pure math).

A small model leans towards some answers of a question whatever the case: the return requests of
the realistic decisions go to "refund" when a clause says a person must decide. The `fit` bias
removal asks the question about each worked example as about the real case, without examples in
the prompt, and finds the log-offsets, one per option, under which the examples' distributions give
their known answers the most probability (a multinomial logistic regression with only intercepts;
what "Calibrate Before Use" divides out with a content-free state, learnt here from labelled cases).
The real case's log-probabilities are shifted by those offsets before the softmax.

A ridge keeps the offsets finite and small when the examples are few or already answered right:
with one example per option the model's own answers still decide every case it is sure of.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from openjev.domain.debiasing import log_softmax
from openjev.domain.scoring_math import softmax

FIT_RIDGE = 0.01
"""The ridge on the offsets (per example, in nats²): chosen on the dev sets, see docs/quality.md."""

_MAX_STEPS = 100
_TOLERANCE = 1e-9


def fit_offsets(cases: Sequence[tuple[Sequence[float], int]], ridge: float = FIT_RIDGE) -> list[float]:
    """The offsets b minimising mean(−log softmax(l + b)[answer]) + ridge/2 · |b|² over the `cases`.

    Each case is (normalised log-probabilities by option, index of its right option). No case gives
    zero offsets. The objective is strictly convex; Newton steps with a backtracking line search
    reach its optimum in a few steps, and never move away from it.
    """
    if ridge <= 0:
        raise ValueError("the ridge must be positive: without it, separable examples have no finite fit")
    if not cases:
        return []
    n = len(cases[0][0])
    if any(len(logprobs) != n or not 0 <= answer < n for logprobs, answer in cases):
        raise ValueError("every case needs one log-probability per option and an answer among them")
    offsets = [0.0] * n
    value = _objective(cases, offsets, ridge)
    for _ in range(_MAX_STEPS):
        gradient, hessian = _derivatives(cases, offsets, ridge)
        if max(abs(g) for g in gradient) < _TOLERANCE:
            break
        step = [-x for x in _solve(hessian, gradient)]
        slope = math.fsum(g * s for g, s in zip(gradient, step, strict=True))
        size = 1.0
        while size > 1e-12:
            trial = [b + size * s for b, s in zip(offsets, step, strict=True)]
            trial_value = _objective(cases, trial, ridge)
            if trial_value <= value + 1e-4 * size * slope:
                offsets, value = trial, trial_value
                break
            size /= 2
        else:
            break
    return offsets


def shifted(logprobs: Sequence[float], offsets: Sequence[float]) -> list[float]:
    """Log-probabilities plus the offsets (unnormalised: the kind's softmax normalises)."""
    if len(offsets) != len(logprobs):
        raise ValueError("a distribution and its offsets must have the same length")
    return [x + b for x, b in zip(logprobs, offsets, strict=True)]


def _derivatives(
    cases: Sequence[tuple[Sequence[float], int]], offsets: Sequence[float], ridge: float
) -> tuple[list[float], list[list[float]]]:
    """The objective's gradient and Hessian: mean(p − onehot) + ridge·b, mean(diag p − p pᵀ) + ridge·I."""
    n = len(offsets)
    gradient = [ridge * b for b in offsets]
    hessian = [[ridge if i == j else 0.0 for j in range(n)] for i in range(n)]
    weight = 1.0 / len(cases)
    for logprobs, answer in cases:
        p = softmax(shifted(logprobs, offsets))
        gradient[answer] -= weight
        for i in range(n):
            gradient[i] += weight * p[i]
            row = hessian[i]
            row[i] += weight * p[i]
            for j in range(n):
                row[j] -= weight * p[i] * p[j]
    return gradient, hessian


def _solve(matrix: list[list[float]], vector: Sequence[float]) -> list[float]:
    """x with matrix·x = vector, for a symmetric positive definite matrix (Cholesky)."""
    n = len(vector)
    lower = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = matrix[i][j] - math.fsum(lower[i][k] * lower[j][k] for k in range(j))
            lower[i][j] = math.sqrt(max(total, 1e-300)) if i == j else total / lower[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (vector[i] - math.fsum(lower[i][k] * y[k] for k in range(i))) / lower[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - math.fsum(lower[k][i] * x[k] for k in range(i + 1, n))) / lower[i][i]
    return x


def _objective(cases: Sequence[tuple[Sequence[float], int]], offsets: Sequence[float], ridge: float) -> float:
    loss = math.fsum(-log_softmax(shifted(logprobs, offsets))[answer] for logprobs, answer in cases)
    return loss / len(cases) + ridge / 2 * math.fsum(b * b for b in offsets)
