"""How much memory a training run needs, checked before the model is loaded.

The estimate: every weight PyTorch holds dequantized (4 bytes in float32, 2 in bfloat16; the layers
below the adapted ones instead take the size of the OpenVINO model when OpenVINO reads them), the
activations the backward pass keeps for the adapted layers over a step's packed prompts (`--batch`
of the longest), the LoRA factors with their gradients and AdamW moments, and every item's states
below the adapted layers (kept for the run).
Measured here: a 135M-parameter model on 250-token prompts peaks near the estimate (docs/tuning.md).
Too little memory stops the run before it starts, naming what to lower.
"""

from __future__ import annotations

from pathlib import Path

import torch

from openjev.domain.errors import StartupError
from openjev.tuning.decoder import Shape, parameter_count
from openjev.tuning.examples import TrainingItem

GB = 1024**3
OVERHEAD = 0.5 * GB  # the interpreter, PyTorch itself, the tokenizer


def available_memory() -> float | None:
    """MemAvailable from /proc/meminfo in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def needed(
    path: Path,
    shape: Shape,
    layers: int,
    rank: int,
    dtype: torch.dtype,
    tokens: int,
    cached: int,
    lower_bytes: int | None = None,
) -> tuple[float, float, float, float]:
    """(weights, activations, factors, kept states) in bytes; `tokens` is the longest pass (a step packs
    its items into one), `lower_bytes` the size of the engine that reads the unchanged layers when PyTorch
    does not hold them."""
    size = torch.finfo(dtype).bits // 8
    if lower_bytes is None:
        weights = parameter_count(path) * size
    else:
        weights = parameter_count(path, below=shape.layers - layers) * size + lower_bytes
    kv = shape.kv_heads * shape.head_dim
    per_token_layer = (8 * shape.width + 4 * kv + 4 * shape.ffn) * size  # what autograd keeps per adapted layer
    attention = shape.heads * tokens * tokens * size  # the scores, when the fused kernel does not apply
    activations = layers * (tokens * per_token_layer + attention)
    per_layer = (
        4 * shape.width + 2 * kv + 3 * shape.ffn + shape.width * 4 + shape.ffn * 3
    )  # inputs + outputs of 7 matrices
    factors = layers * rank * per_layer * 4 * 4  # the factors, their gradients and two AdamW moments, float32
    states = cached * shape.width * size  # the input of the first adapted block, kept for every item
    return weights, activations, factors, states


def check_memory(
    path: Path,
    shape: Shape,
    layers: int,
    rank: int,
    dtype: torch.dtype,
    longest: TrainingItem,
    cached: int,
    limit_gb: float | None,
    *,
    batch: int = 1,
    lower_bytes: int | None = None,
) -> None:
    """StartupError when the run would need more than `limit_gb` (default: the memory available now);
    `cached` is how many positions' states the run keeps (`frozen.cached_tokens`)."""
    tokens = batch * longest.longest
    weights, activations, factors, states = needed(path, shape, layers, rank, dtype, tokens, cached, lower_bytes)
    total = weights + activations + factors + states + OVERHEAD
    limit = limit_gb * GB if limit_gb is not None else available_memory()
    if limit is None or total <= limit:
        return
    where = "--max-memory-gb" if limit_gb is not None else "available"
    kind = str(dtype).removeprefix("torch.")
    raise StartupError(
        f"training needs about {total / GB:.1f} GB ({weights / GB:.1f} GB of weights in {kind}, "
        f"{activations / GB:.1f} GB of activations for {batch} of the longest prompt, {longest.longest} tokens "
        f"of item {longest.id}, over {layers} adapted layers, {states / GB:.1f} GB of the items' states below them), "
        f"and {limit / GB:.1f} GB is {where}: adapt fewer layers (--layers, now {layers}), a smaller --batch, fewer or "
        "shorter items, or tune a smaller --model"
    )
