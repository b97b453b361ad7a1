"""A GGUF decoder model in PyTorch with LoRA factors on its matrices: what `openjev tune` trains.

The weights are the served GGUF's own, dequantized, so an adapter learns a change to the very model
the server runs and merges back onto it. Only what decisions read is computed: the last position's
logits over the label ids, never the whole vocabulary. Two architectures, as llama.cpp computes them:
`llama` (its GGUFs store q and k permuted for rotation of adjacent pairs) and `qwen2` (rotation of
halves, biases on q, k and v). The layers below the adapted ones run without gradients, which saves
their activations' memory and their backward pass (`--layers`); a step packs its few prompts into one
sequence (`packed_logits`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf.quants import dequantize
from torch import nn
from torch.nn import functional

from openjev.adapters.embedded.gguf_file import read_gguf_metadata, read_layout
from openjev.domain.errors import StartupError

ROPE_STYLES = {"llama": "pairs", "qwen2": "halves"}
KV = tuple[torch.Tensor, torch.Tensor]  # one block's keys and values, (positions, kv heads, head dim)
ADAPTED = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


@dataclass(frozen=True)
class Shape:
    """The hyperparameters a forward pass needs, from the GGUF's metadata."""

    architecture: str
    layers: int
    width: int
    ffn: int
    heads: int
    kv_heads: int
    eps: float
    rope_base: float

    @property
    def head_dim(self) -> int:
        return self.width // self.heads

    @classmethod
    def of(cls, metadata: dict[str, Any], source: Path) -> Shape:
        arch = str(metadata.get("general.architecture"))
        if arch not in ROPE_STYLES:
            raise StartupError(
                f"{source.name} is a `{arch}` model: openjev tune trains {' and '.join(ROPE_STYLES)} models "
                "(the packaged ones among them)"
            )
        scaling = metadata.get(f"{arch}.rope.scaling.type")
        if scaling not in (None, "none") and metadata.get(f"{arch}.rope.scaling.factor", 1.0) != 1.0:
            raise StartupError(f"{source.name} scales its rotary embeddings ({scaling}): openjev tune does not")
        heads = int(metadata[f"{arch}.attention.head_count"])
        return cls(
            architecture=arch,
            layers=int(metadata[f"{arch}.block_count"]),
            width=int(metadata[f"{arch}.embedding_length"]),
            ffn=int(metadata[f"{arch}.feed_forward_length"]),
            heads=heads,
            kv_heads=int(metadata.get(f"{arch}.attention.head_count_kv", heads)),
            eps=float(metadata[f"{arch}.attention.layer_norm_rms_epsilon"]),
            rope_base=float(metadata.get(f"{arch}.rope.freq_base", 10000.0)),
        )


