"""Rewrite a GGUF's k-quant weight matrices as Q8_0, the layout OpenVINO runs as int8 weights.

OpenVINO's GGUF reader keeps Q8_0 (and Q4_0) blocks as they are, but turns k-quants (Q4_K, Q6_K)
into its own 4-bit format, a second lossy rounding: on the default model the label probabilities
then moved by up to 0.08 from llama.cpp's. A k-quant block of 32 weights holds at most 16 (Q4_K) or
64 (Q6_K) distinct values, which Q8_0's 255 levels per block of 32 represent to within 1/254 of the
block's largest weight: the rewritten model computes what the packaged one does to within a few
thousandths in probability (docs/performance.md).

Pure file work (numpy, the `gguf` package): no engine, no network. Tensors are converted on two
threads; numpy releases the GIL inside its loops.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

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


def requantize(source: Path, target: Path) -> None:
    """Write `target`: `source` with every 2-D k-quant tensor as Q8_0, everything else copied."""
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, _architecture(reader))
    for name, field in reader.fields.items():
        if not name.startswith("GGUF.") and name != gguf.Keys.General.ARCHITECTURE:
            _copy_field(writer, name, field)
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        for tensor, (data, kind) in zip(reader.tensors, pool.map(_converted, reader.tensors), strict=True):
            writer.add_tensor(tensor.name, data, raw_shape=data.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _converted(tensor: Any) -> tuple[np.ndarray, Q]:
    kind = Q(tensor.tensor_type)
    data = np.asarray(tensor.data)
    shape = [int(n) for n in reversed(tensor.shape.tolist())]
    if kind in KEPT or len(shape) < 2 or shape[-1] % BLOCK:
        return data, kind
    rows = data.reshape(-1, data.shape[-1])
    parts = [q8_0_blocks(dequantize(rows[at : at + ROWS], kind)) for at in range(0, rows.shape[0], ROWS)]
    return np.concatenate(parts).reshape(*shape[:-1], shape[-1] // BLOCK * 34), Q.Q8_0


def _architecture(reader: gguf.GGUFReader) -> str:
    field = reader.fields[gguf.Keys.General.ARCHITECTURE]
    return bytes(field.parts[field.data[0]]).decode()


def _copy_field(writer: gguf.GGUFWriter, name: str, field: Any) -> None:
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        item = field.types[-1]
        if item == gguf.GGUFValueType.STRING:
            values: list[Any] = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
        else:
            values = [field.parts[i].tolist()[0] for i in field.data]
        writer.add_key_value(name, values, kind, sub_type=item)
    elif kind == gguf.GGUFValueType.STRING:
        writer.add_key_value(name, bytes(field.parts[field.data[0]]).decode("utf-8", "surrogateescape"), kind)
    else:
        writer.add_key_value(name, field.parts[field.data[0]].tolist()[0], kind)
