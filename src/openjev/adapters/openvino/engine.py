"""OpenVINO's CPU runtime running the converted model: one blocking step at a time, exact by construction.

The model is stateful: each infer request keeps its own KV cache (one variable per layer and per K
or V), and a call continues from what its request holds. openjev evaluates a prompt in *canonical
pieces*: the request's shared prefix from position 0, then the rest from the prefix's end, each in
pieces of `PIECE` tokens. OpenVINO's kernels give bit-identical results for identical inputs and
shapes, and a KV cache saved after the prefix and restored later is bit for bit the one computed
(the cache is float32, `KV_CACHE_PRECISION`), so an answer depends only on its prompt and where
its prefix ends, never on what else ran, in what order, or what the cache held
(tests/integration/test_reproducible_answers.py). A long prompt in pieces also lets other
requests' calls run between them (backend.py).

Precision: weights are int8 (Q8_0). By default the matrix products also quantize their activations
to int8, in groups of 32 like the weights' blocks, and run on the CPU's int8 (VNNI) kernels: steps
1.0 to 2.8 times faster than bf16 products on the CPUs measured, still bit-identical from run to
run, label probabilities a few hundredths from the bf16 ones (docs/performance.md). With
`int8_activations` off they run in bf16 where the CPU has it (AVX-512 BF16, AMX) and f32 elsewhere,
within about 0.01 of llama.cpp's probabilities on the packaged model. The language-model head is
compiled apart and computes in float32 (`head_properties`): bf16 logits would put every answer's
log-odds on a grid of 1/16 or 1/8 and tie close labels exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from openjev.adapters.openvino.file_pages import FilePages
from openjev.domain.errors import BackendError, StartupError
from openjev.logs import get_logger

log = get_logger("openjev.openvino")
PIECE = 256  # tokens per engine step: the longest another request's call waits behind
RELEASE_EVERY_SECONDS = 30.0  # how often a call ends by giving back the model file's pages (file_pages.py)
ACTIVATION_GROUP = 32  # the weights' own block size (Q8_0): the only group OpenVINO's int8 kernels took


@dataclass(frozen=True)
class EngineConfig:
    model_xml: Path
    threads: int
    context: int  # the longest prompt one call may hold (its KV cache is allocated as it grows)
    int8_activations: bool = True  # activations quantized to int8 in groups of `ACTIVATION_GROUP`


@dataclass(frozen=True)
class Snapshot:
    """A request's KV cache after `length` tokens: one float32 array per state variable."""

    length: int
    arrays: dict[str, np.ndarray]

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self.arrays.values())


class Engine(Protocol):
    """What the backend drives: OpenVINO (`OpenVINOEngine`) or a test double. Every method blocks."""

    vocab_size: int
    precision: str

    def new_request(self) -> Any: ...

    def reset(self, request: Any) -> None: ...

    def advance(self, request: Any, token_ids: Sequence[int], start: int) -> None:
        """`evaluate` without the logits: for the pieces whose logits nobody reads (a prefix's, and
        every piece of a long call but its last)."""

    def evaluate(self, request: Any, token_ids: Sequence[int], start: int) -> np.ndarray: ...

    def snapshot(self, request: Any, length: int) -> Snapshot: ...

    def restore(self, request: Any, snapshot: Snapshot) -> None: ...


@dataclass(frozen=True)
class Request:
    """One sequence's infer requests: the body's holds its KV cache, the head's maps its last hidden
    state to logits."""

    body: Any
    head: Any


