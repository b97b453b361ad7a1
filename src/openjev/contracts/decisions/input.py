"""A Decisions `input` as the state the model judges: a text, or a transcript rendered through the
model's chat template, agent tool calls and tool results included (docs/prompt-format.md).

- A string is the data to judge, framed as System One frames a text state.
- Messages keep their roles; `developer` renders as `system` (the chat templates know no developer
  role). Text parts are joined with a line break, JSON parts shown as JSON; an image is refused.
- A `function_call` (or `custom_tool_call`) is a tool call of the assistant turn it follows
  (consecutive calls share one turn); its JSON-object `arguments` reach the template as an object,
  other arguments as the text sent, a custom tool's `input` as the one argument `input`; a
  `namespace` prefixes the name (`namespace.name`).
- A `*_output` renders as the template's tool result for its call, and must name an earlier call
  of its own kind by `call_id`.
- `id`, `status` and an assistant's `phase` are accepted and not shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from openjev.contracts.decisions.errors import validation_code
from openjev.contracts.decisions.wire import (
    ITEMS,
    MESSAGES,
    AssistantMessage,
    CustomToolCall,
    CustomToolCallOutput,
    FunctionCall,
    FunctionCallOutput,
    InputImage,
    InputJSON,
    InputText,
    Item,
    OutputText,
    RefusalText,
    SystemText,
)
from openjev.contracts.decoding import explain_validation_error
from openjev.domain.decision import Conversation, Document, Loc, State
from openjev.domain.errors import InvalidRequest, Issue, echo
from openjev.domain.ports import ChatMessage, ToolCall
from openjev.domain.validation import json_depth

# OpenAI's documented bounds on one `input_json` part (decision_input_json.py).
JSON_MAX_DEPTH = 32
JSON_MAX_VALUES = 10_000
JSON_MAX_BYTES = 256 * 1024
ROLES = {"developer": "system"}  # roles the chat templates know under another name


def state_of(input: str | list[dict[str, Any]], root: Loc = ("input",)) -> State:
    """`root`: where this input sits (the request's `input`, or a worked example's), for errors."""
    if isinstance(input, str):
        return Document(text=input)
    if not input:
        raise InvalidRequest.one(root, "input has no items: send a text or at least one item", "too_few_items")
    return Conversation(
        messages=tuple(_Transcript(root).messages([_item(raw, (*root, i)) for i, raw in enumerate(input)]))
    )


def _item(raw: dict[str, Any], where: Loc) -> Item:
    kind = raw.get("type", "message")
    if kind == "message":
        role = raw.get("role")
        cls: type[Item] | None = MESSAGES.get(role) if isinstance(role, str) else None
        if cls is None:
            raise InvalidRequest.one(
                (*where, "role"), f"a message's role is one of {', '.join(MESSAGES)}, got {echo(role)}", "invalid_role"
            )
    else:
        found = ITEMS.get(kind) if isinstance(kind, str) else None
        if found is None:
            kinds = ", ".join(["message", *ITEMS])
            raise InvalidRequest.one(
                (*where, "type"), f"an input item's type is one of {kinds}, got {echo(kind)}", "invalid_type"
            )
        cls = found
    try:
        return msgspec.convert(raw, cls, strict=True)
    except msgspec.ValidationError as exc:
        message, path = explain_validation_error(exc)
        raise InvalidRequest([Issue((*where, *path), message, validation_code(message))]) from None


class _Transcript:
    """Items to chat messages, checking that every tool output answers an earlier call of its kind."""

    def __init__(self, root: Loc) -> None:
        self.root = root
        self.out: list[ChatMessage] = []
        self.calls: dict[str, str] = {}  # call id -> the item type that made the call
        self.answered: set[str] = set()
        self.last_is_call_turn = False  # the last message is an assistant turn more calls may join

    def messages(self, items: Sequence[Item]) -> list[ChatMessage]:
        for i, item in enumerate(items):
            where: Loc = (*self.root, i)
            if isinstance(item, FunctionCall | CustomToolCall):
                self._call(item, where)
            elif isinstance(item, FunctionCallOutput | CustomToolCallOutput):
                self._output(item, where)
            else:
                role = ROLES.get(item.role, item.role)
                self.out.append(ChatMessage(role=role, content=_content(item.content, (*where, "content"))))
                self.last_is_call_turn = isinstance(item, AssistantMessage)
        return self.out

    def _call(self, item: FunctionCall | CustomToolCall, where: Loc) -> None:
        if item.call_id in self.calls:
            raise InvalidRequest.one(
                (*where, "call_id"),
                f"call_id {echo(item.call_id)} is already used by an earlier call",
                "duplicate_call_id",
            )
        self.calls[item.call_id] = item.type
        name = f"{item.namespace}.{item.name}" if item.namespace else item.name
        if isinstance(item, FunctionCall):
            arguments = _arguments(item.arguments, (*where, "arguments"))
        else:
            arguments = {"input": item.input}
        call = ToolCall(call_id=item.call_id, name=name, arguments=arguments)
        if self.last_is_call_turn:
            turn = self.out[-1]
            self.out[-1] = ChatMessage(role=turn.role, content=turn.content, tool_calls=(*turn.tool_calls, call))
        else:
            self.out.append(ChatMessage(role="assistant", content="", tool_calls=(call,)))
            self.last_is_call_turn = True

    def _output(self, item: FunctionCallOutput | CustomToolCallOutput, where: Loc) -> None:
        wanted = "function_call" if isinstance(item, FunctionCallOutput) else "custom_tool_call"
        made = self.calls.get(item.call_id)
        if made != wanted:
            earlier = f"an earlier {made} has it" if made else "no earlier call has it"
            raise InvalidRequest.one(
                (*where, "call_id"),
                f"this {item.type} answers call_id {echo(item.call_id)}, but {earlier}: every tool output must "
                f"follow the {wanted} it answers, with the same call_id",
                "unknown_call_id",
            )
        if item.call_id in self.answered:
            raise InvalidRequest.one(
                (*where, "call_id"), f"call_id {echo(item.call_id)} already has an output", "duplicate_call_output"
            )
        self.answered.add(item.call_id)
        content = _content(item.output, (*where, "output"))
        self.out.append(ChatMessage(role="tool", content=content, tool_call_id=item.call_id))
        self.last_is_call_turn = False


def _arguments(text: str, where: Loc) -> str | dict[str, Any]:
    """A JSON object as an object (what chat templates expect), anything else as the text sent.

    `json.loads` takes an escaped lone surrogate (`"\\ud800"`), which is no text a tokenizer can
    encode: such arguments are refused here, not met as an error while tokenizing.
    """
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(value, dict) or json_depth(value, JSON_MAX_DEPTH) > JSON_MAX_DEPTH:
        return text
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise InvalidRequest.one(
            where,
            "the arguments' JSON escapes a lone surrogate (such as \\ud800), which is not text: "
            "send each character's whole escape pair, or the character itself",
            "invalid_value",
        ) from None
    return value


def _content(content: str | Sequence[Any], where: Loc) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part_text(part, (*where, j)) for j, part in enumerate(content))


def part_text(part: Any, where: Loc) -> str:
    """A part as the model reads it; an image is refused (only text is supported)."""
    if isinstance(part, InputText | SystemText | OutputText):
        return part.text
    if isinstance(part, RefusalText):
        return part.refusal
    if isinstance(part, InputJSON):
        return json_text(part.data, where)
    assert isinstance(part, InputImage)
    raise InvalidRequest.one(
        where, "input_image parts are not supported: only text is supported", "unsupported_content"
    )


def json_text(data: Any, where: Loc) -> str:
    """An `input_json` part's data as JSON text, within OpenAI's documented bounds."""
    if json_depth(data, JSON_MAX_DEPTH) > JSON_MAX_DEPTH:
        raise InvalidRequest.one(where, f"JSON nested deeper than {JSON_MAX_DEPTH} levels", "json_too_deep")
    if _values(data) > JSON_MAX_VALUES:
        raise InvalidRequest.one(where, f"more than {JSON_MAX_VALUES} JSON values in one part", "json_too_large")
    if len(msgspec.json.encode(data)) > JSON_MAX_BYTES:
        raise InvalidRequest.one(
            where, f"more than {JSON_MAX_BYTES} bytes of compact JSON in one part", "json_too_large"
        )
    return json.dumps(data, ensure_ascii=False)


def _values(data: Any) -> int:
    count, stack = 0, [data]
    while stack:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count
