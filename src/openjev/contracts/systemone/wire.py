"""The System One wire types, matching the TypeSafe schema, and what each question kind means in the core.

Decoding is strict (no "5" for 5); unknown top-level fields are ignored, unknown fields inside a
question are refused so a misspelt `critera` is never silently dropped. Each question type says,
in one place, which kind of ask it is (`ask`), which JSON values it carries (`text_values`) and how
the core's answer reads on this wire (`answer`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, ClassVar

import msgspec

from openjev.contracts.extensions import optional
from openjev.domain.debiasing import DebiasMode
from openjev.domain.decision import Ask, AskKind, Loc
from openjev.domain.kinds import CHOICE, SCALE, YES_NO
from openjev.domain.outcome import Distribution
from openjev.domain.state import as_text

TextValue = str | dict[str, Any] | list[Any]
"""A text value: a string, a JSON object or a JSON array."""

_TEXT_DOC = "A string, a JSON object or a JSON array."


def _text(value: TextValue | None) -> str | None:
    return None if value is None else as_text(value)


class SystemOneExample(msgspec.Struct, forbid_unknown_fields=True):
    """openjev extension: a solved case shown to the model before the state (docs/api.md#worked-examples)."""

    state: Annotated[TextValue, msgspec.Meta(description="The case: a text, JSON value or chat transcript.")]
    answer: Annotated[
        bool | str | int,
        msgspec.Meta(
            description="Its right answer: true/false (noul), an option name (choice), a 0-based level (score)."
        ),
    ]


Examples = Annotated[
    list[SystemOneExample] | None,
    msgspec.Meta(description="openjev extension: solved cases for this question (see docs/api.md#worked-examples)."),
]


def _example_values(examples: list[SystemOneExample] | None, where: Loc) -> Iterator[tuple[Loc, Any]]:
    for j, example in enumerate(examples or ()):
        yield (*where, "x_examples", j, "state"), example.state


class NoulCriteria(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Optional descriptions of what yes (`true`) and no (`false`) mean; one-sided is fine."""

    true: TextValue | None = None
    false: TextValue | None = None


class NoulQuestion(msgspec.Struct, tag_field="type", tag="noul", forbid_unknown_fields=True, omit_defaults=True):
    """A yes/no question; answered with the probability of yes."""

    kind: ClassVar[AskKind] = "yes_no"
    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None
    criteria: NoulCriteria | None = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return 2

    def ask(self, where: Loc) -> Ask:
        criteria = self.criteria or NoulCriteria()
        return YES_NO.ask(_text(self.instructions), _text(criteria.true), _text(criteria.false), where)

    def text_values(self, where: Loc) -> Iterator[tuple[Loc, Any]]:
        yield (*where, "instructions"), self.instructions
        if self.criteria is not None:
            yield (*where, "criteria", "true"), self.criteria.true
            yield (*where, "criteria", "false"), self.criteria.false
        yield from _example_values(self.x_examples, where)

    def answer(self, result: Distribution) -> NoulAnswer:
        return NoulAnswer(noul=result.probabilities[0], x_label_mass=optional(result.label_mass))


class ChoiceQuestion(msgspec.Struct, tag_field="type", tag="choice", forbid_unknown_fields=True, omit_defaults=True):
    """Pick one option; `criteria` maps each option name to its description (or null)."""

    kind: ClassVar[AskKind] = "choice"
    criteria: Annotated[
        dict[str, TextValue | None],
        msgspec.Meta(description="Option name -> description (null: the name alone carries the meaning)."),
    ]
    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return len(self.criteria)

    def ask(self, where: Loc) -> Ask:
        """A null description stays null: openjev's layout shows the option's name instead (the only case
        where a name reaches the model), a decision model's own template decides for itself."""
        options = [(name, None if text is None else as_text(text)) for name, text in self.criteria.items()]
        return CHOICE.ask(_text(self.instructions), options, where)

    def text_values(self, where: Loc) -> Iterator[tuple[Loc, Any]]:
        yield (*where, "instructions"), self.instructions
        for name, text in self.criteria.items():
            yield (*where, "criteria", name), text
        yield from _example_values(self.x_examples, where)

    def answer(self, result: Distribution) -> ChoiceAnswer:
        names = list(self.criteria)
        return ChoiceAnswer(
            choice=names[result.chosen],
            confidence=result.confidence or 0.0,
            probabilities=dict(zip(names, result.probabilities, strict=True)),
            x_label_mass=optional(result.label_mass),
        )


class ScoreQuestion(msgspec.Struct, tag_field="type", tag="score", forbid_unknown_fields=True, omit_defaults=True):
    """Rate on ordered levels; `criteria[i]` describes level i (0-based)."""

    kind: ClassVar[AskKind] = "scale"
    criteria: Annotated[list[TextValue], msgspec.Meta(description="Ordered level descriptions, level 0 first.")]
    instructions: Annotated[TextValue | None, msgspec.Meta(description=_TEXT_DOC)] = None
    x_examples: Examples = None

    @property
    def option_count(self) -> int:
        return len(self.criteria)

    def ask(self, where: Loc) -> Ask:
        return SCALE.ask(_text(self.instructions), [as_text(text) for text in self.criteria], where)

    def text_values(self, where: Loc) -> Iterator[tuple[Loc, Any]]:
        yield (*where, "instructions"), self.instructions
        for i, text in enumerate(self.criteria):
            yield (*where, "criteria", i), text
        yield from _example_values(self.x_examples, where)

    def answer(self, result: Distribution) -> ScoreAnswer:
        keys = [str(i) for i in range(len(self.criteria))]
        return ScoreAnswer(
            score=result.expected or 0.0,
            confidence=result.confidence or 0.0,
            legend=dict(zip(keys, self.criteria, strict=True)),
            probabilities=dict(zip(keys, result.probabilities, strict=True)),
            x_label_mass=optional(result.label_mass),
        )


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
                "openjev extension: bias removal for this request (none, reverse, rotate, calibrate, "
                "rotate+calibrate, fit, reverse+fit, rotate+fit); the server's OPENJEV_DEBIAS when absent. "
                "See docs/quality.md."
            )
        ),
    ] = None
    x_label_mass: Annotated[
        bool,
        msgspec.Meta(
            description=(
                "openjev extension: report each answer's `x_label_mass`, the share of the model's next-token "
                "probability that fell on the answer labels (1: it wanted to say nothing else)."
            )
        ),
    ] = False


class NoulAnswer(msgspec.Struct, tag_field="type", tag="noul"):
    noul: float
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


class ChoiceAnswer(msgspec.Struct, tag_field="type", tag="choice"):
    choice: str
    confidence: float
    probabilities: dict[str, float]
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


class ScoreAnswer(msgspec.Struct, tag_field="type", tag="score"):
    score: float
    confidence: float
    legend: dict[str, TextValue]
    probabilities: dict[str, float]
    x_label_mass: float | msgspec.UnsetType = msgspec.UNSET


Answer = NoulAnswer | ChoiceAnswer | ScoreAnswer


class Usage(msgspec.Struct):
    """Backend work: prompt tokens of the warm-up and every branch (cached included); N + 1 outputs."""

    input_tokens: int
    output_tokens: int


class SystemOneResponse(msgspec.Struct):
    model: str
    answers: dict[str, Answer]
    usage: Usage
