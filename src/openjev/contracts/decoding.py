"""Strict decoding of a request body, and what msgspec's error messages say, for every contract.

msgspec reports a validation failure as text (`Expected `int`, got `str` - at `$.questions[0]``);
this is the one reader of that text (`explain_validation_error`, `validation_error_kind`), so a
change in msgspec's wording is met in one place. The settings read it too, to name a variable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import msgspec

from openjev.domain.decision import Loc
from openjev.domain.errors import ECHO_LIMIT, InvalidRequest, Issue

T = TypeVar("T")
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\.\.\.)\]")


def decode_strict(
    decoder: msgspec.json.Decoder[T], body: bytes, root: Loc, invalid: Callable[[msgspec.ValidationError], Issue]
) -> T:
    """`body` decoded in one pass; a schema failure is `invalid`'s issue, malformed or too deep JSON one at `root`."""
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise InvalidRequest([invalid(exc)]) from None
    except msgspec.DecodeError as exc:
        text = str(exc)
        message = text if text.startswith("JSON is malformed") else f"JSON is malformed: {text}"
        raise InvalidRequest.one(root, message, "json_invalid") from None
    except RecursionError:
        raise InvalidRequest.one(root, "JSON is nested too deeply", "json_invalid") from None


def explain_validation_error(exc: msgspec.ValidationError) -> tuple[str, list[str | int]]:
    """msgspec's message and the path it names: `$.a[0].b` reads as `["a", 0, "b"]`, a dict key as `"..."`.

    msgspec quotes the offending value or field name whole: the message is cut like `echo`'s quotes.
    """
    message, _, where = str(exc).rpartition(" - at `") if " - at `" in str(exc) else (str(exc), "", "")
    if len(message) > ECHO_LIMIT + 50:
        message = f"{message[: ECHO_LIMIT + 50]}… ({len(message)} characters)"
    path = where.rstrip("`")[1:] if where else ""
    segments: list[str | int] = []
    for name, index in _SEGMENT.findall(path):
        segments.append(name if name else (index if index == "..." else int(index)))
    return message, segments


def validation_error_kind(message: str) -> str:
    """What a msgspec validation message says went wrong: missing, unknown (field), tag, enum, or type."""
    if message.startswith("Object missing required field"):
        return "missing"
    if message.startswith("Object contains unknown field"):
        return "unknown"
    if message.startswith("Invalid value"):
        return "tag"
    if message.startswith("Invalid enum value"):
        return "enum"
    return "type"
