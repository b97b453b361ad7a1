"""What the use case returns for a decision: per ask a distribution or a refusal, plus the work it took."""

from __future__ import annotations

import msgspec


class Distribution(msgspec.Struct, frozen=True, kw_only=True):
    """An answer: probabilities over the ask's options, in its order, summing to 1 (full precision).

    `chosen` is the most probable option (the first one on ties). `confidence` follows the server's
    formula for choices and scales and is None for yes/no asks; `expected` is a scale's expected
    level Σ i·p_i (None otherwise). `label_mass` is set when the decision asked for it and the
    backend could measure it.
    """

    probabilities: tuple[float, ...]
    chosen: int
    confidence: float | None = None
    expected: float | None = None
    label_mass: float | None = None


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """The server declined to answer this ask under its refusal policy; `reason` says why."""

    reason: str
    label_mass: float | None = None


Result = Distribution | Refusal


class Work(msgspec.Struct, frozen=True, kw_only=True):
    """What the backend did for one decision, as it reported it.

    `input_tokens`: the prompt tokens of every call (the warm-up, every branch and every prior not
    cached), cached ones included; `calls`: single-token calls made. The cached figures are None
    when the backend does not report cache hits (never a made-up 0).
    """

    calls: int
    input_tokens: int
    prefix_tokens: int  # the shared prefix's tokens, as openjev tokenized them
    warm_prompt_tokens: int
    warm_cached_tokens: int | None
    branch_cached_tokens: int | None  # summed over the branches (and the priors asked)
    debias_calls: int = 0  # calls beyond one per ask: extra option orders and priors not cached
    prior_hits: int = 0  # priors served from the prior cache


class Timings(msgspec.Struct, frozen=True):
    """Seconds spent prefilling the shared prefix and running the branches."""

    prefill: float
    branches: float


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    results: tuple[Result, ...]  # one per ask, in the decision's order
    work: Work
    timings: Timings