class LoRALinear(nn.Module):
    """A frozen matrix (GGUF name `name`) plus (alpha / rank) · B·A, A and B trained (B starts at zero)."""

    def __init__(self, name: str, weight: torch.Tensor, bias: torch.Tensor | None, rank: int, alpha: float) -> None:
        super().__init__()
        self.name = name
        self.weight = weight
        self.bias = bias
        self.scale = alpha / rank if rank else 0.0
        self.a: nn.Parameter | None = None
        self.b: nn.Parameter | None = None
        if rank:
            outputs, inputs = weight.shape
            bound = 1 / math.sqrt(inputs)  # PEFT's default start for A (Kaiming-uniform with a = √5)
            self.a = nn.Parameter(torch.empty(rank, inputs, dtype=torch.float32).uniform_(-bound, bound))
            self.b = nn.Parameter(torch.zeros(outputs, rank, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = functional.linear(x, self.weight, self.bias)
        if self.a is None or self.b is None:
            return y
        return y + functional.linear(functional.linear(x, self.a.to(x.dtype)), self.b.to(x.dtype)) * self.scale


class Block(nn.Module):
    def __init__(self, shape: Shape, tensors: dict[str, torch.Tensor], index: int, rank: int, alpha: float) -> None:
        super().__init__()
        self.shape = shape

        def linear(part: str) -> LoRALinear:
            name = f"blk.{index}.{part}.weight"
            return LoRALinear(name, tensors[name], tensors.get(f"blk.{index}.{part}.bias"), rank, alpha)

        self.q, self.k, self.v, self.o = (linear(p) for p in ADAPTED[:4])
        self.gate, self.up, self.down = (linear(p) for p in ADAPTED[4:])
        self.attn_norm = tensors[f"blk.{index}.attn_norm.weight"]
        self.ffn_norm = tensors[f"blk.{index}.ffn_norm.weight"]

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        past: KV | None = None,
        *,
        mask: torch.Tensor | None = None,
        rows: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, KV]:
        """The block's output for `x` (positions after the `past` keys and values), and the keys and values of
        every position so far. `mask` (queries × keys, True where a query sees a key) replaces the causal
        one; `rows` computes the output of those positions alone (the top block's other outputs feed nothing
        a decision reads)."""
        s, length = self.shape, x.shape[0]
        n = functional.rms_norm(x, (s.width,), self.attn_norm, s.eps)
        k = rotate(self.k(n).view(length, s.kv_heads, s.head_dim), cos, sin, s.architecture)
        v = self.v(n).view(length, s.kv_heads, s.head_dim)
        if past is not None:
            k, v = torch.cat((past[0], k)), torch.cat((past[1], v))
        if mask is None and (past is not None or rows is not None):  # each position sees the past and itself
            mask = torch.ones(length, k.shape[0], dtype=torch.bool).tril(k.shape[0] - length)
        if rows is not None:
            assert mask is not None
            x, n, cos, sin, mask = x[rows], n[rows], cos[rows], sin[rows], mask[rows]
        queries = x.shape[0]
        q = rotate(self.q(n).view(queries, s.heads, s.head_dim), cos, sin, s.architecture)
        attended = functional.scaled_dot_product_attention(
            q.transpose(0, 1),
            k.transpose(0, 1),
            v.transpose(0, 1),
            attn_mask=mask,
            is_causal=mask is None,
            enable_gqa=True,
        )
        x = x + self.o(attended.transpose(0, 1).reshape(queries, s.width))
        n = functional.rms_norm(x, (s.width,), self.ffn_norm, s.eps)
        out: torch.Tensor = x + self.down(functional.silu(self.gate(n)) * self.up(n))
        return out, (k, v)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, architecture: str) -> torch.Tensor:
    """Rotary embeddings as llama.cpp applies them to this architecture's (length, heads, dim) `x`."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    if ROPE_STYLES[architecture] == "halves":
        first, second = x.chunk(2, dim=-1)
        return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Decoder(nn.Module):
    """The model, its top `adapted_layers` blocks with LoRA factors of `rank` on every matrix.

    Without `lower`, the blocks below the adapted ones are not built (another engine reads the prompts
    through them: lower.py), and `frozen_states` is not available."""

    def __init__(
        self, shape: Shape, tensors: dict[str, torch.Tensor], *, rank: int, adapted_layers: int, lower: bool = True
    ) -> None:
        super().__init__()
        self.shape = shape
        self.first_adapted = shape.layers - adapted_layers
        alpha = 2.0 * rank
        below = range(self.first_adapted if lower else 0)
        self.lower = nn.ModuleList(Block(shape, tensors, i, 0, alpha) for i in below)
        self.top = nn.ModuleList(Block(shape, tensors, i, rank, alpha) for i in range(self.first_adapted, shape.layers))
        self.embedding = tensors["token_embd.weight"]
        self.output = tensors.get("output.weight", self.embedding)  # tied embeddings: the same matrix
        self.output_norm = tensors["output_norm.weight"]
        half = shape.head_dim // 2
        self.inverse_frequencies = shape.rope_base ** (-torch.arange(half, dtype=torch.float64) / half)

    @property
    def dtype(self) -> torch.dtype:
        return self.embedding.dtype

    def adapted(self) -> list[LoRALinear]:
        return [m for m in self.modules() if isinstance(m, LoRALinear) and m.a is not None]

    def rotation(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The rotary (cos, sin) of positions start … start + length - 1, in the weights' dtype."""
        return self.rotation_at(torch.arange(start, start + length, dtype=torch.float64))

    def rotation_at(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = positions.to(torch.float64)[:, None] * self.inverse_frequencies[None, :]
        return angles.cos().to(self.dtype), angles.sin().to(self.dtype)

    def frozen_states(self, token_ids: Sequence[int], past: Sequence[KV] = ()) -> tuple[torch.Tensor, list[KV]]:
        """What the blocks below the adapted ones make of `token_ids` (following the positions whose keys and
        values are `past`, one pair a block): the input of the first adapted block, and each frozen block's
        keys and values so far. No gradients: these layers do not change, so their output is computed once."""
        if len(self.lower) != self.first_adapted:
            raise RuntimeError("the blocks below the adapted ones were not loaded (lower=False)")
        start = past[0][0].shape[0] if past else 0
        cos, sin = self.rotation(start, len(token_ids))
        kept: list[KV] = []
        with torch.no_grad():
            x = self.embedding[torch.tensor(token_ids, dtype=torch.long)]
            for index, block in enumerate(self.lower):
                x, kv = block(x, cos, sin, past[index] if past else None)
                kept.append(kv)
        return x, kept

    def top_logits(self, states: torch.Tensor, label_ids: tuple[int, ...]) -> torch.Tensor:
        """The logits of `label_ids` for the next token, from the first adapted block's input (float32)."""
        return self.packed_logits(states[:0], [states], [label_ids])[0]

    def packed_logits(
        self, head: torch.Tensor, parts: Sequence[torch.Tensor], label_ids: Sequence[tuple[int, ...]]
    ) -> list[torch.Tensor]:
        """The logits of `label_ids[i]` after the prompt `head` + `parts[i]`, for every i, in one pass.

        The prompts share their start (`head`, the states at the first adapted block): it is computed once
        and packed with every part into one sequence, each part seeing the head and its own earlier positions
        at the positions it would have alone. One pass over a few prompts packed multiplies larger matrices,
        which the CPU does faster, and computes the head once."""
        starts = [head.shape[0]]
        for part in parts:
            starts.append(starts[-1] + part.shape[0])
        x = torch.cat((head, *parts))
        own = torch.zeros(x.shape[0], dtype=torch.long)  # 0: the head; i + 1: part i
        positions = torch.arange(x.shape[0])
        for number, (start, end) in enumerate(itertools.pairwise(starts), start=1):
            own[start:end] = number
            positions[start:end] -= start - head.shape[0]
        sees = (own[None, :] == 0) | (own[None, :] == own[:, None])
        mask = sees & (positions[None, :] <= positions[:, None])
        cos, sin = self.rotation_at(positions)
        lasts = torch.tensor(starts[1:]) - 1
        for index, block in enumerate(self.top):
            x, _ = block(x, cos, sin, mask=mask, rows=lasts if index == len(self.top) - 1 else None)
        last = functional.rms_norm(x, (self.shape.width,), self.output_norm, self.shape.eps)
        pairs = zip(label_ids, last, strict=True)
        return [(self.output[torch.tensor(ids, dtype=torch.long)] @ row).float() for ids, row in pairs]


def read_shape(path: Path) -> Shape:
    return Shape.of(read_gguf_metadata(path, arrays=False), path)


def load_decoder(path: Path, *, rank: int, layers: int, dtype: torch.dtype, seed: int, lower: bool = True) -> Decoder:
    """The GGUF at `path` in PyTorch, its top `layers` blocks with fresh LoRA factors (and, with `lower`, the
    blocks below them: without, their weights are not even read)."""
    shape = read_shape(path)
    if not 1 <= layers <= shape.layers:
        raise StartupError(f"--layers {layers}: the model has {shape.layers} layers; adapt 1 to {shape.layers}")
    layout = read_layout(path)
    data = np.memmap(path, np.uint8, "r")
    skipped = set() if lower else {f"blk.{i}." for i in range(shape.layers - layers)}
    tensors: dict[str, torch.Tensor] = {}
    for tensor in layout.tensors:
        if block_prefix(tensor.name) in skipped:
            continue
        start = layout.data_start + tensor.offset
        raw = np.asarray(data[start : start + tensor.nbytes])
        values = dequantize(raw, tensor.kind).astype(np.float32, copy=False).reshape(tuple(reversed(tensor.shape)))
        tensors[tensor.name] = torch.from_numpy(np.array(values, dtype=np.float32)).to(dtype)  # a writable copy
    torch.manual_seed(seed)  # the factors' start: the same for the same seed, so runs can be compared
    return Decoder(shape, tensors, rank=rank, adapted_layers=layers, lower=lower)


def block_prefix(name: str) -> str:
    """`blk.N.` for a block's tensor, "" for the others."""
    parts = name.split(".")
    return f"blk.{parts[1]}." if parts[0] == "blk" and len(parts) > 2 else ""


def parameter_count(path: Path, *, below: int = 0) -> int:
    """How many weights the model at `path` has (for the memory estimate, before loading anything), less
    those of its first `below` blocks."""
    skipped = {f"blk.{i}." for i in range(below)}
    return sum(math.prod(t.shape) for t in read_layout(path).tensors if block_prefix(t.name) not in skipped)
