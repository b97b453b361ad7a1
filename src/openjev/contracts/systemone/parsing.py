"""Parse a System One body: strict single-pass decoding, the rules beyond the schema, then the decision.

msgspec reports dict keys as `[...]`; when that happens the offending question id or option
name is found again in the raw JSON so the caller learns exactly which one is wrong. Errors carry
System One's locations (`["body", "questions", <id>, ...]`), which become 422 `detail` entries.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from openjev.contracts.decoding import decode_strict, explain_validation_error, validation_error_kind
from openjev.contracts.examples import example_issues, with_examples
from openjev.contracts.models import check_model
from openjev.contracts.systemone.wire import Question, SystemOneRequest, TextValue
from openjev.domain.decision import Ask, Conversation, Decision, Document, Loc, Policy, State
from openjev.domain.errors import InvalidRequest, Issue, echo
from openjev.domain.kinds import KINDS
from openjev.domain.limits import Limits
from openjev.domain.ports import ChatMessage
from openjev.domain.state import as_text
from openjev.domain.validation import ask_count_issue, depth_issues

_decoder = msgspec.json.Decoder(SystemOneRequest)
CHAT_ROLES = frozenset({"system", "user", "assistant"})
_MESSAGE_KEYS = frozenset({"role", "content", "name"})
ROOT = ("body",)


class Parsed(msgspec.Struct, frozen=True):
    """A checked System One request and the decision it asks for."""

    request: SystemOneRequest
    decision: Decision


def parse(body: bytes, limits: Limits, accepted_models: Collection[str]) -> Parsed:
    """Everything that can be checked without the tokenizer: schema, counts, depth, model; then translate."""
    request = decode_request(body)
    validate_request(request, limits)
    check_model(request.model, accepted_models)
    return Parsed(request=request, decision=to_decision(request))


def decode_request(body: bytes) -> SystemOneRequest:
    return decode_strict(_decoder, body, ROOT, lambda exc: _issue(exc, body))


def validate_request(request: SystemOneRequest, limits: Limits) -> None:
    """Every schema-level rule that msgspec cannot express with static constraints."""
    issues: list[Issue] = []
    if request.assets is not None:
        issues.append(
            Issue((*ROOT, "assets"), "assets are not supported: only text input is supported", "unsupported_content")
        )
    count_issue = ask_count_issue(len(request.questions), limits, (*ROOT, "questions"))
    if count_issue is not None:
        issues.append(count_issue)
    values: list[tuple[tuple[str | int, ...], Any]] = [((*ROOT, "state"), request.state)]
    for qid, question in request.questions.items():
        values += question.text_values((*ROOT, "questions", qid))
    issues += depth_issues(values)
    for qid, question in request.questions.items():
        if question.x_examples:
            where = (*ROOT, "questions", qid)
            answers = [example.answer for example in question.x_examples]
            issues += example_issues(question.ask(where), answers, (*where, "x_examples"), limits)
        if qid == "":
            issues.append(Issue((*ROOT, "questions", qid), "question ids must be non-empty strings", "value_error"))
        options = KINDS[question.kind].count_issue(question.option_count, limits, (*ROOT, "questions", qid, "criteria"))
        if options is not None:
            issues.append(options)
    if issues:
        raise InvalidRequest(issues)


def to_decision(request: SystemOneRequest) -> Decision:
    return Decision(
        state=state_of(request.state),
        asks=tuple(_ask(question, (*ROOT, "questions", qid)) for qid, question in request.questions.items()),
        policy=Policy(debias=request.x_debias, label_mass=request.x_label_mass),
        root=ROOT,
        state_where=(*ROOT, "state"),
    )


def _ask(question: Question, where: Loc) -> Ask:
    ask = msgspec.structs.replace(question.ask(where), name=str(where[-1]))
    if not question.x_examples:
        return ask
    examples = question.x_examples
    states = [state_of(example.state, (*where, "x_examples", j, "state")) for j, example in enumerate(examples)]
    return with_examples(ask, [(state, example.answer) for state, example in zip(states, examples, strict=True)])


def state_of(state: TextValue, where: Loc = (*ROOT, "state")) -> State:
    """A conversation when the state is a chat transcript, else the whole state as one document.

    `where`: where this state sits (the request's, or a worked example's), for errors.
    """
    transcript = _transcript(state, where)
    if transcript is not None:
        messages, path = transcript
        return Conversation(messages=tuple(_chat_message(m, (*path, i)) for i, m in enumerate(messages)))
    return Document(text=as_text(state))


def _transcript(state: TextValue, where: Loc) -> tuple[list[dict[str, Any]], Loc] | None:
    """The messages of a state that is a transcript: a list of messages, or exactly `{"messages": [...]}`."""
    if isinstance(state, list):
        candidate: Any = state
        path: Loc = where
    elif isinstance(state, dict) and set(state) == {"messages"}:
        candidate = state["messages"]
        path = (*where, "messages")
    else:
        return None
    if isinstance(candidate, list) and candidate and all(_looks_like_message(m) for m in candidate):
        return candidate, path
    return None


def _looks_like_message(item: Any) -> bool:
    if not isinstance(item, dict) or not set(item) >= {"role", "content"} or not set(item) <= _MESSAGE_KEYS:
        return False
    if item["role"] not in CHAT_ROLES:
        return False
    content = item["content"]
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("type"), str) for p in content)


def _chat_message(message: dict[str, Any], path: tuple[str | int, ...]) -> ChatMessage:
    content = message["content"]
    if isinstance(content, str):
        return ChatMessage(role=message["role"], content=content)
    texts: list[str] = []
    for j, part in enumerate(content):
        if part["type"] != "text" or not isinstance(part.get("text"), str):
            raise InvalidRequest.one(
                (*path, "content", j),
                f"content part of type {echo(part['type'])} is not supported: only text is supported",
                "unsupported_content",
            )
        texts.append(part["text"])
    return ChatMessage(role=message["role"], content="\n".join(texts))


def _issue(exc: msgspec.ValidationError, body: bytes) -> Issue:
    message, segments = explain_validation_error(exc)
    if "..." in segments:
        segments = _resolve_keys(segments, body)
    if "..." in segments:  # a key that could not be found again: name the object that holds it
        segments = segments[: segments.index("...")]
    return Issue(loc=(*ROOT, *segments), msg=message, type=error_type(message))


def _resolve_keys(segments: list[str | int], body: bytes) -> list[str | int]:
    """Replace `...` after `questions` (and after a choice's `criteria`) with the real key."""
    try:
        raw: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return segments
    if segments[:2] != ["questions", "..."] or not isinstance(raw, dict):
        return segments
    questions = raw.get("questions")
    if not isinstance(questions, dict):
        return segments
    qid = _first_failing(questions, Question)
    if qid is None:
        return segments
    resolved: list[str | int] = ["questions", qid, *segments[2:]]
    question = questions[qid]
    if (
        resolved[2:4] == ["criteria", "..."]
        and isinstance(question, dict)
        and isinstance(question.get("criteria"), dict)
    ):
        name = _first_failing(question["criteria"], TextValue | None)
        if name is not None:
            resolved[3] = name
    return resolved


def _first_failing(items: dict[str, Any], type_: Any) -> str | None:
    for key, value in items.items():
        try:
            msgspec.convert(value, type_, strict=True)
        except msgspec.ValidationError:
            return key
    return None


_TYPES = {
    "missing": "missing",
    "unknown": "extra_forbidden",
    "tag": "union_tag_invalid",
    "enum": "type_error",
    "type": "type_error",
}


def error_type(message: str) -> str:
    """System One's (FastAPI's) name for what a msgspec validation message says."""
    return _TYPES[validation_error_kind(message)]
