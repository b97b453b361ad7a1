from __future__ import annotations

import json
from typing import Any

import pytest

from openjev.contracts.models import check_model
from openjev.contracts.systemone.parsing import decode_request, validate_request
from openjev.contracts.systemone.wire import ChoiceQuestion, NoulQuestion, ScoreQuestion
from openjev.domain.errors import InvalidRequest, UnknownModel
from openjev.domain.limits import Limits


def body(questions: Any, state: Any = "text", **extra: Any) -> bytes:
    return json.dumps({"model": "jev-latest", "state": state, "questions": questions, **extra}).encode()


def issue_of(raw: bytes, limits: Limits | None = None) -> tuple[tuple[Any, ...], str, str]:
    with pytest.raises(InvalidRequest) as info:
        validate_request(decode_request(raw), limits or Limits())
    issue = info.value.issues[0]
    return issue.loc, issue.msg, issue.type


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        (b'{"state": "x", "questions": {"q": {"type": "noul"}}}', ("body",)),
        (body({"q": {"type": "noul"}}, state=None), ("body", "state")),
        (body({"q": {"type": "noul"}}, state=5), ("body", "state")),
        (body([{"type": "noul"}]), ("body", "questions")),
        (body({"my q": {"type": "nope"}}), ("body", "questions", "my q", "type")),
        (body({"ok": {"type": "noul"}, "bad": {"type": "noul", "critera": {}}}), ("body", "questions", "bad")),
        (body({"s": {"type": "score", "criteria": {"0": "low", "1": "high"}}}), ("body", "questions", "s", "criteria")),
        (body({"c": {"type": "choice", "criteria": {"a": "x", "b": 5}}}), ("body", "questions", "c", "criteria", "b")),
        (body({"c": {"type": "choice"}}), ("body", "questions", "c")),
        (body({"n": {"type": "noul", "criteria": {"true": 1}}}), ("body", "questions", "n", "criteria", "true")),
        (body({"n": {"type": "noul", "instructions": 5}}), ("body", "questions", "n", "instructions")),
        (b"{not json", ("body",)),
    ],
)
def test_schema_errors_point_at_the_offending_value(raw: bytes, loc: tuple[Any, ...]) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_request(raw)
    assert info.value.issues[0].loc == loc


def test_decoding_is_strict() -> None:
    # A string is never coerced: "5" for a list of levels, "true" for an object.
    with pytest.raises(InvalidRequest):
        decode_request(body({"s": {"type": "score", "criteria": "5"}}))


@pytest.mark.parametrize(
    "state",
    ["text", {"a": 1}, [1, "x"], [{"role": "user", "content": "hi"}], {"messages": [{"role": "user", "content": "x"}]}],
)
def test_every_state_form_decodes(state: Any) -> None:
    assert decode_request(body({"q": {"type": "noul"}}, state=state)).state == state


def test_every_criteria_form_decodes() -> None:
    request = decode_request(
        body(
            {
                "n0": {"type": "noul"},
                "n1": {"type": "noul", "criteria": None},
                "n2": {"type": "noul", "criteria": {"true": "yes", "false": None}},
                "n3": {"type": "noul", "criteria": {"false": {"why": "no"}}, "instructions": ["a", "b"]},
                "c": {"type": "choice", "criteria": {"a": None, "b": "desc", "c": {"d": 1}, "d": [1]}},
                "s": {"type": "score", "criteria": ["low", {"k": "v"}, ["x"]], "instructions": {"t": 1}},
            }
        )
    )
    q = request.questions
    assert isinstance(q["n0"], NoulQuestion) and q["n0"].criteria is None
    assert isinstance(q["n2"], NoulQuestion) and q["n2"].criteria is not None and q["n2"].criteria.false is None
    assert isinstance(q["c"], ChoiceQuestion) and q["c"].criteria["a"] is None
    assert isinstance(q["s"], ScoreQuestion) and q["s"].criteria[1] == {"k": "v"}


def test_unknown_top_level_fields_are_ignored() -> None:
    assert decode_request(body({"q": {"type": "noul"}}, temperature=0.2)).model == "jev-latest"


