"""The three kinds of ask, each in one place: how it is shown, which labels it is read with, whether
bias removal may rotate or calibrate it, how many options it takes, and how its answer is built.

- yes/no: the instructions, what each answer means when described, then `Answer with Yes or No.`;
  read on the ` Yes` and ` No` tokens. Calibrated (its prior can be divided out), never rotated.
- choice: the options' texts under the labels A, B, C… in the order shown; rotated and calibrated.
- scale: the levels, lowest first, under the labels; never rotated (reversing the levels would change
  their meaning) and not calibrated (measured not to help: docs/quality.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openjev.domain.decision import Ask, AskKind, Loc
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


@dataclass(frozen=True)
class KindRules:
    """What differs between kinds. `noun` names a kind's options in messages ("options", "levels")."""

    kind: AskKind
    default_instructions: str
    rotatable: bool
    calibratable: bool
    noun: str | None = None  # None: the options are fixed (yes/no), there is no count to check

    def question_text(self, ask: Ask, labels: LabelSet, order: Sequence[int] = ()) -> str:
        """The ask's own text after the shared `Question:` opening (so it starts with a space).

        Options are shown in `order` (original indices by position), as given when it is empty.
        """
        instructions = " " + (self.default_instructions if ask.instructions is None else ask.instructions)
        if self.kind == "yes_no":
            yes, no = ask.options
            lines = [instructions]
            if yes.text is not None:
                lines.append(f"{YES} means: {yes.text}")
            if no.text is not None:
                lines.append(f"{NO} means: {no.text}")
            lines.append(f"Answer with {YES} or {NO}.")
            return "\n".join(lines)
        texts = [option.text or "" for option in ask.options]
        shown = [texts[i] for i in order] if order and self.rotatable else texts
        header = ["Levels, from lowest to highest:"] if self.kind == "scale" else []
        options = [f"{label}) {text}" for label, text in zip(labels.labels, shown, strict=False)]
        noun = "level" if self.kind == "scale" else "option"
        return "\n".join([instructions, *header, *options, f"Answer with the letter of the best {noun}."])

    def label_ids(self, ask: Ask, labels: LabelSet) -> tuple[int, ...]:
        if self.kind == "yes_no":
            return (labels.yes_id, labels.no_id)
        return labels.token_ids[: len(ask.options)]

    def answer(
        self, label_logprobs: Sequence[float], *, temperature: float = 1.0, confidence: ConfidenceFormula = "typesafe"
    ) -> Distribution:
        """The answer from label log-probabilities in the ask's option order (yes then no for yes/no)."""
        p = softmax(label_logprobs, temperature)
        if self.kind == "yes_no":
            return Distribution(probabilities=tuple(p), chosen=argmax(p))
        if self.kind == "scale":
            return Distribution(
                probabilities=tuple(p),
                chosen=argmax(p),
                confidence=score_confidence(p, confidence),
                expected=expected_level(p),
            )
        return Distribution(probabilities=tuple(p), chosen=argmax(p), confidence=choice_confidence(p, confidence))

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


KINDS: dict[AskKind, KindRules] = {
    "yes_no": KindRules("yes_no", "Is the answer yes?", rotatable=False, calibratable=True),
    "choice": KindRules("choice", "Which option fits best?", rotatable=True, calibratable=True, noun="options"),
    "scale": KindRules("scale", "Which level fits best?", rotatable=False, calibratable=False, noun="levels"),
}


def rules(ask: Ask) -> KindRules:
    return KINDS[ask.kind]
