"""A sound lower bound on how many tokens a text takes, from its bytes alone (no tokenizing).

The tokens of a text cover its bytes without overlap. Give every byte value `b` the weight
`1 / L(b)`, where `L(b)` is the length of the longest vocabulary token that contains `b`: one token
then weighs at most 1 (each of its bytes weighs at most 1 / its length), so the token count is at
least the sum of the text's byte weights. A plain `bytes / longest token` bound is far weaker:
Qwen's longest token is 128 spaces, while no token holding a letter is longer than 42 bytes.

The bound needs the tokens to cover exactly the text's UTF-8 bytes: a byte-level BPE whose
pre-tokenizers drop nothing, after a Unicode normalizer or none. For any other tokenizer
`for_tokenizer` gives None and the caller tokenizes as before (no early refusal, never a wrong one).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from tokenizers import Tokenizer

# Weights are rounded down to 1 / (one of these lengths), so a text is counted in a few passes.
_LENGTH_CLASSES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024)
_UNICODE_NORMALIZERS = frozenset({"NFC", "NFD", "NFKC", "NFKD"})  # none of them changes ASCII text
_KEEPING_SPLITS = frozenset({"Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"})


class ByteTokenFloor:
    """`of(data)` ≤ the number of tokens any tokenization of `data` into these tokens uses."""

    def __init__(self, longest_with: list[int]) -> None:
        classes: dict[int, list[int]] = {}
        for byte, longest in enumerate(longest_with):
            if longest:  # a byte no token holds cannot be covered: weight 0 keeps the bound sound
                size = next((c for c in _LENGTH_CLASSES if c >= longest), None)
                if size is not None:
                    classes.setdefault(size, []).append(byte)
        self._classes = tuple(sorted(classes.items()))
        tables = tuple(_marker_table(members) for _, members in self._classes)
        # Exact integer arithmetic: a byte of class `size` weighs `scale // size` / `scale` (a
        # Fraction sum cost 30 µs for a question's text, most of the bound's time).
        self._scale = math.lcm(*(size for size, _ in self._classes)) if self._classes else 1
        self._weighted = tuple(
            (table, self._scale // size) for (size, _), table in zip(self._classes, tables, strict=True)
        )

    @classmethod
    def from_tokens(cls, tokens: Iterable[bytes]) -> ByteTokenFloor:
        longest_with = [0] * 256
        for token in tokens:
            for byte in set(token):
                longest_with[byte] = max(longest_with[byte], len(token))
        return cls(longest_with)

    def of(self, data: bytes) -> int:
        total = 0
        for table, weight in self._weighted:
            total += data.translate(table).count(1) * weight
        return -(-total // self._scale)  # the ceiling, exactly (no float, no Fraction)


def _marker_table(members: list[int]) -> bytes:
    """A translation table that maps `members` to 1 and every other byte to 0."""
    table = bytearray(256)
    for byte in members:
        table[byte] = 1
    return bytes(table)


def for_tokenizer(tokenizer: Tokenizer) -> tuple[ByteTokenFloor, Any] | None:
    """The floor of a byte-level BPE and its normalizer (None: no normalizer), or None when unsound."""
    spec: dict[str, Any] = json.loads(tokenizer.to_str())
    if spec.get("truncation") is not None:
        return None
    model = spec.get("model") or {}
    if model.get("type") != "BPE" or model.get("fuse_unk") or model.get("dropout"):
        return None
    if not _keeps_every_byte(spec.get("pre_tokenizer")):
        return None
    normalizer = spec.get("normalizer")
    if normalizer is not None and normalizer.get("type") not in _UNICODE_NORMALIZERS:
        return None
    to_byte = {char: byte for byte, char in _byte_level_alphabet().items()}
    tokens: list[bytes] = []
    for token in model.get("vocab", {}):
        try:
            tokens.append(bytes(to_byte[c] for c in token))
        except KeyError:
            tokens.append(token.encode())  # not byte-level text: counts by its UTF-8 length (an overestimate)
    return ByteTokenFloor.from_tokens(tokens), tokenizer.normalizer


def _keeps_every_byte(pre_tokenizer: dict[str, Any] | None) -> bool:
    """A ByteLevel pre-tokenizer, after splits that keep every character."""
    if pre_tokenizer is None:
        return False
    steps = pre_tokenizer["pretokenizers"] if pre_tokenizer.get("type") == "Sequence" else [pre_tokenizer]
    kinds = [step.get("type") for step in steps]
    if "ByteLevel" not in kinds:
        return False
    return all(
        kind in ("ByteLevel", "Digits") or (kind == "Split" and step.get("behavior") in _KEEPING_SPLITS)
        for kind, step in zip(kinds, steps, strict=True)
    )


def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte-to-character map, the one ByteLevel vocabularies are written in."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}
