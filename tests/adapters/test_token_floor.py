"""The byte-count floor on tokens never exceeds the real count, and is tight enough to matter."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.hf_codec import HFCodec
from openjev.adapters.token_floor import ByteTokenFloor, for_tokenizer
from tests.assets import qwen3_tokenizer_dir

pytestmark = pytest.mark.needs_test_assets

# Runs the long tokens are made of (spaces, dashes, slashes), combining marks, Hangul jamo (NFC
# composes three into one syllable), CJK, emoji, digits and letters.
PIECES = [" ", "  ", "\n", "\t", "-", "=", "/", "*", "_", "#", "e", "x", "The", " quick", "0", "7", "é", "e\u0301",
          "\u1100\u1161\u11a8", "한", "漢字", "🙂", "\u0301", "<|im_end|>", "'s", "ﬁ", "Å"]  # fmt: skip
texts = st.lists(
    st.tuples(st.sampled_from(PIECES), st.integers(min_value=1, max_value=200)), min_size=1, max_size=30
).map(lambda runs: "".join(piece * count for piece, count in runs))


@cache
def qwen3() -> HFCodec:
    return HFCodec.load(str(qwen3_tokenizer_dir()))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_the_floor_never_exceeds_the_real_count(text: str) -> None:
    for codec in (qwen3(), ChatMLByteCodec()):
        assert codec.min_tokens(text) <= len(codec.encode_caller_text(text))


def test_the_floor_refuses_a_two_megabyte_state_at_the_default_limits() -> None:
    text = ("The quick brown fox jumps over the lazy dog. " * 50_000)[:2_000_000]
    assert qwen3().min_tokens(text) > 32_768  # the default per-question limit


def test_weights_follow_the_longest_token_holding_each_byte() -> None:
    floor = ByteTokenFloor.from_tokens([b"a", b"b", b" ", b"    ", b"ab"])
    assert floor.of(b"ab" * 10) == 10  # a and b sit in tokens of at most 2 bytes
    assert floor.of(b" " * 8) == 2  # spaces in tokens of up to 4
    assert floor.of(b"") == 0 and floor.of(b"z") == 0  # a byte no token holds weighs nothing


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=1024), min_size=256, max_size=256), st.binary(max_size=600))
def test_the_floor_is_the_exact_ceiling_of_the_byte_weights(longest_with: list[int], data: bytes) -> None:
    floor = ByteTokenFloor(longest_with)
    classes = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)
    weight = [Fraction(1, next(c for c in classes if c >= n)) if n else Fraction(0) for n in longest_with]
    assert floor.of(data) == math.ceil(sum((weight[b] for b in data), Fraction(0)))


def test_no_floor_for_tokenizers_whose_tokens_do_not_cover_the_bytes() -> None:
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    assert for_tokenizer(wordpiece) is None  # one [UNK] stands for a whole word
    bpe = Tokenizer(models.BPE({"a": 0, "b": 1}, []))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    assert for_tokenizer(bpe) is not None
    bpe.normalizer = normalizers.Strip()  # drops whitespace before the tokens see it
    assert for_tokenizer(bpe) is None
