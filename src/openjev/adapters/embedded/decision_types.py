"""The decision types a decision GGUF can declare, and each one's rules: the one place to read them.

A decision model's GGUF names its type in `<arch>.decision.type` and carries the template it was
trained on as `tokenizer.chat_template.systemone`; llama.cpp's own /v1/systemone server
(`tools/server/server-decision.cpp`) answers with it by the rules below, and openjev applies the same
rules (decision_prompt.py) so that the same file gives the same probabilities through either.

Types that read label tokens at the first answer position are served. Types that read hidden states
(at option markers or mask tokens) through a decision head of their own are refused at start: no
label token carries their answer, and only llama.cpp's server computes it.

A new type is one entry of `DECISION_TYPES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LabelRule = Literal["letters", "codes", "per_question"]
"""How a type's labels are chosen.

- `letters`: A…Z then a…z, the 52 bare letters, each one token (the template writes the letters itself).
- `codes`: A…Z then AA…ZZ, the ones that are one token, at most 255, handed to the template as
  each option's `label`.
- `per_question`: chosen for each question (lfm2-d1): a choice's own keys when they are single
  letters, else A, B, C… (or 00, 01… past 26 options), falling back on a pool of codes when one is
  not a single token; a score's level numbers; yes/no read on `yes`/`Yes`/`YES` and `no`/`No`/`NO`.
  A label is also read as ` X` (with a leading space) when that is one token: its best form counts.
"""

LLAMA_SERVER = "serve it with llama.cpp's own server (llama-server, POST /v1/systemone), which computes that"


@dataclass(frozen=True)
class DecisionType:
    """One decision type's rules. `refused`: why openjev cannot serve it (None: it is served).

    `noul_true_first`: a yes/no question's options are shown true then false (else false then true).
    `sorted_keys`: every object handed to the template has its keys sorted (the type was trained so).
    `lists_questions`: the template also gets every question of the request (`questions`).
    `reversed_choice`: a choice is asked twice, its options as sent and reversed, and the two
    answers' probabilities averaged (it cancels the type's preference for the first label).
    `noul_ratings`: a yes/no question is read on this many labels, a rating scale from 0 (certainly
    no) to the last (certainly yes) whose mean is the answer; 0 for a plain true/false reading.
    `temperature_buckets`: how the question's option count picks its temperature (`temperature_name`).
    `max_options`: the most options a question may have when the labels do not bound it.
    """

    name: str
    refused: str | None = None
    labels: LabelRule = "codes"
    noul_true_first: bool = False
    sorted_keys: bool = False
    lists_questions: bool = False
    reversed_choice: bool = False
    noul_ratings: int = 0
    temperature_buckets: Literal["counts", "sizes"] = "counts"
    max_options: int = 255

    @property
    def labels_in_template(self) -> bool:
        """Whether each option handed to the template carries its `label` (the letters type writes its own)."""
        return self.labels != "letters"


def temperature_name(kind: str, options: int, buckets: Literal["counts", "sizes"]) -> tuple[str, str]:
    """The metadata names of a question's temperature, the specific one first, then the kind's own.

    `kind` is the wire's question type (`noul`, `choice`, `score`); the buckets are the ones each
    type's temperatures were fitted on: `sizes` (lev) small ≤ 8 < mid ≤ 26 < large, `counts`
    2, 3_5, 6_10, 11 (and more).
    """
    if buckets == "sizes":
        bucket = "small" if options <= 8 else "mid" if options <= 26 else "large"
    else:
        bucket = "2" if options <= 2 else "3_5" if options <= 5 else "6_10" if options <= 10 else "11"
    return f"{kind}.{bucket}", kind


MAX_SCORE_LEVELS = 10  # llama.cpp's /v1/systemone takes 2 to 10 levels, whatever the type

DECISION_TYPES: dict[str, DecisionType] = {
    t.name: t
    for t in (
        DecisionType("openjev", labels="letters", noul_true_first=True, max_options=52),
        DecisionType("lev", sorted_keys=True, reversed_choice=True, noul_ratings=9, temperature_buckets="sizes"),
        DecisionType("nimble", lists_questions=True),
        DecisionType("pplx-decider"),
        DecisionType("lfm2-d1", labels="per_question", noul_true_first=True),
        DecisionType(
            "clef",
            refused="it scores every question's and option's span of one joint prompt through its own decision "
            "head (llama.cpp's `clef` architecture), not through label tokens",
        ),
        DecisionType(
            "kev",
            refused="it reads the hidden state at the token that ends each option (`<|box_end|>`) through its own "
            "scoring head, not label tokens",
        ),
        DecisionType(
            "laya",
            refused="it is an encoder that reads the hidden states at its mask tokens, one per option, through a "
            "decision head, not label tokens",
        ),
        DecisionType(
            "lfm2-d1-omni",
            refused="it reads the hidden states at its mask tokens, one per option, through a decision head (and "
            "takes images and audio), not label tokens",
        ),
    )
}


def served_types() -> list[str]:
    return sorted(name for name, t in DECISION_TYPES.items() if t.refused is None)
