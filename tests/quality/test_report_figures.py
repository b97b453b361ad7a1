"""The data behind the HTML report's plots, from per-item answers, checked against hand-computed values."""

from __future__ import annotations

from openjev.quality.figures import (
    OTHER,
    Point,
    Scored,
    confusion,
    coverage_curve,
    gold_name,
    roc_curve,
    scored,
    wrong_answers,
)
from openjev.quality.runner import ItemAnswer


def choice(index: int, gold: str, probabilities: dict[str, float]) -> ItemAnswer:
    top = max(probabilities, key=lambda name: probabilities[name])
    return ItemAnswer(index=index, gold=gold, answer=top, probabilities=probabilities)


def yes_no(index: int, gold: bool, p_yes: float) -> ItemAnswer:
    answer = "true" if p_yes >= 0.5 else "false"
    return ItemAnswer(index=index, gold=gold, answer=answer, probabilities={"true": p_yes, "false": 1 - p_yes})


def test_gold_answers_are_named_as_the_server_names_answers() -> None:
    assert [gold_name(True), gold_name(False), gold_name(2), gold_name("World")] == ["true", "false", "2", "World"]


def test_scored_skips_failed_items_and_compares_with_the_gold_name() -> None:
    items = [yes_no(0, True, 0.8), yes_no(1, False, 0.7), ItemAnswer(index=2, gold=True, error="HTTP 422")]
    assert scored(items) == [Scored(0.8, True), Scored(0.7, False)]


def test_the_coverage_curve_keeps_answers_from_the_most_confident_down_ties_together() -> None:
    items = [Scored(0.9, True), Scored(0.6, False), Scored(0.8, False), Scored(0.8, True), Scored(0.5, True)]
    assert coverage_curve(items) == [
        Point(0.2, 1.0),  # 0.9
        Point(0.6, 2 / 3),  # both 0.8 answers join at once
        Point(0.8, 0.5),
        Point(1.0, 0.6),  # everything: the accuracy over all
    ]
    assert coverage_curve([]) == []


def test_the_roc_curve_steps_through_each_cut_on_p_yes() -> None:
    items = [yes_no(0, True, 0.9), yes_no(1, False, 0.7), yes_no(2, True, 0.6), yes_no(3, False, 0.2)]
    assert roc_curve(items) == [Point(0, 0), Point(0, 0.5), Point(0.5, 0.5), Point(0.5, 1), Point(1, 1)]
    tied = [yes_no(0, True, 0.7), yes_no(1, False, 0.7)]
    assert roc_curve(tied) == [Point(0, 0), Point(1, 1)]  # one cut moves both: the diagonal
    assert roc_curve([yes_no(0, True, 0.9), yes_no(1, True, 0.1)]) == []  # no negative: no curve


def test_the_confusion_matrix_counts_gold_against_answers_in_the_questions_order() -> None:
    options = ("World", "Sports", "Tech")

    def p(top: str) -> dict[str, float]:
        return {name: 0.8 if name == top else 0.1 for name in options}

    items = [choice(0, "World", p("World")), choice(1, "World", p("Tech")), choice(2, "Tech", p("Tech"))]
    matrix = confusion([*items, ItemAnswer(index=3, gold="Sports", error="timeout")])
    assert matrix.labels == ["World", "Sports", "Tech"]
    assert matrix.counts == [[1, 0, 1], [0, 0, 0], [0, 0, 1]]


def test_a_wide_confusion_matrix_counts_its_rarest_answers_together() -> None:
    names = [f"o{i}" for i in range(5)]
    items = []
    for index, (gold, given, times) in enumerate([("o0", "o0", 5), ("o1", "o1", 4), ("o2", "o3", 1), ("o4", "o0", 1)]):
        probabilities = {n: 0.6 if n == given else 0.1 for n in names}
        items += [choice(index * 10 + k, gold, probabilities) for k in range(times)]
    matrix = confusion(items, max_labels=3)
    assert matrix.labels == ["o0", "o1", OTHER]
    assert matrix.counts == [[5, 0, 0], [0, 4, 0], [1, 0, 1]]  # o4 answered o0; o2 answered o3
    assert sum(map(sum, matrix.counts)) == len(items)


def test_wrong_answers_come_most_confident_first_then_in_file_order() -> None:
    items = [yes_no(0, True, 0.3), yes_no(1, True, 0.9), yes_no(2, False, 0.9), yes_no(3, True, 0.2)]
    items.append(yes_no(4, False, 0.9))
    assert [a.index for a in wrong_answers(items)] == [2, 4, 3, 0]  # confidences 0.9, 0.9, 0.8, 0.7
