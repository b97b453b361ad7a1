"""Labelled items for `openjev eval`: one JSON object per line with a state, a question and its gold answer."""

from __future__ import annotations

from pathlib import Path

import msgspec

from openjev.contracts.systemone.wire import Question, TextValue
from openjev.domain.decision import OptionKey


class EvalItem(msgspec.Struct, frozen=True):
    """`gold` is an option name (choice), true/false (noul) or a 0-based level (score).

    Items that share a `pair` id are a contrastive pair: near-identical cases that differ in one decisive
    detail and so have different right answers. Reading surface words gets one half right at most, so
    the share of pairs right on every half says what accuracy alone cannot.
    """

    state: TextValue
    question: Question
    gold: str | bool | int
    id: str | None = None
    dataset: str | None = None
    pair: str | None = None


class DatasetError(ValueError):
    """A file that is not a valid labelled set: says which file, which line and why."""


def answer_keys(question: Question) -> list[OptionKey]:
    """The question's options as a gold answer names them: True/False, option names, 0-based levels."""
    return [option.key for option in question.ask(()).options]


def answer_names(question: Question) -> list[str]:
    """The answers a prediction ranges over, in the order the server reports them."""
    return [str(key).lower() if isinstance(key, bool) else str(key) for key in answer_keys(question)]


def gold_index(item: EvalItem) -> int:
    """Where the gold answer sits among `answer_names`; ValueError when it is not one of them.

    Keys and gold compare with their types: `true` is no level and `1` no yes.
    """
    keys = answer_keys(item.question)
    for index, key in enumerate(keys):
        if type(key) is type(item.gold) and key == item.gold:
            return index
    shown = keys if len(keys) <= 10 else [*keys[:10], "…"]
    raise ValueError(f"gold {item.gold!r} is not one of the answers {shown} of this {item.question.kind} question")


def load_items(path: Path) -> list[EvalItem]:
    decoder = msgspec.json.Decoder(EvalItem)
    items: list[EvalItem] = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = decoder.decode(line)
            gold_index(item)
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError) as exc:
            raise DatasetError(f"{path}, line {number}: {exc}") from None
        items.append(item)
    if not items:
        raise DatasetError(f"{path}: no items")
    return items