class OpenVINOEngine:
    """The compiled model and the steps the backend runs on its infer requests (blocking)."""

    def __init__(self, compiled: Any, config: EngineConfig, *, vocab_size: int, precision: str, head: Any) -> None:
        self._compiled = compiled
        self._head = head
        self.config = config
        self.vocab_size = vocab_size
        self.precision = precision
        self._file_pages = FilePages(config.model_xml.with_suffix(".bin"))
        self._released_at: float | None = None

    @classmethod
    def load(cls, config: EngineConfig) -> OpenVINOEngine:
        """Read the IR, cut its head to the last position and off the body, compile both (seconds)."""
        from openjev.adapters.openvino.graph import last_position_only, split_head

        started = time.perf_counter()
        core = _openvino().Core()
        try:
            model = core.read_model(config.model_xml)
            last_position_only(model)
            head = split_head(model)
            compiled = core.compile_model(model, "CPU", compile_properties(config))
            compiled_head = core.compile_model(head, "CPU", head_properties(config))
        except (RuntimeError, ValueError) as exc:
            raise StartupError(f"OpenVINO could not compile {config.model_xml}: {exc}") from None
        vocab = int(compiled_head.output("logits").get_partial_shape()[-1].get_length())
        precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
        if config.int8_activations:
            precision = f"{precision} with int8 activations"
        log.info(
            "openvino_engine_loaded",
            seconds=round(time.perf_counter() - started, 1),
            threads=config.threads,
            precision=precision,
            capabilities=",".join(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")),
        )
        return cls(compiled, config, vocab_size=vocab, precision=precision, head=compiled_head)

    def new_request(self) -> Request:
        return Request(body=self._compiled.create_infer_request(), head=self._head.create_infer_request())

    def reset(self, request: Request) -> None:
        request.body.reset_state()

    def evaluate(self, request: Request, token_ids: Sequence[int], start: int) -> np.ndarray:
        """Run `token_ids` at positions `start`… on what `request` holds (exactly `start` tokens);
        the logits after the last one (float32, one per vocabulary entry, computed in float32)."""
        self.advance(request, token_ids, start)
        try:
            request.head.infer({0: request.body.get_output_tensor(0)})
            logits: np.ndarray = request.head.get_tensor("logits").data[0, -1].copy()
        except RuntimeError as exc:
            raise BackendError(f"the OpenVINO engine failed: {exc}") from None
        self._release_file_pages()
        return logits

    def _release_file_pages(self) -> None:
        """After the first call (which repacked the weights) and then every `RELEASE_EVERY_SECONDS`, give
        back the model file's pages: resident memory is then what the engine uses (file_pages.py)."""
        now = time.monotonic()
        if self._released_at is None or now - self._released_at > RELEASE_EVERY_SECONDS:
            self._released_at = now
            self._file_pages.release()

    def advance(self, request: Request, token_ids: Sequence[int], start: int) -> None:
        """The body's step alone: the piece joins the KV cache, the head does not run."""
        if not token_ids:
            raise BackendError("cannot evaluate an empty piece of prompt")
        end = start + len(token_ids)
        if end > self.config.context:
            raise BackendError(f"a prompt of {end} tokens exceeds the engine's context of {self.config.context}")
        try:
            request.body.infer(step_inputs(token_ids, start))
        except RuntimeError as exc:
            raise BackendError(f"the OpenVINO engine failed: {exc}") from None

    def snapshot(self, request: Request, length: int) -> Snapshot:
        return Snapshot(length=length, arrays={s.name: s.state.data.copy() for s in request.body.query_state()})

    def restore(self, request: Request, snapshot: Snapshot) -> None:
        tensor = _openvino().Tensor
        for state in request.body.query_state():
            state.state = tensor(snapshot.arrays[state.name])


def _openvino() -> Any:
    """OpenVINO, imported only where an engine runs: `openjev serve` builds its runtime in the parent
    process before Granian forks the worker, and an OpenVINO runtime set up before a fork hung the
    child's `compile_model`."""
    import openvino as ov  # type: ignore[import-untyped]

    return ov


def compile_properties(config: EngineConfig) -> dict[str, Any]:
    """OpenVINO's CPU settings: one stream of `threads` threads (steps run one at a time), a float32
    KV cache, and activations quantized to int8 (group `ACTIVATION_GROUP`) or left in bf16/f32."""
    return {
        "PERFORMANCE_HINT": "LATENCY",
        "NUM_STREAMS": "1",
        "INFERENCE_NUM_THREADS": config.threads,
        "KV_CACHE_PRECISION": "f32",
        "DYNAMIC_QUANTIZATION_GROUP_SIZE": ACTIVATION_GROUP if config.int8_activations else 0,
    }


def head_properties(config: EngineConfig) -> dict[str, Any]:
    """The body's settings, but float32 products on float32 activations (the int8 weights widened),
    so the logits are not rounded to bf16's 8 significant bits; one position costs about 17 ms on
    two cores for a 151,936-token vocabulary."""
    return {**compile_properties(config), "INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}


def step_inputs(token_ids: Sequence[int], start: int) -> dict[str, np.ndarray]:
    """A stateful GenAI model's inputs for `token_ids` at positions `start`…, after the `start` its KV cache holds."""
    end = start + len(token_ids)
    return {
        "input_ids": np.asarray([token_ids], dtype=np.int64),
        "attention_mask": np.ones((1, end), dtype=np.int64),
        "position_ids": np.arange(start, end, dtype=np.int64)[None],
        "beam_idx": np.zeros(1, dtype=np.int32),
    }


def pieces(start: int, end: int) -> list[tuple[int, int]]:
    """The canonical pieces of positions start…end: `PIECE` tokens each, the last one shorter."""
    return [(at, min(at + PIECE, end)) for at in range(start, end, PIECE)]


def label_logprobs(logits: np.ndarray, label_ids: Sequence[int]) -> tuple[tuple[float, ...], float]:
    """The labels' log-probabilities under the full next-token softmax, and the labels' share of it."""
    values = logits.astype(np.float64)
    top = float(values.max())
    log_total = top + math.log(float(np.exp(values - top).sum()))
    logprobs = tuple(float(values[label]) - log_total for label in label_ids)
    for label, value in zip(label_ids, logprobs, strict=True):
        if not math.isfinite(value) or value > 0.0:
            raise BackendError(f"the OpenVINO engine gave token {label} the log-probability {value}")
    mass = math.fsum(math.exp(value) for value in dict(zip(label_ids, logprobs, strict=True)).values())
    return logprobs, min(1.0, mass)
