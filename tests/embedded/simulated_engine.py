"""A simulated llama.cpp engine for the embedded backend's tests (no model).

It answers the same streamed JSON llama.cpp does and applies llama.cpp's sampling semantics (logit
bias, top-k, softmax over the survivors, per-slot prefix cache). With `batch_noise`, it also
reproduces how llama.cpp's CPU kernels make a result depend on the batch that computed it (as
measured on the real engine, benchmarks/probe_batch_invariance.py): a token is computed exactly only
in a whole group of 8 of a batch that starts on a group boundary, has 8 tokens or more and runs alone.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from openjev.adapters.common_prefix import common_prefix_length
from openjev.adapters.embedded.llama_engine import EngineConfig

VOCAB = 64


def base_logits(prompt: list[int]) -> list[float]:
    shift = sum(prompt) % 5
    return [math.sin(t * 1.7 + shift) * 4.0 for t in range(VOCAB)]


class SimulatedEngine:
    """llama.cpp's completion stream, simulated with its sampling and prompt-cache semantics."""

    def __init__(self, slots: int = 2, slot_context: int = 256) -> None:
        self.slots = slots
        self.slot_context = slot_context
        self.vocab_size = VOCAB
        self.logits: Callable[[list[int]], list[float]] = base_logits
        self.never_returned: set[int] = set()
        self.batch_noise = False
        self._exact: dict[int, list[bool]] = {}  # per slot and cached token: computed as a cold batch would
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.release.set()
        self.started_calls = 0
        self.stopped_calls = 0
        self.busy_slots: list[int] = []
        self.overlap = False  # two calls in one slot at once
        self.most_at_once = 0  # the most calls in the engine at the same time
        self.shut_down = False
        self._cache: dict[int, list[int]] = {}
        self._lock = threading.Lock()

    def complete(self, body: bytes, on_chunk: Callable[[bytes], bool]) -> None:
        request = msgspec.json.decode(body)
        slot, prompt = request["id_slot"], request["prompt"]
        with self._lock:
            self.requests.append(request)
            self.started_calls += 1
            self.overlap = self.overlap or slot in self.busy_slots
            self.busy_slots.append(slot)
            self.most_at_once = max(self.most_at_once, len(self.busy_slots))
        try:
            self._run(request, slot, prompt, on_chunk)
        finally:
            with self._lock:
                self.busy_slots.remove(slot)

    def _run(self, request: dict[str, Any], slot: int, prompt: list[int], on_chunk: Callable[[bytes], bool]) -> None:
        if len(prompt) > self.slot_context:
            on_chunk(msgspec.json.encode({"error": {"code": 400, "message": "exceeds the available context size"}}))
            return
        cached = min(common_prefix_length(self._cache.get(slot, []), prompt), len(prompt) - 1)
        self._cache[slot] = list(prompt)
        noise = self._batch_noise(slot, cached, len(prompt))
        progress = {"choices": [{"text": "", "index": 0, "logprobs": None}], "prompt_progress": {"cache": cached}}
        if on_chunk(msgspec.json.encode(progress)):
            self.stopped_calls += 1
            return
        while not self.release.wait(0.005):
            if on_chunk(msgspec.json.encode(progress)):
                self.stopped_calls += 1
                return
        values = [v + noise * (t % 2) for t, v in enumerate(self.logits(prompt))]  # odd ids move
        for token, bias in request.get("logit_bias", []):
            values[token] += bias
        survivors = sorted(range(VOCAB), key=lambda t: -values[t])[: request.get("top_k", 40)]
        top = max(values[t] for t in survivors)
        weights = {t: math.exp(values[t] - top) for t in survivors}
        total = sum(weights.values())
        n_probs = request.get("n_probs", 0)
        entries = [{"id": t, "token": f"<{t}>", "prob": weights[t] / total} for t in survivors[:n_probs]]
        entries = [e for e in entries if e["id"] not in self.never_returned]
        logprobs = {"content": [{"id": survivors[0], "prob": 1.0, "top_probs": entries}]} if n_probs else None
        if on_chunk(msgspec.json.encode({"choices": [{"text": "x", "index": 0, "logprobs": logprobs}]})):
            self.stopped_calls += 1
            return
        usage = {"prompt_tokens": len(prompt), "prompt_tokens_details": {"cached_tokens": cached}}
        final = {"choices": [{"finish_reason": "length"}], "usage": usage, "timings": {"cache_n": cached}}
        on_chunk(msgspec.json.encode(final))

    def _batch_noise(self, slot: int, start: int, end: int) -> float:
        """0.0 when the read position comes out as in a cold evaluation of the prompt, else a few ulps' worth."""
        if not self.batch_noise:
            return 0.0
        alone = len(self.busy_slots) == 1
        size = end - start
        batch_ok = alone and start % 8 == 0 and (start == 0 or size >= 8)
        whole = start + size // 8 * 8 if batch_ok and size >= 8 else start
        exact = self._exact.get(slot, [])[:start] + [p < whole for p in range(start, end)]
        self._exact[slot] = exact
        reused_ok = all(exact[:start])
        return 0.0 if batch_ok and reused_ok else 1e-3 * (1 + start % 8 + (0 if alone else 3))

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]:
        return [ord(c) % VOCAB for c in text]

    def check_health(self) -> None:
        if self.shut_down:
            raise RuntimeError("gone")

    def shutdown(self) -> None:
        self.shut_down = True


def config(slots: int = 2, *, deterministic: bool = True) -> EngineConfig:
    return EngineConfig(
        model_path=Path("simulated.gguf"),
        threads=1,
        parallel_slots=slots,
        slot_context=256,
        deterministic=deterministic,
    )
