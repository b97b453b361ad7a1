"""A real ScoringBackend with made-up but deterministic numbers.

Label log-probabilities are a hash of the token ids it receives and the label id, so anything the
model never sees (a question id, the other questions, their order) cannot change an answer. It
reports prompt and cached tokens the way a radix cache would: the longest prefix it has already
seen, capped one short of the prompt.

Its memory is bounded (the prompts it remembers, by count and by bytes; the call log only when
asked for, as tests do) and the prefix comparison of a long prompt runs in a worker thread, so a
demo server with large requests neither grows nor stalls its event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import struct
import threading
from collections import OrderedDict
from collections.abc import Sequence

import msgspec

from openjev.adapters.common_prefix import common_prefix_length
from openjev.adapters.score_each import score_each
from openjev.domain.errors import BackendError
from openjev.domain.ports import BackendHealth, CallUsage, LabelScores, ScoreCall

_MAX_REMEMBERED = 256
MAX_REMEMBERED_BYTES = 32 * 1024 * 1024  # 4 bytes a token: at most 8M remembered tokens
OFF_LOOP_TOKENS = 16_384  # longer prompts are compared with the remembered ones in a worker thread
FAKE_VOCAB_SIZE = 262_144  # larger than any tokenizer the fake runs with; ids beyond it do not exist


class FakeBackend:
    def __init__(
        self,
        *,
        latency: float = 0.0,
        fail_after: int | None = None,
        swap_labels: bool = False,
        context: int | None = None,
        record_calls: bool = True,
    ) -> None:
        self.latency = latency
        self.fail_after = fail_after
        self.swap_labels = swap_labels
        self._context = context
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._seen_bytes = 0
        self._lock = threading.Lock()
        self.record_calls = record_calls  # tests read `calls`; a server does not keep them
        self.calls: list[tuple[str, str, tuple[int, ...], tuple[int, ...]]] = []  # (kind, id, tokens, labels)
        self.call_count = 0
        self.aborted: list[str] = []
        self.in_flight: set[str] = set()
        self.started = False

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.started = False

    async def health(self) -> BackendHealth:
        return BackendHealth(ok=self.started, detail="fake backend" if self.started else "not started")

    def context_tokens(self) -> int | None:
        return self._context

    def vocab_size(self) -> int | None:
        return FAKE_VOCAB_SIZE

    async def warm(self, call_id: str, token_ids: Sequence[int]) -> CallUsage:
        await self._enter("warm", call_id, token_ids, ())
        try:
            return await self._usage_of(token_ids)
        finally:
            self.in_flight.discard(call_id)

    async def score(self, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
        await self._enter("score", call_id, token_ids, label_ids)
        try:
            unknown = [label for label in label_ids if not 0 <= label < FAKE_VOCAB_SIZE]
            if unknown:
                raise BackendError(f"label token ids {unknown} are outside the vocabulary (size {FAKE_VOCAB_SIZE})")
            logprobs = [label_logprob(token_ids, label) for label in label_ids]
            if self.swap_labels:
                logprobs.reverse()
            return LabelScores(logprobs=tuple(logprobs), usage=await self._usage_of(token_ids))
        finally:
            self.in_flight.discard(call_id)

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        """Each call through `score`, concurrently (what tests override to inject a failure still applies).

        A call that asks for its label mass gets a made-up one, deterministic in its tokens and labels.
        """
        results = await score_each(self.score, calls)
        return [
            msgspec.structs.replace(result, label_mass=label_mass(call.token_ids, call.label_ids))
            if call.label_mass
            else result
            for call, result in zip(calls, results, strict=True)
        ]

    async def abort(self, call_ids: Sequence[str]) -> None:
        self.aborted.extend(call_ids)

    async def _enter(self, kind: str, call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> None:
        self.call_count += 1
        if self.record_calls:
            self.calls.append((kind, call_id, tuple(token_ids), tuple(label_ids)))
        self.in_flight.add(call_id)
        if self.latency:
            try:
                await asyncio.sleep(self.latency)
            except asyncio.CancelledError:
                self.in_flight.discard(call_id)
                raise
        if self.fail_after is not None and self.call_count > self.fail_after:
            self.in_flight.discard(call_id)
            raise BackendError(f"fake backend failure injected after {self.fail_after} calls")

    async def _usage_of(self, token_ids: Sequence[int]) -> CallUsage:
        if len(token_ids) > OFF_LOOP_TOKENS:
            return await asyncio.to_thread(self._usage, token_ids)
        return self._usage(token_ids)

    def _usage(self, token_ids: Sequence[int]) -> CallUsage:
        data = _pack(token_ids)  # 4 bytes a token: the common prefix is compared at memcmp speed
        with self._lock:
            cached = max((common_prefix_length(data, seen) for seen in self._seen), default=0) // 4
            if data not in self._seen:
                self._seen_bytes += len(data)
            self._seen[data] = None
            self._seen.move_to_end(data)
            while len(self._seen) > _MAX_REMEMBERED or (
                self._seen_bytes > MAX_REMEMBERED_BYTES and len(self._seen) > 1
            ):
                forgotten, _ = self._seen.popitem(last=False)
                self._seen_bytes -= len(forgotten)
        return CallUsage(prompt_tokens=len(token_ids), cached_tokens=min(cached, max(len(token_ids) - 1, 0)))

    @property
    def remembered_bytes(self) -> int:
        return self._seen_bytes


def label_logprob(token_ids: Sequence[int], label: int) -> float:
    """The fake model's log-probability of `label` after `token_ids` (before any label swap)."""
    return _logprob(_pack(token_ids), label)


def label_mass(token_ids: Sequence[int], label_ids: Sequence[int]) -> float:
    """The fake model's share of next-token probability on `label_ids`, in (e^-8, 1]."""
    return math.exp(_logprob(_pack(token_ids) + _pack(label_ids), FAKE_VOCAB_SIZE))


def _pack(token_ids: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(token_ids)}I", *token_ids)


def _logprob(seed: bytes, label: int) -> float:
    digest = hashlib.blake2b(seed + struct.pack("<I", label), digest_size=8).digest()
    return -8.0 * int.from_bytes(digest, "little") / 2**64
