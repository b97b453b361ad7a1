from __future__ import annotations

import math

import pytest

from openjev.contracts.systemone.wire import (
    Answer,
    ChoiceAnswer,
    ChoiceQuestion,
    NoulAnswer,
    NoulQuestion,
    Question,
    ScoreAnswer,
    ScoreQuestion,
    TextValue,
)
from openjev.domain.kinds import KINDS
from openjev.domain.scoring_math import ConfidenceFormula


def make_answer(
    question: Question, logprobs: list[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
) -> Answer:
    """The question's kind builds the distribution; System One writes it as its answer."""
    result = KINDS[question.kind].answer(logprobs, temperature=temperature, confidence=confidence)
    return question.answer(result)


def test_noul_is_the_normalised_probability_of_yes() -> None:
    answer = make_answer(NoulQuestion(), [math.log(0.3), math.log(0.1)])
    assert isinstance(answer, NoulAnswer)
    assert answer.noul == pytest.approx(0.75)


def test_choice_keeps_exact_option_names_and_picks_the_argmax() -> None:
    names: dict[str, TextValue | None] = {"Ünïcode ✓": None, "billing": "x", " spaced ": None}
    answer = make_answer(ChoiceQuestion(criteria=names), [-2.0, -0.1, -3.0])
    assert isinstance(answer, ChoiceAnswer)
    assert answer.choice == "billing"
    assert list(answer.probabilities) == list(names)
    assert math.fsum(answer.probabilities.values()) == pytest.approx(1.0, abs=1e-12)


def test_score_is_the_expected_level_with_legend() -> None:
    levels: list[TextValue] = ["Routine", {"k": "Urgent"}, "Emergency"]
    answer = make_answer(ScoreQuestion(criteria=levels), [math.log(0.2), math.log(0.5), math.log(0.3)])
    assert isinstance(answer, ScoreAnswer)
    assert answer.legend == {"0": "Routine", "1": {"k": "Urgent"}, "2": "Emergency"}
    assert answer.probabilities == pytest.approx({"0": 0.2, "1": 0.5, "2": 0.3})
    assert answer.score == pytest.approx(0.5 + 2 * 0.3)


def test_temperature_and_confidence_formula_are_applied() -> None:
    question = ChoiceQuestion(criteria={"a": None, "b": None})
    sharp = make_answer(question, [0.0, -1.0], temperature=0.5, confidence="typesafe")
    assert isinstance(sharp, ChoiceAnswer)
    p = 1 / (1 + math.exp(-2.0))
    assert sharp.probabilities["a"] == pytest.approx(p)
    assert sharp.confidence == pytest.approx((p - 0.5) / 0.5)
