"""The data behind the HTML report's plots, from a report's per-item answers (`ItemAnswer`).

Pure functions on the saved report, so a plot can be recomputed from `--out`'s JSON: which answers
were right and how confident, accuracy as the least confident answers are held back, the ROC curve
of P(yes), the confusion counts of gold against given answers, and the wrong answers worth reading.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import NamedTuple

import msgspec

from openjev.quality.runner import ItemAnswer

MAX_CONFUSION_LABELS = 12  # a matrix any wider is unreadable; the rarest answers share one row and column
OTHER = "(other)"


class Scored(NamedTuple):
    confidence: float  # the probability of the answer given
    correct: bool


class Point(NamedTuple):
    x: float
    y: float


class Confusion(msgspec.Struct, frozen=True):
    """`counts[g][p]`: items whose gold answer is `labels[g]` and whose answer given is `labels[p]`."""

    labels: list[str]
    counts: list[list[int]]


def gold_name(gold: str | bool | int) -> str:
    """The gold answer as the server names answers: `true`/`false`, an option, a level's index."""
    return str(gold).lower() if isinstance(gold, bool) else str(gold)


def answered(answers: Iterable[ItemAnswer]) -> list[ItemAnswer]:
    return [a for a in answers if a.answer is not None and a.probabilities is not None]


def confidence_of(answer: ItemAnswer) -> float:
    if answer.answer is None or answer.probabilities is None:
        raise ValueError(f"item {answer.index} has no answer")
    return answer.probabilities[answer.answer]


def is_correct(answer: ItemAnswer) -> bool:
    return answer.answer == gold_name(answer.gold)


def scored(answers: Iterable[ItemAnswer]) -> list[Scored]:
    return [Scored(confidence_of(a), is_correct(a)) for a in answered(answers)]


def coverage_curve(items: Sequence[Scored]) -> list[Point]:
    """(share acted on, accuracy among them) as answers are kept from the most confident down.

    Answers of equal confidence are kept or held back together, as a threshold on confidence would;
    the curve ends at (1, accuracy over all).
    """
    ordered = sorted(items, key=lambda s: -s.confidence)
    points: list[Point] = []
    kept = right = 0
    for _, group in groupby(ordered, key=lambda s: s.confidence):
        members = list(group)
        kept += len(members)
        right += sum(1 for s in members if s.correct)
        points.append(Point(kept / len(ordered), right / kept))
    return points


def roc_curve(answers: Iterable[ItemAnswer]) -> list[Point]:
    """(false positive rate, true positive rate) of answering yes above each cut on P(yes), from
    (0, 0) to (1, 1); empty unless both gold answers occur. Equal scores move the curve diagonally."""
    pairs = [
        (a.probabilities["true"], a.gold is True)
        for a in answered(answers)
        if a.probabilities is not None and "true" in a.probabilities
    ]
    positives = sum(1 for _, yes in pairs if yes)
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return []
    points = [Point(0.0, 0.0)]
    tp = fp = 0
    for _, group in groupby(sorted(pairs, key=lambda p: -p[0]), key=lambda p: p[0]):
        for _, yes in group:
            tp, fp = (tp + 1, fp) if yes else (tp, fp + 1)
        points.append(Point(fp / negatives, tp / positives))
    return points


def confusion(answers: Iterable[ItemAnswer], max_labels: int = MAX_CONFUSION_LABELS) -> Confusion:
    """Gold against given answers, labels in the order the questions list their answers.

    Beyond `max_labels`, the least frequent answers (gold or given) are counted together as `(other)`.
    """
    items = answered(answers)
    order: dict[str, int] = {}
    for a in items:
        for name in a.probabilities or ():
            order.setdefault(name, len(order))
        order.setdefault(gold_name(a.gold), len(order))
    labels = list(order)
    if len(labels) > max_labels:
        frequency = {name: 0 for name in labels}
        for a in items:
            frequency[gold_name(a.gold)] += 1
            frequency[a.answer or ""] = frequency.get(a.answer or "", 0) + 1
        kept = set(sorted(labels, key=lambda n: (-frequency[n], order[n]))[: max_labels - 1])
        labels = [name for name in labels if name in kept] + [OTHER]
    place = {name: i for i, name in enumerate(labels)}
    counts = [[0] * len(labels) for _ in labels]
    for a in items:
        given = a.answer or ""
        counts[place.get(gold_name(a.gold), len(labels) - 1)][place.get(given, len(labels) - 1)] += 1
    return Confusion(labels=labels, counts=counts)


def wrong_answers(answers: Iterable[ItemAnswer]) -> list[ItemAnswer]:
    """The answered items whose answer is not the gold one, the most confident first (then file order)."""
    wrong = [a for a in answered(answers) if not is_correct(a)]
    return sorted(wrong, key=lambda a: (-confidence_of(a), a.index))
