"""The System One wire types, matching the TypeSafe schema (docs/spec.md#the-request, #the-response).

Decoding is strict (no "5" for 5); unknown top-level fields are ignored, unknown fields inside a
question are refused so a misspelt `critera` is never silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from openjev.domain.debiasing import DebiasMode

TextValue = str | dict[str, Any] | list[Any]
"""A text value: a string, a JSON object or a JSON array."""

_TEXT_DOC = "A string, a JSON object or a JSON array."


class NoulCriteria(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Optional descriptions of what yes (`true`) and no (`false`) mean; one-sided is fine."""

    true: TextValue | None = None
    false: TextValue | None = None


class NoulQuestion(msgspec.Struct, tag_field="type", tag="noul", forbid_unknown_fields=True, omit_defaults=True):
    """A yes/no question; answered with the probability of yes."""

    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(msgspec.Struct, tag_field="type", tag="choice", forbid_unknown_fields=True, omit_defaults=True):
    """Pick one option; `criteria` maps each option name to its description (or null)."""

    criteria: Annotated[
        dict[str, TextValue | None],
        msgspec.Meta(description="Option name -> description (null: the name alone carries the meaning)."),
    ]
    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None


class ScoreQuestion(msgspec.Struct, tag_field="type", tag="score", forbid_unknown_fields=True, omit_defaults=True):
    """Rate on ordered levels; `criteria[i]` describes level i (0-based)."""

    criteria: Annotated[list[TextValue], msgspec.Meta(description="Ordered level descriptions, level 0 first.")]
    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None


Question = NoulQuestion | ChoiceQuestion | ScoreQuestion


class SystemOneRequest(msgspec.Struct):
    """POST /v1/systemone."""

    model: Annotated[str, msgspec.Meta(examples=["jev-latest"])]
    state: Annotated[TextValue, msgspec.Meta(description="The text, JSON value or chat transcript to judge.")]
    questions: Annotated[dict[str, Question], msgspec.Meta(description="Question id -> question (1 to 64).")]
    assets: Annotated[Any, msgspec.Meta(description="Not supported: only text input is accepted.")] = None
    x_debias: Annotated[
        DebiasMode | None,
        msgspec.Meta(
            description=(
                "openjev extension: bias removal for this request (none, rotate, calibrate, rotate+calibrate); "
                "the server's OPENJEV_DEBIAS when absent. See docs/quality.md."
            )
        ),
    ] = None


class NoulAnswer(msgspec.Struct, tag_field="type", tag="noul"):
    noul: float


class ChoiceAnswer(msgspec.Struct, tag_field="type", tag="choice"):
    choice: str
    confidence: float
    probabilities: dict[str, float]


class ScoreAnswer(msgspec.Struct, tag_field="type", tag="score"):
    score: float
    confidence: float
    legend: dict[str, TextValue]
    probabilities: dict[str, float]


Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer


class Usage(msgspec.Struct):
    """Backend work: prompt tokens of the warm-up and every branch (cached included); N + 1 outputs."""

    input_tokens: int
    output_tokens: int


class SystemOneResponse(msgspec.Struct):
    model: str
    answers: dict[str, Answer]
    usage: Usage
