"""Paths of the test assets that scripts/fetch-test-assets brings from the npm registry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
