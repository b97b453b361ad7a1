"""Worked examples for `openjev eval --examples`: solved cases drawn from the file's other items.

For each option of an item's question, the first other item of the same file that asks the same
question (same type, instructions and options) and whose gold is that option becomes an example.
The item itself never does, so an option no other item answers goes without an example: in the
realistic-decision set, where a template has one item per option, every item gets the examples of
all options but its own gold one.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from openjev.contracts.systemone.wire import Question, SolvedExample
from openjev.quality.dataset import EvalItem, answer_keys

_Key = tuple[bytes, str, str]  # the question without its examples, then the gold's type and value


def _question_key(question: Question) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(question, x_examples=None))


def _gold_key(question: bytes, gold: object) -> _Key:
    return question, type(gold).__name__, repr(gold)


class ExamplePool:
    """The items of one file, indexed by question and gold answer."""

    def __init__(self, items: Sequence[EvalItem]) -> None:
        self.items = list(items)
        self.by_answer: dict[_Key, list[int]] = {}
        for i, item in enumerate(self.items):
            key = _gold_key(_question_key(item.question), item.gold)
            self.by_answer.setdefault(key, []).append(i)

    def question_for(self, index: int) -> Question:
        """Item `index`'s question with one solved example per option that another item answers."""
        item = self.items[index]
        question = _question_key(item.question)
        examples = list(item.question.x_examples or ())
        for option in answer_keys(item.question):
            others = [j for j in self.by_answer.get(_gold_key(question, option), []) if j != index]
            if others:
                examples.append(SolvedExample(state=self.items[others[0]].state, answer=option))
        return msgspec.structs.replace(item.question, x_examples=examples or None)
