"""Write a trained LoRA adapter (PEFT's files) as a GGUF adapter in llama.cpp's layout, which openjev merges.

    python export_adapter.py ADAPTER_DIR OUT.gguf [--type f16|q8_0]

Each adapted matrix `blk.N.<part>.weight` gets two tensors, `<name>.lora_a` (rank × inputs) and
`<name>.lora_b` (outputs × rank), and the file says `adapter.lora.alpha`, so the update is
(alpha / rank) · B·A, as PEFT and llama.cpp both define it. `--type q8_0` halves the file; the
update it gives differs from float32's by well under the merged weights' own Q8_0 step (the docs
give the measured figure).
"""

import argparse
import json
from pathlib import Path

import gguf
import numpy as np
from dequantize_gguf import LAYER
from gguf.quants import quantize
from safetensors.numpy import load_file

PARTS = {hf: name for name, hf in LAYER.items()}  # Transformers module → GGUF tensor part


def factors(adapter: Path) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """alpha, and per GGUF matrix name the (A, B) factors in float32."""
    config = json.loads((adapter / "adapter_config.json").read_text())
    weights = load_file(adapter / "adapter_model.safetensors")
    out = {}
    for key, a in weights.items():
        if ".lora_A." not in key:
            continue
        layer = key.split("layers.")[1].split(".")[0]
        part = key.split(f"layers.{layer}.")[1].split(".lora_A")[0]
        b = weights[key.replace("lora_A", "lora_B")]
        out[f"blk.{layer}.{PARTS[part]}.weight"] = (a.astype(np.float32), b.astype(np.float32))
    return float(config["lora_alpha"]), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--type", choices=["f16", "q8_0"], default="q8_0")
    args = parser.parse_args()
    alpha, matrices = factors(args.adapter)
    writer = gguf.GGUFWriter(args.out, arch="qwen2")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name in sorted(matrices, key=lambda n: (int(n.split(".")[1]), n)):
        for suffix, values in zip(("lora_a", "lora_b"), matrices[name], strict=True):
            if args.type == "q8_0" and values.shape[-1] % 32 == 0:
                writer.add_tensor(
                    f"{name}.{suffix}",
                    quantize(values, gguf.GGMLQuantizationType.Q8_0),
                    raw_dtype=gguf.GGMLQuantizationType.Q8_0,
                )
            else:
                writer.add_tensor(f"{name}.{suffix}", values.astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {len(matrices)} adapted matrices (alpha {alpha}) to {args.out}")


if __name__ == "__main__":
    main()
