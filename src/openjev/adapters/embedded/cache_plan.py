"""Where llama.cpp must start evaluating a prompt for its answer not to depend on the cache (pure).

llama.cpp's CPU matrix kernels take the tokens of a batch in groups (`ALIGN` rows at a time, with
a different kernel for the rows left over), so a token's hidden state, and with it every later
token's, depends on where it sat in the batch that computed it. A prompt evaluated cold is one
batch from position 0 (split at the engine's batch size, a multiple of `ALIGN`); a prompt that
reuses a slot's cache is a batch from wherever the cached prefix ends. Measured on an x86-64 CPU
(AVX2) with Qwen2.5-Coder-1.5B Q4_K_M, the two give bit-identical label probabilities exactly when
the reused prefix ends at a multiple of `ALIGN` and the batch evaluated after it has at least
`MIN_BATCH` tokens (`benchmarks/probe_batch_invariance.py` prints the table).

So the deterministic backend never lets llama.cpp reuse a prefix that ends elsewhere: it plans the
reuse from what the slot holds, and when llama.cpp would reuse more than the planned start, a
*cut* first replaces the token at the start with another one (a one-token call), which makes the
slot's cache end there. The reply's `cache_n` then says whether the plan held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openjev.adapters.common_prefix import common_prefix_length

ALIGN = 8  # a reused prefix ends at a multiple of this many tokens
MIN_BATCH = 8  # tokens evaluated at least, after the reused prefix


@dataclass(frozen=True)
class CachePlan:
    """Evaluate the prompt from `start`; first send `cut` (a prompt) when the slot holds more."""

    start: int
    cut: tuple[int, ...] | None = None


def plan_score(held: Sequence[int] | None, prompt: Sequence[int], *, vocab_size: int) -> CachePlan:
    """The plan for a call that reads the next-token distribution after `prompt`.

    `held` is what the slot's cache holds (None: unknown, e.g. after an aborted call). llama.cpp
    reuses the common prefix of the two, less one token when that is the whole prompt (it always
    evaluates one).
    """
    reused = _reused(held, prompt)
    start = _aligned(min(reused, len(prompt) - MIN_BATCH))
    if held is not None and reused == start:
        return CachePlan(start=start)
    return CachePlan(start=start, cut=(*prompt[:start], _other_token(prompt[start], vocab_size)))


def warm_prefix(prefix: Sequence[int]) -> Sequence[int]:
    """The part of a shared prefix to warm: its whole groups of `ALIGN` tokens, so every token of
    it is computed as a cold evaluation of any longer prompt computes it (the rest is evaluated
    with each branch)."""
    return prefix[: _aligned(len(prefix))]


def canonical_start(start: int | None, prompt_tokens: int) -> bool:
    """Whether an evaluation that reused `start` tokens (llama.cpp's `cache_n`) gives the cold result."""
    return start is not None and start % ALIGN == 0 and (start == 0 or prompt_tokens - start >= MIN_BATCH)


def _reused(held: Sequence[int] | None, prompt: Sequence[int]) -> int:
    if held is None:
        return 0  # unknown (an aborted call left part of a prompt): start cold, after a cut at 0
    return min(common_prefix_length(held, prompt), len(prompt) - 1)


def _aligned(tokens: int) -> int:
    return max(tokens, 0) // ALIGN * ALIGN


def _other_token(token: int, vocab_size: int) -> int:
    """A token id that is not `token`, so the cut's prompt diverges from the slot's cache there."""
    return token + 1 if token + 1 < vocab_size else token - 1
