"""`x_examples` on both contracts: the same examples make the same decision; bad ones are refused where they sit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openjev.contracts import decisions, systemone
from openjev.contracts.decisions.errors import param_of
from openjev.domain.decision import Conversation, Document, Example
from openjev.domain.errors import InvalidRequest
from openjev.domain.limits import Limits
from openjev.domain.ports import ChatMessage

TRANSCRIPT = [{"role": "user", "content": "The app crashes on start."}]


def so_parse(questions: dict[str, Any]) -> systemone.Parsed:
    body = {"model": "m", "state": "My card was charged twice.", "questions": questions}
    return systemone.parse(json.dumps(body).encode(), Limits(max_examples=3), frozenset({"m"}))


def dec_parse(questions: list[Any]) -> decisions.Parsed:
    body = {"model": "m", "input": "My card was charged twice.", "questions": questions}
    return decisions.parse(json.dumps(body).encode(), Limits(max_examples=3), frozenset({"m"}))


def test_the_same_examples_make_the_same_decision_through_both_contracts() -> None:
    so = so_parse(
        {
            "refund": {
                "type": "noul",
                "instructions": "Refund?",
                "x_examples": [{"state": "Money back!", "answer": True}],
            },
            "team": {
                "type": "choice",
                "instructions": "Team?",
                "criteria": {"billing": "Payments", "tech": "Bugs"},
                "x_examples": [{"state": TRANSCRIPT, "answer": "tech"}, {"state": "Refund me", "answer": "billing"}],
            },
            "urgency": {
                "type": "score",
                "instructions": "How urgent?",
                "criteria": ["Low", "High"],
                "x_examples": [{"state": "Now!", "answer": 1}],
            },
        }
    )
    dec = dec_parse(
        [
            {"type": "predicate", "instructions": "Refund?", "x_examples": [{"input": "Money back!", "answer": True}]},
            {
                "type": "choice",
                "instructions": "Team?",
                "choices": [{"value": "billing", "description": "Payments"}, {"value": "tech", "description": "Bugs"}],
                "x_examples": [{"input": TRANSCRIPT, "answer": "tech"}, {"input": "Refund me", "answer": "billing"}],
            },
            {
                "type": "score",
                "instructions": "How urgent?",
                "levels": [{"label": "Low"}, {"label": "High"}],
                "x_examples": [{"input": "Now!", "answer": 1}],
            },
        ]
    )
    crash = Conversation(messages=(ChatMessage(role="user", content="The app crashes on start."),))
    assert so.decision.asks[1].examples == (Example(crash, 1), Example(Document("Refund me"), 0))
    assert [a.examples for a in so.decision.asks] == [a.examples for a in dec.decision.asks]
    assert [(a.kind, a.instructions, a.options) for a in so.decision.asks] == [
        (a.kind, a.instructions, a.options) for a in dec.decision.asks
    ]


@pytest.mark.parametrize(
    ("question", "loc", "fragment"),
    [
        (
            {"type": "noul", "x_examples": [{"state": "x", "answer": 1}]},
            0,
            "1 is none of this question's answers (true, false)",
        ),
        ({"type": "score", "criteria": ["a", "b"], "x_examples": [{"state": "x", "answer": True}]}, 0, "true is none"),
        ({"type": "score", "criteria": ["a", "b"], "x_examples": [{"state": "x", "answer": 2}]}, 0, "(0, 1)"),
        (
            {"type": "choice", "criteria": {"a": None, "1": None}, "x_examples": [{"state": "x", "answer": 1}]},
            0,
            '("a", "1")',
        ),
    ],
)
def test_an_answer_that_names_no_option_is_refused_at_its_place(question: Any, loc: int, fragment: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        so_parse({"q": question})
    (found,) = info.value.issues
    assert found.loc == ("body", "questions", "q", "x_examples", loc, "answer")
    assert fragment in found.msg and found.type == "invalid_example_answer"


def test_too_many_examples_and_a_bad_example_input_are_refused_on_the_decisions_route() -> None:
    many = [{"input": "x", "answer": True}] * 4
    with pytest.raises(InvalidRequest) as info:
        dec_parse([{"type": "predicate", "instructions": "Refund?", "x_examples": many}])
    assert param_of(info.value.issues[0].loc) == "questions[0].x_examples"
    assert "at most 3 examples" in info.value.issues[0].msg
    bad = [{"input": [{"role": "robot", "content": "x"}], "answer": True}]
    with pytest.raises(InvalidRequest) as info:
        dec_parse([{"type": "predicate", "instructions": "Refund?", "x_examples": bad}])
    assert param_of(info.value.issues[0].loc) == "questions[0].x_examples[0].input[0].role"


def test_an_unknown_field_in_an_example_is_refused() -> None:
    with pytest.raises(InvalidRequest) as info:
        so_parse({"q": {"type": "noul", "x_examples": [{"state": "x", "answer": True, "why": "y"}]}})
    assert "why" in info.value.issues[0].msg
