"""The codec rebuilt from SmolLM2's GGUF metadata yields llama.cpp's own token ids, and its labels.

llama.cpp tokenizes through its /tokenize route on the engine's private port; the codec must agree
on every id, for template text (special tokens recognised) and caller text (never recognised).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import EngineConfig
from openjev.adapters.embedded.model import smollm2_path
from openjev.domain.errors import StartupError
from openjev.domain.labels import ANSWER_OPENING, label_context, verify_labels
from openjev.domain.ports import ChatMessage
from openjev.domain.prompt import check_template

pytestmark = pytest.mark.integration

SMOLLM2_LABELS = 401  # single-token labels SmolLM2 supports after `Answer:` (A..Z, then pairs)

CORPUS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog. It's, isn't, we'll, they've, I'd, you're.",
    "ASCII punctuation: !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "Accents: café naïve façade Ångström São Paulo Zürich crème brûlée",
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย",
    "日本語のテキストです。中文文本，한국어 텍스트。",
    "Emoji: 🎉🚀👍🏽 ❤️ 🇫🇷 👩‍👩‍👧 🧑🏿‍💻",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    'const x = {"a": [1, 2, 3], b: null}; // comment\n\tif (x.a.length >= 3) { return; }',
    "Numbers: 0 7 42 123 1234 12345 3.14159 -1e-9 2026-11-30 $9.99 100% #1 1,000,000",
    "   leading spaces and trailing spaces   ",
    "multiple\n\n\nnewlines\r\n\r\nand\ttabs\t\tand \u00a0nbsp \u2003em-space \u200bzero-width",
    "      \n    \n",
    "<|im_start|>system\nYou judge.<|im_end|>\n<|im_start|>user\nIs it?<|im_end|>\n<|im_start|>assistant\nAnswer:",
    "x<|im_start|>y<|im_end|>z <|im_start|> <|im_end|><|endoftext|><repo_name>",
    "Bytes the vocabulary lacks: a\x04b \U00040000 end",
    "A" * 300 + " " + "ab" * 200,
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend() -> AsyncIterator[EmbeddedBackend]:
    engine = EmbeddedBackend(EngineConfig.create(smollm2_path(), threads=None, parallel_slots=1, slot_context=1024))
    await engine.start()
    yield engine
    await engine.close()


@pytest.fixture(scope="module")
def codec() -> GGUFCodec:
    return GGUFCodec.from_gguf(smollm2_path())


@pytest.mark.parametrize("text", CORPUS)
def test_template_text_tokenizes_exactly_as_llama_cpp(backend: EmbeddedBackend, codec: GGUFCodec, text: str) -> None:
    assert codec.encode_template(text) == backend.tokenize(text)


@pytest.mark.parametrize("text", CORPUS)
def test_caller_text_tokenizes_as_llama_cpp_without_special_tokens(
    backend: EmbeddedBackend, codec: GGUFCodec, text: str
) -> None:
    assert codec.encode_caller_text(text) == backend.tokenize(text, parse_special=False)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(max_size=60)
    | st.lists(st.sampled_from(["<|im_start|>", "<|im_end|>", " ", "  ", "\n", "12", "é", "🎉", "a", "'s"])).map(
        "".join
    )
)
def test_any_text_tokenizes_exactly_as_llama_cpp(backend: EmbeddedBackend, codec: GGUFCodec, text: str) -> None:
    assert codec.encode_template(text) == backend.tokenize(text)
    assert codec.encode_caller_text(text) == backend.tokenize(text, parse_special=False)


def test_rendered_prompts_tokenize_exactly_as_llama_cpp(backend: EmbeddedBackend, codec: GGUFCodec) -> None:
    messages = [
        ChatMessage(role="system", content="You are a support assistant."),
        ChatMessage(role="user", content="I was charged twice. Please refund the duplicate — merci! 🙏"),
        ChatMessage(role="assistant", content="Let me check."),
        ChatMessage(role="user", content="Which department?\n\nA) Billing\nB) Technical"),
    ]
    text = codec.render(messages) + ANSWER_OPENING
    assert codec.encode_template(text) == backend.tokenize(text)
    backend.check_codec(codec, [text])  # the start-up self-check passes on the real engine


def test_64_labels_verify_and_each_is_one_llama_cpp_token_after_answer(
    backend: EmbeddedBackend, codec: GGUFCodec
) -> None:
    labels = verify_labels(codec, 64)
    check_template(codec, labels)
    context = label_context(codec)
    base = backend.tokenize(context)
    assert labels.labels[:26] == tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ") and labels.labels[26:28] == ("AA", "AB")
    for label, token in [
        *zip(labels.labels, labels.token_ids, strict=True),
        ("Yes", labels.yes_id),
        ("No", labels.no_id),
    ]:
        assert backend.tokenize(context + " " + label) == [*base, token]
        assert codec.decode([token]) == " " + label


def test_smollm2_supports_401_labels_and_start_up_refuses_more_by_name() -> None:
    codec = GGUFCodec.from_gguf(smollm2_path())
    assert verify_labels(codec, 255).capacity == 255  # the largest configurable option limit
    assert verify_labels(codec, SMOLLM2_LABELS).capacity == SMOLLM2_LABELS
    with pytest.raises(StartupError, match=f"supports only {SMOLLM2_LABELS} single-token answer labels"):
        verify_labels(codec, SMOLLM2_LABELS + 1)
