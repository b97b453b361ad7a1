"""Render a model's own Jinja2 chat template, in a sandbox, with thinking disabled.

Chat templates come from model repositories: they are untrusted code, so they only ever run in
Jinja2's immutable sandbox. The globals mirror what transformers provides.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from openjev.domain.errors import InvalidRequest
from openjev.domain.ports import ChatMessage


def _raise(message: str) -> NoReturn:
    raise jinja2.TemplateError(message)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


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

    A template that refuses the conversation (e.g. one that requires alternating roles) is the
    caller's problem with this model, so it surfaces as a 422 on `state`.
    """
    try:
        return compile_template(source).render(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            add_generation_prompt=True,
            enable_thinking=False,
            bos_token=bos_token,
            eos_token=eos_token,
            **(extra or {}),
        )
    except jinja2.TemplateError as exc:
        raise InvalidRequest.one(
            ("body", "state"), f"the model's chat template cannot render this conversation: {exc}", "template_error"
        ) from None