@pytest.mark.parametrize(
    ("questions", "loc", "kind"),
    [
        ({}, ("body", "questions"), "too_few_questions"),
        ({f"q{i}": {"type": "noul"} for i in range(65)}, ("body", "questions"), "too_many_questions"),
        ({"": {"type": "noul"}}, ("body", "questions", ""), "value_error"),
        (
            {"c": {"type": "choice", "criteria": {"only": None}}},
            ("body", "questions", "c", "criteria"),
            "too_few_options",
        ),
        (
            {"c": {"type": "choice", "criteria": {str(i): None for i in range(65)}}},
            ("body", "questions", "c", "criteria"),
            "too_many_options",
        ),
        ({"s": {"type": "score", "criteria": ["one"]}}, ("body", "questions", "s", "criteria"), "too_few_levels"),
        ({"s": {"type": "score", "criteria": ["x"] * 65}}, ("body", "questions", "s", "criteria"), "too_many_levels"),
    ],
)
def test_counts_are_checked(questions: Any, loc: tuple[Any, ...], kind: str) -> None:
    assert issue_of(body(questions))[::2] == (loc, kind)


def test_the_option_limit_is_configurable_up_to_255() -> None:
    many = {"c": {"type": "choice", "criteria": {f"o{i}": None for i in range(255)}}}
    validate_request(decode_request(body(many)), Limits(max_options=255))
    assert issue_of(body(many))[2] == "too_many_options"


def test_assets_are_refused_as_text_only() -> None:
    loc, msg, _ = issue_of(body({"q": {"type": "noul"}}, assets={"img": {"type": "image"}}))
    assert loc == ("body", "assets") and "only text" in msg


def test_models() -> None:
    check_model("jev-latest", frozenset())
    check_model("Qwen/Qwen3.6-35B-A3B", frozenset({"Qwen/Qwen3.6-35B-A3B"}))
    with pytest.raises(UnknownModel, match="gpt-4"):
        check_model("gpt-4", frozenset({"Qwen/Qwen3.6-35B-A3B"}))


DEEP = "@deep@"


def nested(depth: int) -> str:
    """A marker for a JSON value nested `depth` levels deep (objects and arrays in turn)."""
    return f"{DEEP}{depth}"


def with_deep_values(payload: Any) -> bytes:
    """`payload` as JSON, each marker replaced by its deep value (written as text: encoders recurse)."""
    text = json.dumps(payload)
    for depth in (64, 70, 300):
        deep = '"leaf"'
        for level in range(depth):
            deep = f"[{deep}]" if level % 2 else f'{{"k": {deep}}}'
        text = text.replace(f'"{nested(depth)}"', deep)
    return text.encode()


@pytest.mark.parametrize(
    ("questions", "state", "loc"),
    [
        ({"q": {"type": "noul"}}, nested(300), ("body", "state")),
        ({"q": {"type": "noul", "instructions": nested(300)}}, "s", ("body", "questions", "q", "instructions")),
        (
            {"q": {"type": "noul", "criteria": {"false": nested(70)}}},
            "s",
            ("body", "questions", "q", "criteria", "false"),
        ),
        (
            {"c": {"type": "choice", "criteria": {"a": None, "b": nested(300)}}},
            "s",
            ("body", "questions", "c", "criteria", "b"),
        ),
        ({"s": {"type": "score", "criteria": ["x", nested(300)]}}, "s", ("body", "questions", "s", "criteria", 1)),
    ],
)
def test_deep_nesting_is_a_422_naming_where(questions: Any, state: Any, loc: tuple[Any, ...]) -> None:
    raw = with_deep_values({"model": "jev-latest", "state": state, "questions": questions})
    assert issue_of(raw) == (loc, "JSON nested deeper than 64 levels", "json_too_deep")


def test_nesting_up_to_the_limit_is_accepted() -> None:
    raw = with_deep_values({"model": "jev-latest", "state": nested(64), "questions": {"q": {"type": "noul"}}})
    validate_request(decode_request(raw), Limits())


def test_a_malformed_body_is_described_once() -> None:
    loc, msg, _ = issue_of(b'{"model": "jev-latest", oops}')
    assert loc == ("body",) and msg.count("JSON is malformed") == 1


def test_a_key_that_cannot_be_found_again_is_never_a_literal_ellipsis() -> None:
    # Duplicate keys: msgspec fails on the first "q", a plain decode keeps the second (valid) one.
    raw = b'{"model": "jev-latest", "state": "s", "questions": {"q": {"type": "nope"}, "q": {"type": "noul"}}}'
    loc, _, _ = issue_of(raw)
    assert "..." not in loc and loc[:2] == ("body", "questions")
