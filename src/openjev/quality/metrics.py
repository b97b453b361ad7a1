"""Quality metrics over labelled predictions: accuracy, Brier score, calibration, temperature fit,
how much of the set a caller could act on unreviewed above a confidence, how many contrastive pairs
have both halves right, and for yes/no questions how well P(yes) ranks the items whatever the
threshold.

Pure float math on plain data, so the figures in docs/quality.md can be recomputed from a saved
report. A prediction is the distribution the server returned over a question's answers (option
names, or `true`/`false` for yes/no) and the index of the gold answer in it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

import msgspec

from openjev.domain.scoring_math import softmax

ECE_BINS = 10
CONFIDENCE_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
_FLOOR = 1e-300  # log(0) guard: a probability the server rounded to 0 still has a finite log-loss
_TEMPERATURE_RANGE = (0.01, 100.0)


class Prediction(msgspec.Struct, frozen=True):
    probabilities: tuple[float, ...]
    gold: int

    @property
    def top(self) -> int:
        """The answer chosen: the first most probable one, as the server's `choice` is."""
        return max(range(len(self.probabilities)), key=lambda i: self.probabilities[i])

    @property
    def confidence(self) -> float:
        return self.probabilities[self.top]

    @property
    def correct(self) -> bool:
        return self.top == self.gold


class ReliabilityBin(msgspec.Struct, frozen=True):
    low: float
    high: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class ConfidentShare(msgspec.Struct, frozen=True):
    """The items whose answer had at least `threshold` probability: what a caller who sends the rest
    to a person would act on unreviewed, and how often it would be right."""

    threshold: float
    coverage: float  # their share of the items
    accuracy: float | None  # None when no item reaches the threshold


def accuracy(predictions: Sequence[Prediction]) -> float:
    return mean([1.0 if p.correct else 0.0 for p in predictions])


def mean_confidence(predictions: Sequence[Prediction]) -> float:
    return mean([p.confidence for p in predictions])


def brier_score(predictions: Sequence[Prediction]) -> float:
    """Mean over items of Σ_k (p_k − y_k)², y one-hot on the gold answer (0 is perfect, 2 the worst)."""
    return mean([_squared_error(p) for p in predictions])


def _squared_error(prediction: Prediction) -> float:
    return math.fsum((q - (1.0 if k == prediction.gold else 0.0)) ** 2 for k, q in enumerate(prediction.probabilities))


def reliability(predictions: Sequence[Prediction], bins: int = ECE_BINS) -> list[ReliabilityBin]:
    """Equal-width bins of top-answer confidence; bin i holds (i/bins, (i+1)/bins], the first also 0."""
    members: list[list[Prediction]] = [[] for _ in range(bins)]
    for p in predictions:
        members[min(bins - 1, max(0, math.ceil(p.confidence * bins) - 1))].append(p)
    return [
        ReliabilityBin(
            low=i / bins,
            high=(i + 1) / bins,
            count=len(group),
            mean_confidence=mean_confidence(group) if group else None,
            accuracy=accuracy(group) if group else None,
        )
        for i, group in enumerate(members)
    ]


def expected_calibration_error(predictions: Sequence[Prediction], bins: int = ECE_BINS) -> float:
    """Σ_bins (n_b / n)·|accuracy_b − confidence_b|: how far stated confidence is from the hit rate."""
    total = len(predictions)
    if total == 0:
        return math.nan
    return math.fsum(
        b.count / total * abs(b.accuracy - b.mean_confidence)
        for b in reliability(predictions, bins)
        if b.accuracy is not None and b.mean_confidence is not None
    )


def confident_shares(
    predictions: Sequence[Prediction], thresholds: Sequence[float] = CONFIDENCE_THRESHOLDS
) -> list[ConfidentShare]:
    shares = []
    for threshold in thresholds:
        kept = [p for p in predictions if p.confidence >= threshold]
        shares.append(
            ConfidentShare(
                threshold=threshold,
                coverage=len(kept) / len(predictions) if predictions else math.nan,
                accuracy=accuracy(kept) if kept else None,
            )
        )
    return shares


def confidence_auc(predictions: Sequence[Prediction]) -> float | None:
    """How well the answer's probability ranks right answers above wrong ones (0.5: it says nothing
    about being right); None when every answer is right or every one wrong."""
    return ranking_auc([p.confidence for p in predictions], [p.correct for p in predictions])


def tempered(prediction: Prediction, temperature: float) -> Prediction:
    """The prediction with its log-probabilities divided by `temperature` and renormalised (the server's softmax)."""
    logs = [math.log(max(q, _FLOOR)) for q in prediction.probabilities]
    return Prediction(probabilities=tuple(softmax(logs, temperature)), gold=prediction.gold)


