"""The numbers: tempered stable softmax, expected score and the two confidence formulas.

Pure float math on plain sequences; no numpy so the domain imports in any notebook in microseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

ConfidenceFormula = Literal["entropy", "typesafe"]
# How far above 0 a reported log-probability may round (a probability of 1 + 1e-5 at most).
LOGPROB_ROUNDING = 1e-5


def is_logprob(value: float) -> bool:
    """A log-probability a backend may report: finite and at most 0 (within rounding).

    Anything else (NaN, an infinity, 1e308) comes from a broken backend: taken as it is, it would
    read as certainty or overflow where the label mass is summed.
    """
    return math.isfinite(value) and value <= LOGPROB_ROUNDING


def is_share(value: float) -> bool:
    """A share of a distribution (a label mass): finite, in [0, 1] within rounding."""
    return math.isfinite(value) and 0.0 <= value <= 1.0 + LOGPROB_ROUNDING


def softmax(logprobs: Sequence[float], temperature: float = 1.0) -> list[float]:
    """Renormalise label log-probabilities after dividing by the temperature.

    Subtracting the maximum keeps exp() in range, so huge or tiny inputs never overflow, and the
    result sums to 1 up to rounding. A label the model gives zero probability (-inf) stays at 0.
    """
    if not logprobs:
        raise ValueError("softmax of an empty distribution")
    if temperature <= 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    if any(math.isnan(x) or x == math.inf for x in logprobs):
        raise ValueError("log-probabilities must be finite or -inf")
    top = max(logprobs)
    if top == -math.inf:
        raise ValueError("every label has zero probability")
    weights = [math.exp((x - top) / temperature) for x in logprobs]
    total = math.fsum(weights)
    return [w / total for w in weights]


def expected_level(probabilities: Sequence[float]) -> float:
    """Σ i·p_i over 0-based levels."""
    return math.fsum(i * p for i, p in enumerate(probabilities))


def entropy_confidence(probabilities: Sequence[float]) -> float:
    """1 − H(p)/ln(n), clamped to [0, 1]: 0 for uniform, 1 for one-hot."""
    n = len(probabilities)
    if n < 2:
        return 1.0
    entropy = -math.fsum(p * math.log(p) for p in probabilities if p > 0)
    return _clamp(1.0 - entropy / math.log(n))


def typesafe_choice_confidence(probabilities: Sequence[float]) -> float:
    """TypeSafe's documented choice formula: (p_max − 1/n) / (1 − 1/n)."""
    n = len(probabilities)
    if n < 2:
        return 1.0
    return _clamp((max(probabilities) - 1.0 / n) / (1.0 - 1.0 / n))


def typesafe_score_confidence(probabilities: Sequence[float]) -> float:
    """max(0, 1 − Σ p_i·|i − mode| / u), u the mean absolute deviation of the uniform over levels."""
    n = len(probabilities)
    if n < 2:
        return 1.0
    mode = max(range(n), key=lambda i: probabilities[i])
    spread = math.fsum(p * abs(i - mode) for i, p in enumerate(probabilities))
    centre = (n - 1) / 2
    uniform_mad = math.fsum(abs(i - centre) for i in range(n)) / n
    return _clamp(1.0 - spread / uniform_mad)


def choice_confidence(probabilities: Sequence[float], formula: ConfidenceFormula) -> float:
    if formula == "typesafe":
        return typesafe_choice_confidence(probabilities)
    return entropy_confidence(probabilities)


def score_confidence(probabilities: Sequence[float], formula: ConfidenceFormula) -> float:
    if formula == "typesafe":
        return typesafe_score_confidence(probabilities)
    return entropy_confidence(probabilities)


def argmax(values: Sequence[float]) -> int:
    """Index of the largest value; the first one on ties, so answers are stable."""
    return max(range(len(values)), key=lambda i: values[i])


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))
