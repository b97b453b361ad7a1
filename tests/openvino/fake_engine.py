"""A stand-in for the OpenVINO engine whose logits depend on how a prompt was split into steps.

Its "KV cache" is the list of steps a request ran (start, tokens); the logits after a step are a
pseudo-random function of that whole list. So two evaluations of one prompt agree only when they
were split the same way, which is what the backend's canonical pieces must guarantee, and a
restored snapshot must reproduce the steps exactly.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openjev.adapters.openvino.engine import Snapshot

VOCAB = 512


@dataclass
class FakeRequest:
    steps: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)

    @property
    def length(self) -> int:
        return sum(len(tokens) for _, tokens in self.steps)


class FakeEngine:
    vocab_size = VOCAB
    precision = "f32"

    def __init__(self) -> None:
        self.evaluated: list[tuple[int, int]] = []  # (start, tokens) of every step, in order
        self.read: list[tuple[int, int]] = []  # the steps whose logits were computed (`evaluate`)

    def new_request(self) -> FakeRequest:
        return FakeRequest()

    def reset(self, request: Any) -> None:
        request.steps.clear()

    def advance(self, request: Any, token_ids: Sequence[int], start: int) -> None:
        assert request.length == start, "a step must continue exactly what the request holds"
        request.steps.append((start, tuple(token_ids)))
        self.evaluated.append((start, len(token_ids)))

    def evaluate(self, request: Any, token_ids: Sequence[int], start: int) -> np.ndarray:
        self.advance(request, token_ids, start)
        self.read.append((start, len(token_ids)))
        seed = int.from_bytes(hashlib.sha256(repr(request.steps).encode()).digest()[:8], "little")
        return np.random.default_rng(seed).normal(0.0, 3.0, VOCAB).astype(np.float32)

    def snapshot(self, request: Any, length: int) -> Snapshot:
        assert request.length == length
        return Snapshot(length=length, arrays={"steps": np.frombuffer(pickle.dumps(request.steps), dtype=np.uint8)})

    def restore(self, request: Any, snapshot: Snapshot) -> None:
        request.steps[:] = pickle.loads(snapshot.arrays["steps"].tobytes())
