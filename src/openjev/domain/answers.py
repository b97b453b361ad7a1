"""Turn label log-probabilities into the typed answer the API returns (docs/spec.md#the-response)."""

from __future__ import annotations

from collections.abc import Sequence

from openjev.domain.scoring_math import (
    ConfidenceFormula,
    argmax,
    choice_confidence,
    expected_level,
    score_confidence,
    softmax,
)
from openjev.domain.wire import (
    Answer,
    ChoiceAnswer,
    NoulAnswer,
    NoulQuestion,
    Question,
    ScoreAnswer,
    ScoreQuestion,
)


def make_answer(
    question: Question,
    label_logprobs: Sequence[float],
    *,
    temperature: float = 1.0,
    confidence: ConfidenceFormula = "typesafe",
) -> Answer:
    """`label_logprobs` are in the question's label order: yes then no, or option/level order."""
    p = softmax(label_logprobs, temperature)
    if isinstance(question, NoulQuestion):
        return NoulAnswer(noul=p[0])
    if isinstance(question, ScoreQuestion):
        keys = [str(i) for i in range(len(p))]
        return ScoreAnswer(
            score=expected_level(p),
            confidence=score_confidence(p, confidence),
            legend=dict(zip(keys, question.criteria, strict=True)),
            probabilities=dict(zip(keys, p, strict=True)),
        )
    names = list(question.criteria)
    return ChoiceAnswer(
        choice=names[argmax(p)],
        confidence=choice_confidence(p, confidence),
        probabilities=dict(zip(names, p, strict=True)),
    )
