"""Render a model's own Jinja2 chat template, in a sandbox, with thinking disabled.

Chat templates come from model repositories: they are untrusted code, so they only ever run in
Jinja2's immutable sandbox. The globals mirror what transformers provides. Messages reach the
template as transformers hands them: `role` and `content`, and for agent transcripts an assistant's
`tool_calls` (`{"id", "type": "function", "function": {"name", "arguments"}}`) and a tool result's
`tool_call_id`, only when present, so a template sees exactly the keys a message has.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from openjev.domain.errors import TemplateRefused
from openjev.domain.layout import in_json
from openjev.domain.ports import ChatMessage


def _raise(message: str) -> NoReturn:
    raise jinja2.TemplateError(message)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # openjev's layout puts markers in place of the caller's strings; inside JSON they are marked as such.
    return in_json(
        json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    )


@functools.lru_cache(maxsize=8)
def compile_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def render_chat_template(
    source: str,
    messages: Sequence[ChatMessage],
    *,
    bos_token: str = "",
    eos_token: str = "",
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Render with the generation prompt and `enable_thinking=False`.

    A template that refuses the conversation (e.g. one that requires alternating roles, or that
    fails on a tool call's shape) is the caller's problem with this model: TemplateRefused, which
    the prompt layout turns into an invalid-request error on the state.
    """
    try:
        return compile_template(source).render(
            messages=[template_message(m) for m in messages],
            add_generation_prompt=True,
            enable_thinking=False,
            bos_token=bos_token,
            eos_token=eos_token,
            **(extra or {}),
        )
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise TemplateRefused(str(exc)) from None


def render_template(source: str, variables: Mapping[str, Any]) -> str:
    """Render a template with exactly these variables (a decision model's `systemone` template takes
    the question's, not messages); TemplateRefused when it refuses them."""
    try:
        return compile_template(source).render(**variables)
    except (jinja2.TemplateError, TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        raise TemplateRefused(str(exc)) from None


def template_message(message: ChatMessage) -> dict[str, Any]:
    """A message as the template reads it (transformers' shape), with only the keys it has."""
    shaped: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        shaped["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        shaped["tool_call_id"] = message.tool_call_id
    return shaped
