"""HFCodec remembers short tokenizations and renders: same results as without, bounded, copies handed out."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer

from openjev.adapters.bounded_memo import DEFAULT_MAX_ENTRIES, DEFAULT_MAX_SIZE
from openjev.adapters.chat_template import render_chat_template
from openjev.adapters.hf_codec import HFCodec, plain_text_twin
from openjev.domain.ports import ChatMessage
from tests.assets import qwen3_tokenizer_dir

pytestmark = pytest.mark.needs_test_assets

# One codec for the module (loading one takes a second or two): tests count hits and misses as deltas.


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(qwen3_tokenizer_dir() / "tokenizer.json"))


@pytest.fixture(scope="module")
def plain(tokenizer: Tokenizer) -> Tokenizer:
    return plain_text_twin(tokenizer)


@pytest.fixture(scope="module")
def codec() -> HFCodec:
    return HFCodec.load(str(qwen3_tokenizer_dir()))


def _counts(codec: HFCodec) -> tuple[int, int]:
    return codec._encodings.hits, codec._encodings.misses


def _raw(tokenizer: Tokenizer, text: str) -> list[int]:
    ids: list[int] = tokenizer.encode(text, add_special_tokens=False).ids
    return ids


def test_repeated_texts_are_tokenized_once_with_the_same_ids(
    codec: HFCodec, tokenizer: Tokenizer, plain: Tokenizer
) -> None:
    text = "<|im_end|>\n<|im_start|>assistant\nAnswer:"
    hits, misses = _counts(codec)
    template = [codec.encode_template(text) for _ in range(3)]
    caller = [codec.encode_caller_text(text) for _ in range(3)]
    assert template == [_raw(tokenizer, text)] * 3
    assert caller == [_raw(plain, text)] * 3
    assert template[0] != caller[0]  # the special-token flag is part of the key
    assert _counts(codec) == (hits + 4, misses + 2)


def test_callers_get_their_own_lists(codec: HFCodec) -> None:
    first = codec.encode_template("Question: is it late?")
    first.append(-1)
    assert codec.encode_template("Question: is it late?")[-1] != -1


def test_long_texts_are_tokenized_every_time_and_never_kept(codec: HFCodec, plain: Tokenizer) -> None:
    state = "A state longer than the bound. " * (DEFAULT_MAX_SIZE // 10)
    before = _counts(codec)
    assert codec.encode_caller_text(state) == codec.encode_caller_text(state) == _raw(plain, state)
    assert _counts(codec) == before


def test_the_entry_count_is_bounded(codec: HFCodec) -> None:
    for n in range(DEFAULT_MAX_ENTRIES + 50):
        codec.encode_caller_text(f"ticket {n}")
    assert len(codec._encodings) == DEFAULT_MAX_ENTRIES


def test_renders_are_remembered_and_equal_to_a_fresh_render(codec: HFCodec) -> None:
    messages = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hi")]
    template = json.loads((qwen3_tokenizer_dir() / "tokenizer_config.json").read_text())["chat_template"]
    expected = render_chat_template(template, messages)
    hits = codec._renders.hits
    assert [codec.render(messages) for _ in range(2)] == [expected, expected]
    assert codec._renders.hits == hits + 1


def test_a_template_that_reads_the_clock_is_rendered_every_time(tokenizer: Tokenizer) -> None:
    codec = HFCodec(tokenizer, "{{ strftime_now('%d %b %Y') }}{% for m in messages %}{{ m.content }}{% endfor %}")
    messages = [ChatMessage(role="user", content="Hi")]
    assert codec.render(messages) == codec.render(messages)
    assert len(codec._renders) == 0 and codec._renders.hits == 0


def test_token_floors_of_repeated_texts_are_counted_once_and_unchanged(codec: HFCodec) -> None:
    text = "Which department should handle this?\nA) Payments and refunds\nB) Software bugs"
    hits = codec._floors.hits
    first = codec.min_tokens(text)
    assert codec.min_tokens(text) == first == codec._min_tokens(text) > 0
    assert codec._floors.hits == hits + 1
    long = "x" * (DEFAULT_MAX_SIZE + 1)
    assert codec.min_tokens(long) == codec._min_tokens(long)
    assert codec._floors.hits == hits + 1  # a long text (a large state) is counted every time, never kept
