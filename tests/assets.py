"""Paths of the test assets that scripts/fetch-test-assets brings from the npm registry."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from openjev.domain.ports import ChatMessage

ROOT = Path(__file__).resolve().parent.parent
# TEST_ASSETS_DIR moves them (the test of the prerequisites check points it at an empty folder).
TEST_ASSETS = Path(os.environ.get("TEST_ASSETS_DIR") or ROOT / ".cache" / "test-assets")
QWEN3_TOKENIZER = TEST_ASSETS / "qwen3"
FETCH_HINT = "run scripts/fetch-test-assets first"


def have_qwen3_tokenizer() -> bool:
    return (QWEN3_TOKENIZER / "tokenizer.json").is_file() and (QWEN3_TOKENIZER / "tokenizer_config.json").is_file()


def qwen3_tokenizer_dir() -> Path:
    """The Qwen3 tokenizer.json + tokenizer_config.json, or a failure that says how to get them."""
    if not have_qwen3_tokenizer():
        pytest.fail(f"the Qwen3 tokenizer is missing: {FETCH_HINT} (scripts/test does)")
    return QWEN3_TOKENIZER


class CountingCodec:
    """The Qwen3 tokenizer, counting the caller characters it is asked to tokenize: a test proves a
    refusal came before tokenizing by a count of zero."""

    def __init__(self) -> None:
        from openjev.adapters.hf_codec import HFCodec

        self.inner = HFCodec.load(str(qwen3_tokenizer_dir()))
        self.caller_chars = 0

    def render(self, messages: Sequence[ChatMessage]) -> str:
        return self.inner.render(messages)

    def encode_template(self, text: str) -> list[int]:
        return self.inner.encode_template(text)

    def encode_caller_text(self, text: str) -> list[int]:
        self.caller_chars += len(text)
        return self.inner.encode_caller_text(text)

    def min_tokens(self, text: str) -> int:
        return self.inner.min_tokens(text)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.inner.decode(token_ids)
