"""Single-token answer labels, verified against the active tokenizer at start-up.

See docs/spec.md#how-an-answer-is-computed.

The assistant turn ends with `Answer:`; the label is the next token, written with its leading
space (" A"). A label is usable only if appending it to that exact context adds exactly one token
and leaves every earlier token unchanged. Numbers such as 10 or 64 are never candidates.
"""

from __future__ import annotations

import string
from collections.abc import Iterator

import msgspec

from openjev.domain.errors import StartupError
from openjev.domain.ports import ChatMessage, PromptCodec

ANSWER_OPENING = "Answer:"
YES, NO = "Yes", "No"
_PROBE_QUESTION = "Question: Which option fits best?\nA) One\nB) Two\nAnswer with the letter of the best option."


def candidate_labels() -> Iterator[str]:
    """A..Z, then AA, AB, … ZZ: the order labels are offered in."""
    letters = string.ascii_uppercase
    yield from letters
    for first in letters:
        for second in letters:
            yield first + second


class LabelSet(msgspec.Struct, frozen=True):
    """Verified labels and their token ids, in offering order, plus the yes/no pair."""

    labels: tuple[str, ...]
    token_ids: tuple[int, ...]
    yes_id: int
    no_id: int

    @property
    def capacity(self) -> int:
        return len(self.labels)


def label_context(codec: PromptCodec) -> str:
    """The text the label follows in a real prompt: a rendered question turn, then `Answer:`."""
    return codec.render([ChatMessage(role="user", content=_PROBE_QUESTION)]) + ANSWER_OPENING


def single_token_id(codec: PromptCodec, context: str, base: list[int], label: str) -> int | None:
    """The label's token id if it is exactly one token after `context` and merges with nothing."""
    ids = codec.encode_template(context + " " + label)
    if len(ids) == len(base) + 1 and ids[: len(base)] == base:
        return ids[-1]
    return None


class TooFewLabels(StartupError):
    """The tokenizer has fewer single-token labels than the option limit needs (the caller names the setting)."""

    def __init__(self, supported: int, wanted: int) -> None:
        super().__init__(
            f"the model's tokenizer supports only {supported} single-token answer labels, but {wanted} options "
            f"need {wanted}"
        )
        self.supported = supported
        self.wanted = wanted


def verify_labels(codec: PromptCodec, count: int) -> LabelSet:
    """The first `count` labels that are single tokens; StartupError (TooFewLabels: what the model supports) if not."""
    context = label_context(codec)
    base = codec.encode_template(context)
    yes_id = single_token_id(codec, context, base, YES)
    no_id = single_token_id(codec, context, base, NO)
    if yes_id is None or no_id is None or yes_id == no_id:
        raise StartupError(
            f"the model's tokenizer cannot write ' {YES}' and ' {NO}' as single tokens after `{ANSWER_OPENING}`"
        )
    labels: list[str] = []
    ids: list[int] = []
    for label in candidate_labels():
        token = single_token_id(codec, context, base, label)
        if token is not None and token not in ids and token not in (yes_id, no_id):
            labels.append(label)
            ids.append(token)
            if len(labels) == count:
                return LabelSet(labels=tuple(labels), token_ids=tuple(ids), yes_id=yes_id, no_id=no_id)
    raise TooFewLabels(len(labels), count)
