"""Worked examples for `openjev eval --examples`: solved cases drawn from the file's other items.

For each option of an item's question, the first other item of the same file (or of the files
named by `--examples-from`) that asks the same question (same type, instructions and options) and
whose gold is that option becomes an example. The item itself never does, so an option that no
other item answers goes without one: in the realistic-decision set, where a template has one item
per option, every item gets the examples of all options but its own gold one. A question with more
options than the server's default cap (32) gets examples for its first 32 options only.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from openjev.contracts.systemone.wire import Question, SystemOneExample
from openjev.quality.dataset import EvalItem, answer_keys

MAX_EXAMPLES = 32  # the server's default cap per question (`max_examples` in GET /v1/limits)
_Key = tuple[bytes, str, str]  # the question without its examples, then the gold's type and value


def _question_key(question: Question) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(question, x_examples=None))


def _gold_key(question: bytes, gold: object) -> _Key:
    return question, type(gold).__name__, repr(gold)


class ExamplePool:
    """Solved items, indexed by question and gold answer: the file's own, and any `--examples-from` file's."""

    def __init__(self, items: Sequence[EvalItem]) -> None:
        self.items = list(items)
        self.by_answer: dict[_Key, list[int]] = {}
        for i, item in enumerate(self.items):
            key = _gold_key(_question_key(item.question), item.gold)
            self.by_answer.setdefault(key, []).append(i)

    def question_for(self, item: EvalItem) -> Question:
        """`item`'s question with one solved example per option that another item answers.

        Another item: any with a different state, so the item never sees itself even when a pool
        file holds it too (a subset evaluated against its whole set).
        """
        question = _question_key(item.question)
        examples = list(item.question.x_examples or ())
        for option in answer_keys(item.question):
            found = self.by_answer.get(_gold_key(question, option), [])
            others = [j for j in found if self.items[j].state != item.state]
            if others and len(examples) < MAX_EXAMPLES:
                examples.append(SystemOneExample(state=self.items[others[0]].state, answer=option))
        return msgspec.structs.replace(item.question, x_examples=examples or None)
