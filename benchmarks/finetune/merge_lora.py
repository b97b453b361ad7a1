"""Merge a LoRA adapter (PEFT's files) into a GGUF model: every adapted matrix is rewritten as Q8_0.

    python merge_lora.py MODEL.gguf ADAPTER_DIR OUT.gguf

The merged file is an ordinary GGUF, served with `OPENJEV_MODEL=OUT.gguf` on either embedded engine.
Adapted matrices are dequantized, given W + (alpha / r) · B·A, and stored as Q8_0, whose 255 levels per
block of 32 keep the small update that a 4-bit requantization would round away; the others are
copied as they are.
"""

import json
import sys
from pathlib import Path

import gguf
import numpy as np
from dequantize_gguf import LAYER
from gguf.quants import dequantize, quantize
from safetensors.torch import load_file

PARTS = {hf: name for name, hf in LAYER.items()}  # Transformers module → GGUF tensor part


def deltas(adapter: Path) -> dict[str, np.ndarray]:
    """W' − W per GGUF tensor name, in the layout [out, in] that dequantizing a GGUF matrix gives."""
    config = json.loads((adapter / "adapter_config.json").read_text())
    scale = config["lora_alpha"] / config["r"]
    weights = {k: v.float().numpy() for k, v in load_file(adapter / "adapter_model.safetensors").items()}
    out = {}
    for key, a in weights.items():
        if ".lora_A." not in key:
            continue
        layer = key.split("layers.")[1].split(".")[0]
        part = key.split(f"layers.{layer}.")[1].split(".lora_A")[0]
        out[f"blk.{layer}.{PARTS[part]}.weight"] = (weights[key.replace("lora_A", "lora_B")] @ a) * scale
    return out


def main() -> None:
    source, adapter, target = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    update = deltas(adapter)
    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(target, arch=reader.fields["general.architecture"].contents(), endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by the writer itself
        kind = field.types[0]
        writer.add_key_value(
            field.name, field.contents(), kind, sub_type=field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        )
    data = {}
    for tensor in reader.tensors:
        if tensor.name in update:
            full = dequantize(tensor.data, tensor.tensor_type).reshape(update[tensor.name].shape) + update[tensor.name]
            data[tensor.name] = (
                quantize(full.astype(np.float32), gguf.GGMLQuantizationType.Q8_0),
                gguf.GGMLQuantizationType.Q8_0,
            )
        else:
            data[tensor.name] = (tensor.data, tensor.tensor_type)
    missing = sorted(set(update) - set(data))
    if missing:
        raise SystemExit(f"the adapter names matrices the model does not have: {missing[:3]}")
    for tensor in reader.tensors:
        values, kind = data[tensor.name]
        writer.add_tensor_info(tensor.name, values.shape, values.dtype, values.nbytes, kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in reader.tensors:
        writer.write_tensor_data(data[tensor.name][0], tensor_endianess=reader.endianess)
    writer.close()
    print(f"merged {len(update)} matrices into {target}")


if __name__ == "__main__":
    main()
