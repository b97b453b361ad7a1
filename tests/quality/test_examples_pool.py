"""`openjev eval --examples`: each option's example comes from another item asking the same question."""

from __future__ import annotations

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
