"""Writing what `openjev tune` leaves in its output folder (the layout: `adapters/embedded/tuned.py`)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf.quants import quantize


def write_adapter(
    path: Path, architecture: str, factors: dict[str, tuple[np.ndarray, np.ndarray]], alpha: float
) -> None:
    """Each matrix's A (rank × inputs) and B (outputs × rank) as `<name>.lora_a` / `.lora_b`: Q8_0 where
    the rows are whole blocks (A), float16 otherwise (B, whose rows are the rank)."""
    writer = gguf.GGUFWriter(path, arch=architecture)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name in sorted(factors, key=lambda n: (int(n.split(".")[1]), n)):
        for suffix, values in zip(("lora_a", "lora_b"), factors[name], strict=True):
            if values.shape[-1] % 32 == 0:
                q8 = gguf.GGMLQuantizationType.Q8_0
                writer.add_tensor(f"{name}.{suffix}", quantize(values.astype(np.float32), q8), raw_dtype=q8)
            else:
                writer.add_tensor(f"{name}.{suffix}", values.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
