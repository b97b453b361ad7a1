"""llama.cpp's completion protocol, as the embedded backend speaks it (pure: no engine, no I/O).

Exact label probabilities. A branch call asks for one token with a uniform `logit_bias` on exactly
the label ids, `top_k` equal to the number of labels, only the top-k and temperature (1.0) samplers,
and `post_sampling_probs`: the probabilities llama.cpp reports are then the softmax over the label
logits alone, because a uniform bias cancels in that softmax. They are normalised over the labels
(they sum to 1 over the labels), so the log-probabilities returned here equal the model's raw
log-probabilities up to one constant per call; the domain's softmax removes that constant. The bias
is small (32) because it is added in float32: a bias of 1e5 would cost ~4e-4 in precision. If a
label is so improbable that another token outranks it even with the bias, it drops out of the top
k: the backend retries once with a large bias, and a label still missing is a BackendError.

Every call streams with `return_progress`, so llama.cpp reports after each prompt batch; the
`ReplyCollector` answers "stop" at such a report when the call was aborted, and llama.cpp cancels
the task. Stream chunks are decoded into the msgspec structs below (llama.cpp's server JSON, only
the fields openjev reads).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from openjev.domain.errors import BackendError
from openjev.domain.ports import CallUsage

LABEL_BIAS = 32.0  # exact to ~1e-7 in probability; enough for labels within 32 nats of the best token
FALLBACK_LABEL_BIAS = 1024.0  # retry for labels far below the best token: ~1e-4 precision at worst
# A label whose probability underflows float32 (more than ~103 nats below the best label) reads as
# this log-probability: the smallest positive float32, i.e. "at most this".
LOG_PROB_FLOOR = -149 * math.log(2)


# --- Requests ----------------------------------------------------------------------------------------


def warm_request(token_ids: Sequence[int], *, slot: int) -> dict[str, Any]:
    """Prefill `token_ids` into `slot` and sample one throw-away token as cheaply as possible."""
    return {
        **_common(token_ids, slot),
        "samplers": ["top_k"],
        "top_k": 1,
    }


def score_request(token_ids: Sequence[int], label_ids: Sequence[int], *, slot: int, bias: float) -> dict[str, Any]:
    """The next-token distribution over exactly `label_ids` (distinct), normalised over them."""
    return {
        **_common(token_ids, slot),
        "logit_bias": [[label, bias] for label in label_ids],
        "samplers": ["top_k", "temperature"],
        "top_k": len(label_ids),
        "temperature": 1.0,
        "n_probs": len(label_ids),
        "post_sampling_probs": True,
    }


def raw_request(token_ids: Sequence[int], *, slot: int, n_probs: int) -> dict[str, Any]:
    """The `n_probs` most probable next tokens under the model's own full-vocabulary softmax.

    With `post_sampling_probs` off, llama.cpp reports probabilities from the raw logits (no bias, no
    sampler): what the label mass is measured against.
    """
    return {**_common(token_ids, slot), "samplers": ["top_k"], "top_k": 1, "n_probs": n_probs}


def _common(token_ids: Sequence[int], slot: int) -> dict[str, Any]:
    return {
        "prompt": list(token_ids),
        "n_predict": 1,
        "cache_prompt": True,
        "id_slot": slot,
        "stream": True,
        "return_progress": True,
        "stream_options": {"include_usage": True},
        "seed": 0,
    }


# --- Replies: the stream chunks, as far as openjev reads them ---------------------------------------


class TopProb(msgspec.Struct):
    id: int
    prob: float


class TopLogprob(msgspec.Struct):
    id: int
    logprob: float


class TokenProbs(msgspec.Struct):
    top_probs: list[TopProb] | None = None  # post-sampling probabilities (`post_sampling_probs`)
    top_logprobs: list[TopLogprob] | None = None  # raw full-vocabulary log-probabilities


class ChoiceLogprobs(msgspec.Struct):
    content: list[TokenProbs] | None = None


class Choice(msgspec.Struct):
    logprobs: ChoiceLogprobs | None = None


class PromptTokensDetails(msgspec.Struct):
    cached_tokens: int | None = None


class Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    prompt_tokens_details: PromptTokensDetails | None = None


class Timings(msgspec.Struct):
    cache_n: int | None = None  # prompt tokens taken from the slot's cache


class Chunk(msgspec.Struct):
    """One streamed chunk. An error arrives as `{"error": ...}` or as a bare `{"message": ...}`."""

    choices: list[Choice] | msgspec.UnsetType | None = msgspec.UNSET
    usage: Usage | None = None
    timings: Timings | None = None
    error: Any = None
    message: Any = msgspec.UNSET

    def error_message(self) -> str | None:
        if self.error is not None:
            if isinstance(self.error, dict):
                return str(self.error.get("message") or self.error)
            return str(self.error)
        if self.message is not msgspec.UNSET and self.choices is msgspec.UNSET:
            return str(self.message or "an error reply without a message")
        return None


_decode_chunk = msgspec.json.Decoder(Chunk)


class ReplyCollector:
    """Stream callback: merges llama.cpp's chunks into one reply and says when to stop.

    Called by xllamacpp from the engine thread for each chunk (raw JSON bytes); returning True stops
    the stream, and llama.cpp cancels the task. It must never raise: xllamacpp would swallow it.
    """

    def __init__(self, should_stop: Callable[[], bool] = lambda: False) -> None:
        self._should_stop = should_stop
        self.top_probs: list[TopProb] | None = None
        self.top_logprobs: list[TopLogprob] | None = None
        self.usage: Usage | None = None
        self.timings: Timings | None = None
        self.error: str | None = None
        self.stopped = False

    def __call__(self, chunk: bytes | str | dict[str, Any]) -> bool:
        try:
            self.feed(msgspec.convert(chunk, Chunk) if isinstance(chunk, dict) else _decode_chunk.decode(chunk))
        except Exception as exc:  # noqa: BLE001 - a callback that raised would be swallowed by xllamacpp
            self.error = f"unreadable reply chunk: {exc}"
        if self.error is None and self._should_stop():
            self.stopped = True
        return self.stopped or self.error is not None

    def feed(self, chunk: Chunk) -> None:
        error = chunk.error_message()
        if error is not None:
            self.error = error
            return
        for choice in chunk.choices or ():
            content = choice.logprobs.content if choice.logprobs is not None else None
            if content:
                self.top_probs = list(content[0].top_probs or [])
                self.top_logprobs = list(content[0].top_logprobs or [])
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.timings is not None:
            self.timings = chunk.timings

    def reused(self) -> int | None:
        """The prompt tokens llama.cpp took from the slot's cache (None: not reported)."""
        details = self.usage.prompt_tokens_details if self.usage is not None else None
        if details is not None and details.cached_tokens is not None:
            return details.cached_tokens
        return self.timings.cache_n if self.timings is not None else None

    def call_usage(self) -> CallUsage:
        """Prompt tokens and the prompt tokens llama.cpp did not re-evaluate (taken from its cache)."""
        if self.usage is None:
            raise BackendError("the llama.cpp engine ended the call without reporting usage")
        cached = self.reused()
        if self.usage.prompt_tokens is None:
            raise BackendError(f"the llama.cpp engine reported no prompt token count: {self.usage}")
        return CallUsage(prompt_tokens=self.usage.prompt_tokens, cached_tokens=cached)


