"""The three kinds of ask, one class each: how it is shown, which labels it is read with, whether bias
removal may rotate or calibrate it, how many options it takes, how its answer is built, and how an
ask of the kind is made (each factory enforces its kind's invariants).

- yes/no: the instructions, what each answer means when described, then `Answer with Yes or No.`;
  read on the ` Yes` and ` No` tokens. Calibrated (its prior can be divided out), never rotated.
- choice: the options' texts under the labels A, B, C… in the order shown; rotated and calibrated.
- scale: the levels, lowest first, under the labels; never rotated (reversing the levels would change
  their meaning) and not calibrated (measured not to help: docs/quality.md).

A new kind is a class here (and its entry in `KINDS`), plus each contract's question type for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from openjev.domain.decision import Ask, AskKind, Loc, Option, OptionKey
from openjev.domain.errors import Issue
from openjev.domain.labels import NO, YES, LabelSet
from openjev.domain.limits import Limits
from openjev.domain.outcome import Distribution
from openjev.domain.scoring_math import (
    ConfidenceFormula,
    argmax,
    choice_confidence,
    expected_level,
    score_confidence,
    softmax,
)


class KindRules(ABC):
    """What differs between kinds. `noun` names a kind's options in messages ("options", "levels")."""

    kind: ClassVar[AskKind]
    default_instructions: ClassVar[str]
    rotatable: ClassVar[bool]
    calibratable: ClassVar[bool]
    noun: ClassVar[str | None] = None  # None: the options are fixed (yes/no), there is no count to check

    @abstractmethod
    def question_text(self, ask: Ask, labels: LabelSet, order: Sequence[int] = ()) -> str:
        """The ask's own text after the shared `Question:` opening (so it starts with a space).

        Options are shown in `order` (original indices by position), as given when it is empty.
        """

    @abstractmethod
    def label_ids(self, ask: Ask, labels: LabelSet) -> tuple[int, ...]:
        """The token ids the answer is read on, in the ask's option order."""

    @abstractmethod
    def answer_text(self, ask: Ask, index: int) -> str:
        """Option `index` in words, as a worked example's answer shows it (never its label)."""

    @abstractmethod
    def answer(
        self, label_logprobs: Sequence[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
    ) -> Distribution:
        """The answer from label log-probabilities in the ask's option order."""

    def count_issue(self, count: int, limits: Limits, loc: Loc) -> Issue | None:
        """The issue with an ask of `count` options under `limits`, or None when the count is fine."""
        if self.noun is None or limits.min_options <= count <= limits.max_options:
            return None
        side = "too_many" if count > limits.max_options else "too_few"
        return Issue(
            loc,
            f"expected {limits.min_options} to {limits.max_options} {self.noun}, got {count}",
            f"{side}_{self.noun}",
        )

    def _instructions(self, ask: Ask) -> str:
        return " " + (self.default_instructions if ask.instructions is None else ask.instructions)


class YesNoKind(KindRules):
    kind = "yes_no"
    default_instructions = "Is the answer yes?"
    rotatable = False
    calibratable = True

    def ask(self, instructions: str | None, yes: str | None = None, no: str | None = None, where: Loc = ()) -> Ask:
        """A yes/no ask: its options are always yes (key True) then no (key False), each optionally described."""
        options = (Option(key=True, text=yes), Option(key=False, text=no))
        return Ask(kind=self.kind, instructions=instructions, options=options, where=where)

    def question_text(self, ask: Ask, labels: LabelSet, order: Sequence[int] = ()) -> str:
        yes, no = ask.options
        lines = [self._instructions(ask)]
        if yes.text is not None:
            lines.append(f"{YES} means: {yes.text}")
        if no.text is not None:
            lines.append(f"{NO} means: {no.text}")
        lines.append(f"Answer with {YES} or {NO}.")
        return "\n".join(lines)

    def label_ids(self, ask: Ask, labels: LabelSet) -> tuple[int, ...]:
        return (labels.yes_id, labels.no_id)

    def answer_text(self, ask: Ask, index: int) -> str:
        return YES if index == 0 else NO

    def answer(
        self, label_logprobs: Sequence[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
    ) -> Distribution:
        """Yes then no; no confidence for a yes/no answer."""
        p = softmax(label_logprobs, temperature)
        return Distribution(probabilities=tuple(p), chosen=argmax(p))


class _ListedKind(KindRules):
    """A kind whose options are listed under the labels A, B, C… (choice and scale)."""

    header: ClassVar[tuple[str, ...]] = ()
    option_noun: ClassVar[str]  # "the best option" / "the best level"

    def question_text(self, ask: Ask, labels: LabelSet, order: Sequence[int] = ()) -> str:
        texts = [self._shown(option) for option in ask.options]
        shown = [texts[i] for i in order] if order and self.rotatable else texts
        options = [f"{label}) {text}" for label, text in zip(labels.labels, shown, strict=False)]
        closing = f"Answer with the letter of the best {self.option_noun}."
        return "\n".join([self._instructions(ask), *self.header, *options, closing])

    def label_ids(self, ask: Ask, labels: LabelSet) -> tuple[int, ...]:
        return labels.token_ids[: len(ask.options)]

    def answer_text(self, ask: Ask, index: int) -> str:
        option = ask.options[index]
        return str(option.key) if option.text is None else option.text

    def _shown(self, option: Option) -> str:
        """An option's text under its label (a level without one shows nothing)."""
        return option.text or ""


class ChoiceKind(_ListedKind):
    kind = "choice"
    default_instructions = "Which option fits best?"
    rotatable = True
    calibratable = True
    noun = "options"
    option_noun = "option"

    def ask(self, instructions: str | None, options: Sequence[tuple[OptionKey, str | None]], where: Loc = ()) -> Ask:
        """A choice among `(key, text)` options, in the order given; keys are distinct (typed: `"1"` is not `1`)."""
        keys = [(type(key), key) for key, _ in options]
        if len(set(keys)) != len(keys):
            raise ValueError(f"a choice's options need distinct keys, got {[key for key, _ in options]}")
        chosen = tuple(Option(key=key, text=text) for key, text in options)
        return Ask(kind=self.kind, instructions=instructions, options=chosen, where=where)

    def _shown(self, option: Option) -> str:
        """An option without a description shows its key: the only case where a key reaches the model."""
        return str(option.key) if option.text is None else option.text

    def answer(
        self, label_logprobs: Sequence[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
    ) -> Distribution:
        p = softmax(label_logprobs, temperature)
        return Distribution(probabilities=tuple(p), chosen=argmax(p), confidence=choice_confidence(p, confidence))


class ScaleKind(_ListedKind):
    kind = "scale"
    default_instructions = "Which level fits best?"
    rotatable = False
    calibratable = False
    noun = "levels"
    header = ("Levels, from lowest to highest:",)
    option_noun = "level"

    def ask(self, instructions: str | None, levels: Sequence[str | None], where: Loc = ()) -> Ask:
        """A scale of `levels`, lowest first; a level's key is its index."""
        options = tuple(Option(key=i, text=text) for i, text in enumerate(levels))
        return Ask(kind=self.kind, instructions=instructions, options=options, where=where)

    def answer(
        self, label_logprobs: Sequence[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
    ) -> Distribution:
        """Also the expected level, Σ i·p_i."""
        p = softmax(label_logprobs, temperature)
        return Distribution(
            probabilities=tuple(p),
            chosen=argmax(p),
            confidence=score_confidence(p, confidence),
            expected=expected_level(p),
        )


YES_NO = YesNoKind()
CHOICE = ChoiceKind()
SCALE = ScaleKind()
KINDS: dict[AskKind, KindRules] = {rules.kind: rules for rules in (YES_NO, CHOICE, SCALE)}


def rules(ask: Ask) -> KindRules:
    return KINDS[ask.kind]
