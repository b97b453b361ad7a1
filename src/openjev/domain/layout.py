"""Render a conversation with the model's chat template while keeping the caller's text apart from it.

The template is rendered once with a marker in place of every string the caller wrote (a message's
content; a tool call's name, arguments and id; a tool result's call id), then the text is cut at
the markers. Template text is tokenized with its special tokens recognised, caller text never is
(`encode_pieces`), so a state that spells `<|im_end|>` cannot close its own turn.

Tool calls render through the template's own tool-call form. Arguments that are a JSON object are
handed to the template as an object whose keys and string values are markers; where the template
serializes them with `tojson`, the adapter's filter marks those markers (`in_json`) and the caller's
text is put back JSON-escaped, exactly as the template would have written it. A template that shows
no tool calls (its assistant turn drops them) gets them folded into the assistant's text instead, in
the `<tool_call>` JSON form, so nothing a caller sent is dropped.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import msgspec

from openjev.domain.decision import Loc
from openjev.domain.errors import InvalidRequest, TemplateRefused
from openjev.domain.labels import ANSWER_OPENING
from openjev.domain.ports import ChatMessage, PromptCodec, ToolCall

_MARK = "\u2063"
_MARKER = re.compile(f"{_MARK}openjev-(json-)?(\\d+){_MARK}")
_PLAIN_MARKER = re.compile(f"{_MARK}openjev-(\\d+){_MARK}")


_QUESTION = "the question"  # stands for the question turn's content, which follows the prefix


def _marker(i: int) -> str:
    return f"{_MARK}openjev-{i}{_MARK}"


def in_json(serialized: str) -> str:
    """A `tojson` output with its markers marked as JSON-escaped: the template's JSON filter calls this."""
    return _PLAIN_MARKER.sub(f"{_MARK}openjev-json-\\1{_MARK}", serialized)


class Piece(msgspec.Struct, frozen=True):
    """A run of prompt text: template text (special tokens parsed) or literal text, never parsed.

    Literal text is the caller's content and openjev's own wording: a special token's spelling in it
    stays plain text.
    """

    text: str
    literal: bool


class PromptLayout(msgspec.Struct, frozen=True):
    """The rendered conversation split around the question turn's content."""

    prefix: tuple[Piece, ...]  # everything before the question content
    tail_text: str  # after it: end of turn, assistant opening, then `Answer:`
    # Pieces of `prefix` that render the leading `head_messages` messages and the template text after
    # them, up to the next caller string: a start that requests sharing those messages share.
    head: int = 0

    @property
    def prefix_text(self) -> str:
        return "".join(piece.text for piece in self.prefix)


class _Leaves:
    """The caller's strings, each replaced by a marker; `required` ones must appear in the render."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.required: list[bool] = []
        self.contents: list[int] = []  # the messages' contents: each must appear exactly once
        self.owners: list[int] = []  # the message each string belongs to (the question: one past the last)
        self.owner = 0

    def add(self, text: str, *, required: bool) -> str:
        """A marker for `text`; an empty string stays empty, since templates test emptiness (`if content`)."""
        if not text:
            return text
        self.texts.append(text)
        self.required.append(required)
        self.owners.append(self.owner)
        return _marker(len(self.texts) - 1)

    def value(self, value: Any) -> Any:
        """A JSON value with every string (object keys included) replaced by a required marker."""
        if isinstance(value, str):
            return self.add(value, required=True)
        if isinstance(value, dict):
            return {self.add(str(k), required=True): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value  # numbers, booleans, null: they cannot spell a special token

    def message(self, message: ChatMessage, index: int) -> ChatMessage:
        self.owner = index
        content = self.add(message.content, required=True)
        if content:
            self.contents.append(len(self.texts) - 1)
        return ChatMessage(
            role=message.role,
            content=content,
            tool_calls=tuple(
                ToolCall(
                    call_id=self.add(call.call_id, required=False),
                    name=self.add(call.name, required=True),
                    arguments=self.value(call.arguments),
                )
                for call in message.tool_calls
            ),
            tool_call_id=None if message.tool_call_id is None else self.add(message.tool_call_id, required=False),
        )


def layout(
    codec: PromptCodec, messages: Sequence[ChatMessage], where: Loc = (), head_messages: int = 0
) -> PromptLayout:
    """Render once with markers in place of every caller string, then cut the text at the markers.

    `where` locates the state in the caller's request, for the error a template's refusal becomes.
    `head_messages`: the leading messages whose render (up to the next caller string) is `head`.
    """
    split = _split(codec, messages, where, head_messages)
    if split is None:  # the template drops tool calls: fold them into the assistant's text
        split = _split(codec, [fold_tool_calls(m) for m in messages], where, head_messages)
        assert split is not None  # no tool call is left to drop
    return split


def fold_tool_calls(message: ChatMessage) -> ChatMessage:
    """An assistant message whose tool calls are written into its text, for templates that show none."""
    if not message.tool_calls:
        return message
    calls = [
        "<tool_call>\n" + json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False) + "\n</tool_call>"
        for c in message.tool_calls
    ]
    return ChatMessage(role=message.role, content="\n".join([message.content, *calls] if message.content else calls))


def _split(
    codec: PromptCodec, messages: Sequence[ChatMessage], where: Loc, head_messages: int = 0
) -> PromptLayout | None:
    """The layout, or None when a tool call's name or arguments did not appear in the render."""
    leaves = _Leaves()
    shaped = [leaves.message(m, i) for i, m in enumerate(messages)]
    leaves.owner = len(messages)
    question = leaves.add(_QUESTION, required=True)
    try:
        rendered = codec.render([*shaped, ChatMessage(role="user", content=question)])
    except TemplateRefused as exc:
        raise InvalidRequest.one(
            where, f"the model's chat template cannot render this conversation: {exc.message}", "template_error"
        ) from None
    pieces: list[Piece] = []
    seen: Counter[int] = Counter()
    position = 0
    last = len(leaves.texts) - 1
    head_pieces: int | None = None
    for found in _MARKER.finditer(rendered):
        index = int(found.group(2))
        seen[index] += 1
        head = rendered[position : found.start()]
        position = found.end()
        if head_pieces is None and head_messages and leaves.owners[index] >= head_messages:
            head_pieces = sum(1 for p in pieces if p.text) + (1 if head else 0)
        if index == last:
            pieces.append(Piece(text=head, literal=False))
            break
        text = leaves.texts[index]
        pieces += [
            Piece(text=head, literal=False),
            Piece(text=escaped(text) if found.group(1) else text, literal=True),
        ]
    tail = rendered[position:]
    if seen[last] != 1 or _MARKER.search(tail) or any(seen[i] != 1 for i in leaves.contents):
        raise InvalidRequest.one(
            where,
            "the model's chat template does not render each message's content exactly once, so openjev "
            "cannot keep it apart from the template's own text",
            "template_error",
        )
    if any(required and not seen[i] for i, required in enumerate(leaves.required[:last])):
        if any(m.tool_calls for m in messages):
            return None
        raise InvalidRequest.one(where, "the model's chat template dropped part of this conversation", "template_error")
    prefix = tuple(p for p in pieces if p.text)
    return PromptLayout(prefix=prefix, tail_text=tail + ANSWER_OPENING, head=head_pieces or 0)


def escaped(text: str) -> str:
    """`text` as it appears inside a JSON string the template wrote with `tojson`."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def encode_pieces(codec: PromptCodec, pieces: Sequence[Piece]) -> list[int]:
    ids: list[int] = []
    for piece in pieces:
        ids += codec.encode_caller_text(piece.text) if piece.literal else codec.encode_template(piece.text)
    return ids
