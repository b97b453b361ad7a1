"""Worked examples for `openjev eval --examples`: solved cases drawn from the file's other items.

For each option of an item's question, the first other item of the same file (or of the files
named by `--examples-from`) that asks the same question (same type, instructions and options, a
choice's options in any order) and whose gold is that option becomes an example. The item itself
never does, so an option that no other item answers goes without one. A question with more
options than the server's default cap (32) gets examples for its first 32 options only.

`--examples-apart REGEX` keeps variants of one case apart: two items whose ids give the same match
(the first group of REGEX, or the whole match) never serve as each other's examples. In the
realistic-decision set a template has one item per option, written as near-identical variants;
without this, an item's siblings would show it every other option's answer on almost its own text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from openjev.contracts.systemone.wire import ChoiceQuestion, Question, SystemOneExample
from openjev.quality.dataset import EvalItem, answer_keys

MAX_EXAMPLES = 32  # the server's default cap per question (`max_examples` in GET /v1/limits)
_Key = tuple[bytes, str, str]  # the question without its examples, then the gold's type and value


def _question_key(question: Question) -> bytes:
    """The question without its examples; a choice's options in name order (an example names its answer)."""
    bare = msgspec.structs.replace(question, x_examples=None)
    if isinstance(bare, ChoiceQuestion):
        bare = msgspec.structs.replace(bare, criteria=dict(sorted(bare.criteria.items())))
    return msgspec.json.encode(bare)


def _gold_key(question: bytes, gold: object) -> _Key:
    return question, type(gold).__name__, repr(gold)


class ExamplePool:
    """Solved items, indexed by question and gold answer: the file's own, and any `--examples-from` file's."""

    def __init__(self, items: Sequence[EvalItem], apart: re.Pattern[str] | None = None) -> None:
        self.items = list(items)
        self.apart = apart
        self.families = [self._family(item) for item in self.items]  # found once, not per candidate
        self.by_answer: dict[_Key, list[int]] = {}
        for i, item in enumerate(self.items):
            key = _gold_key(_question_key(item.question), item.gold)
            self.by_answer.setdefault(key, []).append(i)

    def question_for(self, item: EvalItem) -> Question:
        """`item`'s question with one solved example per option that another item answers.

        Another item: any with a different state, so the item never sees itself even when a pool
        file holds it too (a subset evaluated against its whole set), and of another case family
        when the pool keeps families apart.
        """
        question = _question_key(item.question)
        family = self._family(item)
        examples = list(item.question.x_examples or ())
        for option in answer_keys(item.question):
            found = self.by_answer.get(_gold_key(question, option), [])
            others = [
                j for j in found if self.items[j].state != item.state and (family is None or self.families[j] != family)
            ]
            if others and len(examples) < MAX_EXAMPLES:
                examples.append(SystemOneExample(state=self.items[others[0]].state, answer=option))
        return msgspec.structs.replace(item.question, x_examples=examples or None)

    def _family(self, item: EvalItem) -> str | None:
        """The case family `apart` finds in the item's id; None (no family) without a match or an id."""
        if self.apart is None or item.id is None:
            return None
        found = self.apart.search(item.id)
        if found is None:
            return None
        return found.group(1) if found.re.groups else found.group(0)
