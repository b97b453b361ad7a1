"""The fast token check counts tool calls too: a huge tool name or argument is refused before tokenizing.

The floor must stay below the real count whichever way the template shows the calls: Qwen3's
template writes them itself (names verbatim, arguments through `tojson`), the fake's ChatML
template shows none, so `layout` folds them into the assistant's text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient

from openjev.adapters.fake.build import build_runtime
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.hf_codec import HFCodec
from openjev.domain.layout import encode_pieces, layout
from openjev.domain.ports import ChatMessage, PromptCodec, ToolCall
from openjev.domain.prompt import PromptText, token_floors
from openjev.http.app import create_app
from openjev.settings import load_settings
from tests.api.conftest import LOCAL
from tests.assets import CountingCodec, qwen3_tokenizer_dir

pytestmark = pytest.mark.needs_test_assets

# Quotes, backslashes and control characters (escaped by `tojson`), long runs, non-ASCII text.
PIECES = ["a", "word ", '"', "\\", "\n", "\t", "\x01", " ", "    ", "-", "é", "e\u0301", "漢字", "🙂", "<|im_end|>"]
texts = st.lists(
    st.tuples(st.sampled_from(PIECES), st.integers(min_value=1, max_value=60)), min_size=0, max_size=8
).map(lambda runs: "".join(piece * count for piece, count in runs))
arguments = st.one_of(
    texts, st.dictionaries(texts, st.one_of(texts, st.integers(), st.lists(texts, max_size=3)), max_size=4)
)
calls = st.builds(ToolCall, call_id=texts, name=texts, arguments=arguments)


@cache
def qwen3() -> HFCodec:
    return HFCodec.load(str(qwen3_tokenizer_dir()))


def prefix_floor(codec: PromptCodec, messages: Sequence[ChatMessage]) -> int:
    return token_floors(PromptText(messages=tuple(messages), questions=()), codec)[0]


@settings(max_examples=150, deadline=None)
@given(content=texts, tool_calls=st.lists(calls, min_size=1, max_size=3), output=texts)
def test_the_floor_with_tool_calls_never_exceeds_the_real_count(
    content: str, tool_calls: list[ToolCall], output: str
) -> None:
    messages = [
        ChatMessage(role="user", content="Clean up."),
        ChatMessage(role="assistant", content=content, tool_calls=tuple(tool_calls)),
        ChatMessage(role="tool", content=output, tool_call_id=tool_calls[0].call_id),
    ]
    for codec in (qwen3(), ChatMLByteCodec()):
        real = len(encode_pieces(codec, layout(codec, messages).prefix))
        assert prefix_floor(codec, messages) <= real


def test_tool_call_text_counts_toward_the_floor() -> None:
    big = "The quick brown fox jumps over the lazy dog. " * 2_000
    for codec in (qwen3(), ChatMLByteCodec()):
        plain = prefix_floor(codec, [ChatMessage(role="assistant", content=big)])
        for call in (
            ToolCall(call_id="c", name=big, arguments={}),
            ToolCall(call_id="c", name="run", arguments=big),
            ToolCall(call_id="c", name="run", arguments={"command": big}),
        ):
            assert prefix_floor(codec, [ChatMessage(role="assistant", content="", tool_calls=(call,))]) >= plain


BIG = "x" * 1_900_000
USER = {"role": "user", "content": "Clean up the old backups."}


def _call(**fields: Any) -> list[dict[str, Any]]:
    return [USER, {"type": "function_call", "call_id": "call_1", "name": "run", "arguments": "{}", **fields}]


TOOL_INPUTS = {
    "arguments text": _call(arguments=BIG),
    "arguments object": _call(arguments=json.dumps({"command": BIG})),
    "name": _call(name=BIG),
    "custom input": [USER, {"type": "custom_tool_call", "call_id": "call_1", "name": "run", "input": BIG}],
    "output": [*_call(), {"type": "function_call_output", "call_id": "call_1", "output": BIG}],
}


async def test_a_huge_tool_call_is_refused_before_any_of_it_is_tokenized() -> None:
    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    codec = CountingCodec()
    app = create_app(settings, replace(build_runtime(settings), load_codec=lambda: codec))
    question = {"type": "predicate", "instructions": "Is the call safe to run?"}
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(500):
            if app.state.service.evaluator is not None:
                break
            await asyncio.sleep(0.01)
        for name, items in TOOL_INPUTS.items():
            codec.caller_chars = 0
            request = {"model": "jev-latest", "input": items, "questions": [question]}
            response = await client.post("/v1/decisions", json=request)
            assert response.status_code == 400, (name, response.text[:300])
            error = response.json()["error"]
            assert error["code"] == "tokens_exceeded" and "needs at least" in error["message"], name
            assert codec.caller_chars == 0, name  # not one character of the request was tokenized
