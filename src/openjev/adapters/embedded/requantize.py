"""Rewrite a GGUF's k-quant weight matrices as Q8_0, the layout OpenVINO runs as int8 weights, adding
a LoRA adapter's update to the matrices it adapts (`lora.py`) when one is given.

OpenVINO's GGUF reader keeps Q8_0 (and Q4_0) blocks as they are, but turns k-quants (Q4_K, Q6_K)
into its own 4-bit format, a second lossy rounding: on the default model the label probabilities
then moved by up to 0.08 from llama.cpp's. A k-quant block of 32 weights holds at most 16 (Q4_K) or
64 (Q6_K) distinct values, which Q8_0's 255 levels per block of 32 represent to within 1/254 of the
block's largest weight: the rewritten model computes what the packaged one does to within a few
thousandths in probability (docs/performance.md).

Pure file work (numpy, the `gguf` package's types and dequantizers): no engine, no network. The
output's layout is known before any weight is converted, so tensors are converted in worker
processes (numpy's k-quant dequantizers hold the GIL much of the time: two threads ran 1.4 times
faster than one, two processes 1.9 times), each writing its tensors into their place in the file,
`ROWS` rows at a time: each process stays under 0.5 GB whatever the model's size.

An adapted matrix is always written as Q8_0, whatever its type: its update is about 0.5 % of its
weights (the packaged fine-tune), which Q8_0's step keeps and a 4-bit requantization would round away.
"""

from __future__ import annotations

import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

from openjev.adapters.embedded.gguf_file import TensorInfo, read_layout, write_header
from openjev.adapters.embedded.lora import LoraAdapter, check_fits, read_adapter
from openjev.domain.errors import StartupError

KEPT = frozenset({Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0})  # types OpenVINO reads as they are
BLOCK = 32
CHUNK = 8192  # blocks per pass of `q8_0_blocks` (1 MiB of float32)
ROWS = 1024  # matrix rows dequantized at a time: the float32 copy of a whole matrix is never made


def q8_0_blocks(weights: np.ndarray) -> np.ndarray:
    """Q8_0 bytes of float32 `weights` (last axis a multiple of 32): per block a float16 scale and 32 int8.

    The scale is max|w| / 127 and each weight rounds half away from zero, as ggml's reference does.
    Blocks are done `CHUNK` at a time, so each pass over them stays in the CPU's cache.
    """
    rows = weights.reshape(-1, BLOCK)
    packed = np.empty((rows.shape[0], BLOCK + 2), dtype=np.uint8)
    for at in range(0, rows.shape[0], CHUNK):
        part = rows[at : at + CHUNK].astype(np.float32, copy=False)
        scale = np.abs(part).max(axis=1, keepdims=True) / 127
        inverse = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale != 0)
        scaled = part * inverse
        scaled += np.copysign(np.float32(0.5), scaled)  # then truncation: half away from zero
        packed[at : at + CHUNK, :2] = scale.astype(np.float16).view(np.uint8)
        packed[at : at + CHUNK, 2:] = scaled.astype(np.int8).view(np.uint8)
    return packed.reshape(*weights.shape[:-1], weights.shape[-1] // BLOCK * 34)


def requantize(source: Path, target: Path, *, workers: int = 1, rows: int = ROWS, adapter: Path | None = None) -> None:
    """Write `target`: `source` with every 2-D k-quant matrix as Q8_0, and every matrix `adapter`
    adapts as Q8_0 with the update added; everything else (metadata included) copied byte for byte.
    `workers` processes convert the tensors."""
    layout = read_layout(source)
    adapted: frozenset[str] = frozenset()
    if adapter is not None:
        lora = read_adapter(adapter)
        check_fits(lora, {t.name: t for t in layout.tensors})
        adapted = frozenset(lora.matrices)
    with target.open("wb") as handle:
        placed = write_header(handle, layout, [_rewritten(t, t.name in adapted) for t in layout.tensors])
        data_start = handle.tell()
        handle.truncate(data_start + max((t.offset + t.nbytes for t in placed), default=0))
    jobs = [
        _Job(
            source,
            layout.data_start + old.offset,
            old,
            target,
            data_start + new.offset,
            new,
            rows,
            adapter if old.name in adapted else None,
        )
        for old, new in zip(layout.tensors, placed, strict=True)
    ]
    jobs.sort(key=lambda job: -job.tensor.nbytes)  # the largest first: the workers finish together
    if workers <= 1:
        for job in jobs:
            _convert(job)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_convert, jobs))


@dataclass(frozen=True)
class _Job:
    source: Path
    source_offset: int
    tensor: TensorInfo
    target: Path
    target_offset: int
    written: TensorInfo  # the tensor as `target` holds it
    rows: int
    adapter: Path | None  # the adapter whose update this matrix gets


def _rewritten(tensor: TensorInfo, adapted: bool) -> TensorInfo:
    """The tensor as `target` holds it: Q8_0 for a k-quant or adapted matrix whose rows are whole blocks."""
    if adapted and tensor.shape[0] % BLOCK:
        raise StartupError(f"{tensor.name} has rows of {tensor.shape[0]} weights, not whole Q8_0 blocks: cannot merge")
    if (tensor.kind in KEPT and not adapted) or len(tensor.shape) < 2 or tensor.shape[0] % BLOCK:
        return tensor
    return replace(tensor, kind=Q.Q8_0)


def _convert(job: _Job) -> None:
    """Read one tensor from the source and write it, converted or not, to its place in the target."""
    source = np.memmap(job.source, np.uint8, "r", offset=job.source_offset, shape=(job.tensor.nbytes,))
    target = np.memmap(job.target, np.uint8, "r+", offset=job.target_offset, shape=(job.written.nbytes,))
    lora: LoraAdapter | None = read_adapter(job.adapter) if job.adapter is not None else None
    if job.written.kind == job.tensor.kind and lora is None:
        target[:] = source
    else:
        count = math.prod(job.tensor.shape[1:])
        source_rows, target_rows = source.reshape(count, -1), target.reshape(count, -1)
        for at in range(0, count, job.rows):
            weights = dequantize(source_rows[at : at + job.rows], job.tensor.kind)
            if lora is not None:
                weights = weights + lora.update(job.tensor.name, at, min(at + job.rows, count))
            target_rows[at : at + job.rows] = q8_0_blocks(weights)
    target.flush()
