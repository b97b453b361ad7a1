"""Parse a request body: strict, single-pass JSON decoding, with errors mapped to 422 `loc` paths.

msgspec reports dict keys as `[...]`; when that happens the offending question id or option
name is found again in the raw JSON so the caller learns exactly which one is wrong.
`explain_validation_error` is the one reader of msgspec's error text (settings use it too).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from openjev.domain.errors import InvalidRequest, Issue
from openjev.domain.wire import Question, SystemOneRequest, TextValue

_decoder = msgspec.json.Decoder(SystemOneRequest)
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\.\.\.)\]")


def decode_request(body: bytes) -> SystemOneRequest:
    try:
        return _decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise InvalidRequest([_issue(exc, body)]) from None
    except msgspec.DecodeError as exc:
        text = str(exc)
        message = text if text.startswith("JSON is malformed") else f"JSON is malformed: {text}"
        raise InvalidRequest.one(("body",), message, "json_invalid") from None
    except RecursionError:
        raise InvalidRequest.one(("body",), "JSON is nested too deeply", "json_invalid") from None


def explain_validation_error(exc: msgspec.ValidationError) -> tuple[str, list[str | int]]:
    """msgspec's message and the path it names: `$.a[0].b` reads as `["a", 0, "b"]`, a dict key as `"..."`."""
    message, _, where = str(exc).partition(" - at `")
    path = where.rstrip("`")[1:] if where else ""
    segments: list[str | int] = []
    for name, index in _SEGMENT.findall(path):
        segments.append(name if name else (index if index == "..." else int(index)))
    return message, segments


def _issue(exc: msgspec.ValidationError, body: bytes) -> Issue:
    message, segments = explain_validation_error(exc)
    if "..." in segments:
        segments = _resolve_keys(segments, body)
    if "..." in segments:  # a key that could not be found again: name the object that holds it
        segments = segments[: segments.index("...")]
    return Issue(loc=("body", *segments), msg=message, type=_error_type(message))


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


def _error_type(message: str) -> str:
    if message.startswith("Object missing required field"):
        return "missing"
    if message.startswith("Object contains unknown field"):
        return "extra_forbidden"
    if message.startswith("Invalid value"):
        return "union_tag_invalid"
    return "type_error"
