"""Parsing a Decisions request: strict decoding, OpenAI-style locations, items, tool calls, limits."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openjev.contracts import decisions
from openjev.contracts.decisions.errors import error_body, param_of
from openjev.domain.decision import Conversation, Document, Option
from openjev.domain.errors import InvalidRequest, UnknownModel
from openjev.domain.limits import Limits
from openjev.domain.ports import ChatMessage, ToolCall

PREDICATE = {"type": "predicate", "instructions": "Is it urgent?"}
CHOICE = {
    "type": "choice",
    "instructions": "Team?",
    "choices": [{"value": "billing", "description": "Payments"}, {"value": "tech"}],
}


def parse(input: Any = "I was charged twice.", questions: Any = None, **extra: Any) -> decisions.Parsed:
    questions = [PREDICATE] if questions is None else questions
    body = {"model": "jev-latest", "input": input, "questions": questions, **extra}
    return decisions.parse(json.dumps(body).encode(), Limits(), frozenset({"served/model"}))


def issue(**kwargs: Any) -> tuple[str, str, str]:
    """(param, message, code) of the first issue of a refused request."""
    with pytest.raises(InvalidRequest) as info:
        parse(**kwargs)
    first = info.value.issues[0]
    return param_of(first.loc), first.msg, first.type


def test_a_text_input_is_a_document_and_each_kind_becomes_its_ask() -> None:
    score = {
        "type": "score",
        "name": "u",
        "instructions": [{"type": "input_text", "text": "How"}, {"type": "input_json", "data": {"k": 1}}],
        "levels": [{"label": "Low"}, {"label": "High", "description": "Today"}],
    }
    parsed = parse(questions=[PREDICATE, CHOICE, score])
    decision = parsed.decision
    assert decision.state == Document(text="I was charged twice.")
    yes_no, choice, scale = decision.asks
    assert (yes_no.kind, yes_no.options) == ("yes_no", (Option(key=True, text=None), Option(key=False, text=None)))
    assert choice.options == (Option(key="billing", text="Payments"), Option(key="tech", text="tech"))
    assert scale.instructions == 'How\n{"k": 1}'
    assert scale.options == (Option(key=0, text="Low"), Option(key=1, text="High: Today"))
    assert [a.where for a in decision.asks] == [("questions", 0), ("questions", 1), ("questions", 2)]
    assert decision.policy.refusals and decision.state_where == ("input",)


def test_choice_values_are_typed_and_a_boolean_reads_as_json() -> None:
    choices = [{"value": True}, {"value": "true"}, {"value": False, "description": "No"}]
    ask = parse(questions=[{"type": "choice", "instructions": "?", "choices": choices}]).decision.asks[0]
    assert [(o.key, o.text) for o in ask.options] == [(True, "true"), ("true", "true"), (False, "No")]


def test_a_repeated_choice_is_refused_but_a_string_and_a_boolean_are_two() -> None:
    choices = [{"value": "a"}, {"value": "b", "description": "x"}, {"value": "a", "description": "other"}]
    assert issue(questions=[{"type": "choice", "instructions": "?", "choices": choices}]) == (
        "questions[0].choices[2].value",
        "the choice 'a' is given twice",
        "duplicate_choice",
    )


@pytest.mark.parametrize(
    ("questions", "param", "code"),
    [
        ([], "questions", "too_few_questions"),
        ([PREDICATE] * 65, "questions", "too_many_questions"),
        ([{**CHOICE, "choices": [{"value": "x"}]}], "questions[0].choices", "too_few_options"),
        (
            [{"type": "score", "instructions": "?", "levels": [{"label": str(i)} for i in range(65)]}],
            "questions[0].levels",
            "too_many_levels",
        ),
        ([{**PREDICATE, "critera": 1}], "questions[0]", "unknown_parameter"),
        ([{"type": "predicate"}], "questions[0]", "missing_required_parameter"),
        ([{"type": "yes_no", "instructions": "?"}], "questions[0].type", "invalid_value"),
        ([{**CHOICE, "choices": [{"value": 5}, {"value": "b"}]}], "questions[0].choices[0].value", "invalid_type"),
    ],
)
def test_question_rules_name_the_offending_parameter(questions: Any, param: str, code: str) -> None:
    got_param, _, got_code = issue(questions=questions)
    assert (got_param, got_code) == (param, code)


def test_unknown_top_level_fields_are_ignored_and_the_openai_options_accepted() -> None:
    parsed = parse(
        temperature=0.3,
        safety_identifier="user-42",
        prompt_cache_key="tenant-7",
        prompt_cache_options={"mode": "explicit", "ttl": "30m"},
    )
    assert parsed.request.safety_identifier == "user-42"
    assert issue(safety_identifier="x" * 129)[0] == "safety_identifier"
    assert issue(prompt_cache_options={"mode": "sometimes"})[0] == "prompt_cache_options.mode"


def test_the_model_must_be_one_this_server_serves() -> None:
    assert parse(model="served/model").request.model == "served/model"
    with pytest.raises(UnknownModel, match="gpt-6-luna"):
        parse(model="gpt-6-luna")


def test_messages_keep_their_roles_developer_reads_as_system_and_parts_join() -> None:
    items = [
        {"role": "developer", "content": "Be strict."},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Policy v2"}]},
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "Order 7"}, {"type": "input_json", "data": [{"id": 7}]}],
        },
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking."}, {"type": "refusal", "refusal": "No."}],
            "phase": "commentary",
        },
    ]
    state = parse(input=items).decision.state
    assert state == Conversation(
        messages=(
            ChatMessage(role="system", content="Be strict."),
            ChatMessage(role="system", content="Policy v2"),
            ChatMessage(role="user", content='Order 7\n[{"id": 7}]'),
            ChatMessage(role="assistant", content="Checking.\nNo."),
        )
    )


def test_tool_calls_join_their_assistant_turn_and_outputs_answer_them() -> None:
    items = [
        {"role": "user", "content": "Weather in Paris and a note?"},
        {"role": "assistant", "content": "Let me look."},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {"type": "custom_tool_call", "call_id": "c2", "name": "note", "input": "buy milk", "namespace": "memo"},
        {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "saved"}]},
        {"type": "function_call", "call_id": "c3", "name": "shell", "arguments": "rm -rf /"},
    ]
    messages = parse(input=items).decision.state.messages  # type: ignore[union-attr]
    assert messages[1] == ChatMessage(
        role="assistant",
        content="Let me look.",
        tool_calls=(
            ToolCall(call_id="c1", name="weather", arguments={"city": "Paris"}),
            ToolCall(call_id="c2", name="memo.note", arguments={"input": "buy milk"}),
        ),
    )
    assert messages[2:4] == (
        ChatMessage(role="tool", content="18 C", tool_call_id="c1"),
        ChatMessage(role="tool", content="saved", tool_call_id="c2"),
    )
    # A call after an output opens a new assistant turn; arguments that are not a JSON object stay text.
    assert messages[4] == ChatMessage(role="assistant", content="", tool_calls=(ToolCall("c3", "shell", "rm -rf /"),))


@pytest.mark.parametrize(
    ("items", "param", "code"),
    [
        ([{"type": "function_call_output", "call_id": "x", "output": "?"}], "input[0].call_id", "unknown_call_id"),
        (
            [
                {"type": "custom_tool_call", "call_id": "x", "name": "n", "input": "i"},
                {"type": "function_call_output", "call_id": "x", "output": "?"},
            ],
            "input[1].call_id",
            "unknown_call_id",
        ),
        (
            [{"type": "function_call", "call_id": "x", "name": "n", "arguments": "{}"}] * 2,
            "input[1].call_id",
            "duplicate_call_id",
        ),
        (
            [
                {"type": "function_call", "call_id": "x", "name": "n", "arguments": "{}"},
                *[{"type": "function_call_output", "call_id": "x", "output": "?"}] * 2,
            ],
            "input[2].call_id",
            "duplicate_call_output",
        ),
        ([], "input", "too_few_items"),
        ([{"role": "robot", "content": "x"}], "input[0].role", "invalid_role"),
        ([{"type": "reasoning", "summary": []}], "input[0].type", "invalid_type"),
        ([{"role": "user", "content": "x", "name": "bob"}], "input[0]", "unknown_parameter"),
        (
            [{"role": "system", "content": [{"type": "input_json", "data": {}}]}],
            "input[0].content[0].type",
            "invalid_value",
        ),
        (
            [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}],
            "input[0].content[0]",
            "unsupported_content",
        ),
        (
            [
                {"type": "function_call", "call_id": "x", "name": "n", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "x",
                    "output": [{"type": "input_image", "image_url": "https://x"}],
                },
            ],
            "input[1].output[0]",
            "unsupported_content",
        ),
    ],
)
def test_input_rules_name_the_offending_item(items: Any, param: str, code: str) -> None:
    got_param, _, got_code = issue(input=items)
    assert (got_param, got_code) == (param, code)


def test_an_image_in_the_instructions_is_refused_as_text_only() -> None:
    question = {"type": "predicate", "instructions": [{"type": "input_image", "image_url": "data:,"}]}
    param, message, code = issue(questions=[question])
    assert (param, code) == ("questions[0].instructions[0]", "unsupported_content")
    assert "only text is supported" in message


def test_json_parts_have_openais_bounds() -> None:
    deep: Any = {}
    for _ in range(33):
        deep = {"k": deep}
    part = {"role": "user", "content": [{"type": "input_json", "data": deep}]}
    assert issue(input=[part])[2] == "json_too_deep"
    wide = {"role": "user", "content": [{"type": "input_json", "data": [{"v": i} for i in range(5001)]}]}
    assert issue(input=[wide])[2] == "json_too_large"


def test_the_error_envelope_names_every_issue_and_the_first_param() -> None:
    with pytest.raises(InvalidRequest) as info:
        parse(
            questions=[
                {**CHOICE, "choices": [{"value": "x"}]},
                {"type": "score", "instructions": "?", "levels": [{"label": "a"}]},
            ]
        )
    body = error_body(info.value, "")
    assert body["error"]["param"] == "questions[0].choices"
    assert body["error"]["type"] == "invalid_request_error"
    assert "questions[1].levels: expected 2 to 64 levels, got 1" in body["error"]["message"]


def test_malformed_json_is_a_400_without_a_param() -> None:
    with pytest.raises(InvalidRequest) as info:
        decisions.parse(b"{nope", Limits(), frozenset())
    body = error_body(info.value, "")
    assert body["error"]["param"] is None and body["error"]["code"] == "json_invalid"