def negative_log_likelihood(predictions: Sequence[Prediction], temperature: float = 1.0) -> float:
    """Mean −log p(gold) after tempering."""
    return mean([-math.log(max(tempered(p, temperature).probabilities[p.gold], _FLOOR)) for p in predictions])


def fit_temperature(predictions: Sequence[Prediction], iterations: int = 100) -> float:
    """The temperature that minimises the negative log-likelihood of the gold answers.

    The NLL is convex in β = 1/T (a log-sum-exp of lines in β minus a line), so a golden-section
    search on log β over [1/100, 100] finds the minimum; 100 steps narrow it far below 1e-9.
    """
    if not predictions:
        raise ValueError("no predictions to fit a temperature on")
    low, high = math.log(1 / _TEMPERATURE_RANGE[1]), math.log(1 / _TEMPERATURE_RANGE[0])
    ratio = (math.sqrt(5) - 1) / 2

    def loss(log_beta: float) -> float:
        return negative_log_likelihood(predictions, 1.0 / math.exp(log_beta))

    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = loss(c), loss(d)
    for _ in range(iterations):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = loss(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = loss(d)
    return 1.0 / math.exp((a + b) / 2)


class PairShares(msgspec.Struct, frozen=True):
    """Contrastive pairs (or larger groups) by how many of their items were answered right."""

    pairs: int
    all_right: float  # the share with every item right: a pair-aware accuracy
    none_right: float


def pair_shares(groups: Sequence[Sequence[bool]]) -> PairShares:
    """`groups`: for each pair, whether each of its items was answered right."""
    return PairShares(
        pairs=len(groups),
        all_right=mean([1.0 if all(g) else 0.0 for g in groups]),
        none_right=mean([0.0 if any(g) else 1.0 for g in groups]),
    )


class ThresholdFit(msgspec.Struct, frozen=True):
    """Answer yes when P(yes) >= `threshold`: the cut that is right most often on the file."""

    threshold: float
    accuracy: float


def ranking_auc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """P(a random positive scores above a random negative), ties counting half; None without both kinds.

    It does not depend on any threshold: 0.5 is no signal, 1 a perfect ranking. It bounds what a
    better prior or threshold can do for yes/no answers: none can reorder the items.
    """
    pos = sorted(s for s, p in zip(scores, positive, strict=True) if p)
    neg = sorted(s for s, p in zip(scores, positive, strict=True) if not p)
    if not pos or not neg:
        return None
    wins = 0.0
    for score in pos:
        below = bisect.bisect_left(neg, score)
        wins += below + 0.5 * (bisect.bisect_right(neg, score) - below)
    return wins / (len(pos) * len(neg))


def best_threshold(scores: Sequence[float], positive: Sequence[bool]) -> ThresholdFit:
    """The cut on P(yes) with the highest accuracy on these items (midway between neighbouring scores).

    Fitted on the items it is scored on, so the accuracy is optimistic; it says how far from the
    best cut the server's own (0.5) is. Among equally good cuts, the one nearest 0.5.
    """
    if not scores:
        return ThresholdFit(threshold=math.nan, accuracy=math.nan)
    pairs = sorted(zip(scores, positive, strict=True))
    n = len(pairs)
    correct = sum(1 for _, p in pairs if p)  # cut below every score: everything is answered yes
    best = ThresholdFit(threshold=pairs[0][0] - 1e-9, accuracy=correct / n)
    for i, (score, is_positive) in enumerate(pairs):
        correct += -1 if is_positive else 1  # this item is now answered no
        if i + 1 < n and pairs[i + 1][0] == score:
            continue  # no cut between equal scores
        cut = (score + pairs[i + 1][0]) / 2 if i + 1 < n else score + 1e-9
        candidate = ThresholdFit(threshold=cut, accuracy=correct / n)
        if (candidate.accuracy, -abs(cut - 0.5)) > (best.accuracy, -abs(best.threshold - 0.5)):
            best = candidate
    return best


class Interval(msgspec.Struct, frozen=True):
    low: float
    high: float


WILSON_Z = 1.959963984540054  # the normal quantile of 97.5 %: a 95 % interval


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> Interval | None:
    """The Wilson score interval of a proportion; None without trials.

    Unlike p ± z·√(p(1−p)/n) it stays within [0, 1] and does not shrink to nothing at 0 or n
    successes, which the small dev sets (tens of items) reach.
    """
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact ends: no rounding residue at 0 or n
    high = 1.0 if successes >= trials else min(1.0, centre + half)
    return Interval(low=low, high=high)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) by linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    lower = math.floor(rank)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (rank - lower)


def mean(values: Sequence[float]) -> float:
    """The mean, NaN (never 0) for no values."""
    return math.fsum(values) / len(values) if values else math.nan