def label_probabilities(reply: ReplyCollector, label_ids: Sequence[int]) -> dict[int, float] | None:
    """The reported probability of every label id, or None when one is missing from the reply."""
    if reply.top_probs is None:
        raise BackendError("the llama.cpp engine returned no token probabilities")
    found = {entry.id: entry.prob for entry in reply.top_probs}
    if any(label not in found for label in label_ids):
        return None
    return {label: found[label] for label in label_ids}


def to_logprobs(probs: Mapping[int, float], label_ids: Sequence[int]) -> tuple[float, ...]:
    """Label-normalised log-probabilities in the order asked; an underflowed zero reads as the floor."""
    out: list[float] = []
    for label in label_ids:
        p = probs[label]
        if not math.isfinite(p) or p < 0.0 or p > 1.0 + 1e-6:
            raise BackendError(f"the llama.cpp engine reported probability {p} for token {label}")
        out.append(math.log(p) if p > 0.0 else LOG_PROB_FLOOR)
    return tuple(out)


def label_mass(reply: ReplyCollector, label_ids: Sequence[int], logprobs: Sequence[float]) -> float:
    """The labels' share of the full next-token distribution, from a `raw_request` reply.

    `logprobs` are the labels' label-normalised log-probabilities (from `score_request`), so each
    label's full probability is the mass times its normalised one: the labels the raw top list
    holds give the mass exactly (their full probabilities over their normalised ones). When none of
    them is in the list, every label is below its last entry, and that bound is returned: the mass
    is at most it (and tiny: the model wanted other tokens).
    """
    if not reply.top_logprobs:
        raise BackendError("the llama.cpp engine returned no raw token probabilities")
    raw = {entry.id: math.exp(entry.logprob) for entry in reply.top_logprobs}
    normalised = dict(zip(label_ids, (math.exp(x) for x in logprobs), strict=True))
    present = [label for label in normalised if label in raw]
    if present:
        share = math.fsum(normalised[label] for label in present)
        return min(1.0, math.fsum(raw[label] for label in present) / share) if share > 0 else 0.0
    return min(1.0, min(raw.values()) / max(normalised.values()))
