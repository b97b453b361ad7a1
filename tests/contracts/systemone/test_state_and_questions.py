"""How System One states and questions read to the model: transcripts, data, options, levels."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.contracts.systemone.parsing import state_of
from openjev.contracts.systemone.wire import ChoiceQuestion, NoulCriteria, NoulQuestion, ScoreQuestion
from openjev.domain.errors import InvalidRequest
from openjev.domain.labels import verify_labels
from openjev.domain.ports import ChatMessage
from openjev.domain.prompt import question_text
from openjev.domain.state import DATA_FRAME, state_messages

CODEC = ChatMLByteCodec()
LABELS = verify_labels(CODEC, 64)
SYSTEM = {"role": "system", "content": "You are a support assistant."}
USER = {"role": "user", "content": "I was charged twice."}


def message(sent: dict[str, str]) -> ChatMessage:
    return ChatMessage(role=sent["role"], content=sent["content"])


def user_data(value: Any) -> list[ChatMessage]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return [ChatMessage(role="user", content=DATA_FRAME.format(text=text))]


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("plain text", user_data("plain text")),
        ({"ticket": 7, "body": "é"}, user_data({"ticket": 7, "body": "é"})),
        ([SYSTEM, USER], [message(SYSTEM), message(USER)]),
        ({"messages": [USER]}, [message(USER)]),
        # `messages` beside other fields: nothing may be dropped, so the whole object is data.
        ({"messages": [USER], "customer": "vip"}, user_data({"messages": [USER], "customer": "vip"})),
        # Arrays that are not messages go whole into one user message.
        ([1, 2, 3], user_data([1, 2, 3])),
        ([{"role": "robot", "content": "x"}], user_data([{"role": "robot", "content": "x"}])),
        ([{"role": "user", "content": "x", "extra": 1}], user_data([{"role": "user", "content": "x", "extra": 1}])),
        ([], user_data([])),
        ({}, user_data({})),
        ({"messages": []}, user_data({"messages": []})),
        (
            [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            [ChatMessage(role="user", content="a\nb")],
        ),
    ],
)
def test_state_rendering_rules(state: Any, expected: list[ChatMessage]) -> None:
    assert state_messages(state_of(state)) == expected


@pytest.mark.parametrize("kind", ["image_url", "image", "input_audio", "video"])
def test_non_text_content_parts_are_refused(kind: str) -> None:
    state = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": kind, kind: {}}]}]
    with pytest.raises(InvalidRequest) as info:
        state_of(state)
    issue = info.value.issues[0]
    assert issue.loc == ("body", "state", 0, "content", 1)
    assert "only text is supported" in issue.msg


def test_choice_shows_descriptions_under_labels_and_names_only_when_null() -> None:
    question = ChoiceQuestion(criteria={"billing": "Payments and refunds", "sales_team": None}, instructions="Who?")
    text = question_text(question.ask(()), LABELS)
    assert "A) Payments and refunds" in text
    assert "B) sales_team" in text
    assert "billing" not in text
    assert text.startswith(" Who?\n")


def test_score_lists_levels_in_order_and_json_descriptions() -> None:
    question = ScoreQuestion(criteria=["Calm", {"level": "angry"}], instructions={"task": "rate `tone`"})
    text = question_text(question.ask(()), LABELS)
    assert text.index("A) Calm") < text.index('B) {"level": "angry"}')
    assert text.startswith(' {"task": "rate `tone`"}\n')
    assert "lowest to highest" in text


def test_noul_criteria_may_be_one_sided() -> None:
    text = question_text(NoulQuestion(criteria=NoulCriteria(true="Unsolicited advertising")).ask(()), LABELS)
    assert "Yes means: Unsolicited advertising" in text
    assert "No means" not in text
    assert "Answer with Yes or No." in text
