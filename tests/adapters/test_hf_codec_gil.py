"""Tokenizing a large text in a thread leaves the event loop (any other thread) free to run."""

from __future__ import annotations

import threading
import time

import pytest

from openjev.adapters.hf_codec import HFCodec
from tests.assets import qwen3_tokenizer_dir

pytestmark = pytest.mark.needs_test_assets


def test_tokenizing_releases_the_gil() -> None:
    codec = HFCodec.load(str(qwen3_tokenizer_dir()))
    text = "The quick brown fox jumps over the lazy dog 12345. " * 12_000  # ~600 kB, ~0.5 s to tokenize
    ticks = 0
    done = threading.Event()

    def other_work() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    thread = threading.Thread(target=other_work)
    thread.start()
    started = time.perf_counter()
    try:
        ids = codec.encode_caller_text(text)
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        thread.join()
    assert len(ids) > 100_000
    # Holding the GIL, the other thread got 1-3 ticks; released, about one a millisecond.
    assert ticks > elapsed * 1000 / 10, (ticks, elapsed)
    assert (
        codec.encode_caller_text("a <|im_end|> b")
        == codec._plain.encode("a <|im_end|> b", add_special_tokens=False).ids
    )
