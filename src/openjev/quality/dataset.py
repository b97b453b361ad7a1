"""Labelled items for `openjev eval`: one JSON object per line with a state, a question and its gold answer."""

from __future__ import annotations

from pathlib import Path

import msgspec

from openjev.domain.wire import ChoiceQuestion, NoulQuestion, Question, ScoreQuestion, TextValue


class EvalItem(msgspec.Struct, frozen=True):
    """`gold` is an option name (choice), true/false (noul) or a 0-based level (score)."""

    state: TextValue
    question: Question
    gold: str | bool | int
    id: str | None = None
    dataset: str | None = None


class DatasetError(ValueError):
    """A file that is not a valid labelled set: says which file, which line and why."""


def answer_names(question: Question) -> list[str]:
    """The answers a prediction ranges over, in the order the server reports them."""
    if isinstance(question, NoulQuestion):
        return ["true", "false"]
    if isinstance(question, ChoiceQuestion):
        return list(question.criteria)
    return [str(i) for i in range(len(question.criteria))]


def gold_index(item: EvalItem) -> int:
    """Where the gold answer sits among `answer_names`; ValueError when it is not one of them."""
    question, gold = item.question, item.gold
    if isinstance(question, NoulQuestion):
        if not isinstance(gold, bool):
            raise ValueError(f"a noul question's gold must be true or false, got {gold!r}")
        return 0 if gold else 1
    if isinstance(question, ScoreQuestion):
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(question.criteria):
            raise ValueError(f"a score question's gold must be a level from 0 to {len(question.criteria) - 1}")
        return gold
    if not isinstance(gold, str) or gold not in question.criteria:
        raise ValueError(f"gold {gold!r} is not one of the options {list(question.criteria)}")
    return list(question.criteria).index(gold)


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
