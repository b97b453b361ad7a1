"""`openjev eval --examples`: each option's example comes from another item asking the same question."""

from __future__ import annotations

import re

from openjev.contracts.systemone.wire import ChoiceQuestion, NoulQuestion, SystemOneExample
from openjev.quality.dataset import EvalItem
from openjev.quality.examples import ExamplePool

TEAM = ChoiceQuestion(instructions="Team?", criteria={"billing": "Payments", "tech": "Bugs", "sales": None})
OTHER = ChoiceQuestion(instructions="Which desk?", criteria={"billing": "Payments", "tech": "Bugs", "sales": None})


def test_each_option_gets_the_first_other_item_with_that_answer_and_never_the_item_itself() -> None:
    items = [
        EvalItem(state="refund me", question=TEAM, gold="billing"),
        EvalItem(state="it crashes", question=TEAM, gold="tech"),
        EvalItem(state="charged twice", question=TEAM, gold="billing"),
        EvalItem(state="buy more seats", question=OTHER, gold="sales"),  # another question: never an example
    ]
    pool = ExamplePool(items)
    assert pool.question_for(items[0]).x_examples == [  # in option order
        SystemOneExample(state="charged twice", answer="billing"),
        SystemOneExample(state="it crashes", answer="tech"),
    ]
    first = pool.question_for(items[2]).x_examples
    assert first is not None and first[0] == SystemOneExample(state="refund me", answer="billing")
    assert pool.question_for(items[3]).x_examples is None  # no other item asks it


def test_answers_match_with_their_types_and_examples_an_item_carries_are_kept() -> None:
    question = NoulQuestion(instructions="Urgent?", x_examples=[SystemOneExample(state="fire!", answer=True)])
    items = [
        EvalItem(state="now", question=question, gold=True),
        EvalItem(state="whenever", question=question, gold=False),
    ]
    assert ExamplePool(items).question_for(items[0]).x_examples == [
        SystemOneExample(state="fire!", answer=True),
        SystemOneExample(state="whenever", answer=False),
    ]


def test_a_pool_that_holds_the_item_itself_never_shows_it() -> None:
    items = [
        EvalItem(state="refund me", question=TEAM, gold="billing"),
        EvalItem(state="bug", question=TEAM, gold="tech"),
    ]
    pool = ExamplePool([*items, *items])  # a subset evaluated against the whole set it came from
    assert pool.question_for(items[0]).x_examples == [SystemOneExample(state="bug", answer="tech")]


def test_items_of_one_case_family_never_serve_as_each_others_examples() -> None:
    items = [
        EvalItem(id="returns-t1-billing", state="refund me", question=TEAM, gold="billing"),
        EvalItem(id="returns-t1-tech", state="refund me, it crashes", question=TEAM, gold="tech"),
        EvalItem(id="returns-t2-billing", state="charged twice", question=TEAM, gold="billing"),
        EvalItem(id="returns-t2-tech", state="charged twice, it crashes", question=TEAM, gold="tech"),
        EvalItem(state="no id, so no family", question=TEAM, gold="sales"),
    ]
    pool = ExamplePool(items, re.compile(r"^(.*-t\d+)-"))
    assert pool.question_for(items[0]).x_examples == [  # the other template's variants, never its sibling
        SystemOneExample(state="charged twice", answer="billing"),
        SystemOneExample(state="charged twice, it crashes", answer="tech"),
        SystemOneExample(state="no id, so no family", answer="sales"),
    ]
    whole = ExamplePool(items, re.compile(r"-t\d+-"))  # no group: the whole match is the family
    assert whole.question_for(items[1]).x_examples == pool.question_for(items[1]).x_examples
    last = pool.question_for(items[4]).x_examples
    assert last is not None and [e.answer for e in last] == ["billing", "tech"]  # an item without id has no family


def test_a_choice_asked_with_its_options_in_another_order_is_the_same_question() -> None:
    shuffled = ChoiceQuestion(instructions="Team?", criteria={"sales": None, "tech": "Bugs", "billing": "Payments"})
    items = [
        EvalItem(state="refund me", question=TEAM, gold="billing"),
        EvalItem(state="more seats", question=shuffled, gold="sales"),
    ]
    examples = ExamplePool(items).question_for(items[0]).x_examples
    assert examples == [SystemOneExample(state="more seats", answer="sales")]
    asked = ExamplePool(items).question_for(items[1])
    assert isinstance(asked, ChoiceQuestion) and list(asked.criteria) == [
        "sales",
        "tech",
        "billing",
    ]  # the item's own order is what is sent
    assert asked.x_examples == [SystemOneExample(state="refund me", answer="billing")]
