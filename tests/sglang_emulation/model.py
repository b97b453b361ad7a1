"""The emulator's made-up model: log-probabilities from a hash of the prompt, and a radix-like cache.

The log-probabilities are a deterministic hash of the input ids and the token id (`logprob_of`), not
a model. They are all negative and normalised only in expectation over the vocabulary; callers
renormalise over their labels anyway.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Sequence
from typing import Any

from tests.sglang_emulation.config import DEFAULT_VOCAB_SIZE

_SPREAD = 8.0  # logits are uniform in [0, _SPREAD): label probabilities differ by up to e^8.


def logprob_of(
    input_ids: Sequence[int], token_id: int, vocab_size: int = DEFAULT_VOCAB_SIZE, adapter: str | None = None
) -> float:
    """The emulator's log-probability of `token_id` as the next token after `input_ids`, with LoRA
    adapter `adapter` (`lora_path`) or without one.

    Exposed so that tests can compute the exact numbers an answer must be built from.
    """
    return logprob(seed(input_ids, adapter), token_id, vocab_size)


def seed(input_ids: Sequence[int], adapter: str | None = None) -> bytes:
    """The prompt's hash; an adapter changes every answer, deterministically (its name is hashed in)."""
    packed = struct.pack(f"<{len(input_ids)}q", *input_ids)
    if adapter is not None:
        packed += b"\0lora\0" + adapter.encode()
    return hashlib.blake2b(packed, digest_size=16).digest()


def logprob(prompt_seed: bytes, token_id: int, vocab_size: int) -> float:
    digest = hashlib.blake2b(prompt_seed + struct.pack("<q", token_id), digest_size=8).digest()
    logit = _SPREAD * int.from_bytes(digest, "little") / 2**64
    # log Z for logits uniform in [0, S) over V tokens, in expectation: log(V * (e^S - 1) / S).
    log_z = math.log(vocab_size) + math.log(math.expm1(_SPREAD) / _SPREAD)
    return logit - log_z


class Radix:
    """Prefix tree of token ids: the longest previously seen prefix, like SGLang's radix cache."""

    def __init__(self) -> None:
        self.root: dict[int, Any] = {}

    def match(self, ids: Sequence[int]) -> int:
        node, depth = self.root, 0
        for token in ids:
            child = node.get(token)
            if child is None:
                break
            node, depth = child, depth + 1
        return depth

    def insert(self, ids: Sequence[int]) -> None:
        node = self.root
        for token in ids:
            node = node.setdefault(token, {})
