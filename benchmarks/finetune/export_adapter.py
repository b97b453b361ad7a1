"""Write a trained LoRA adapter (PEFT's files) as a GGUF adapter in llama.cpp's layout, which openjev merges.

    python export_adapter.py ADAPTER [ADAPTER ...] OUT.gguf [--type f16|q8_0] [--rank R]

An ADAPTER is a PEFT adapter directory or a GGUF adapter this script wrote (the one openjev ships,
for instance), so that a new run can be averaged with runs whose directories are gone.

Each adapted matrix `blk.N.<part>.weight` gets two tensors, `<name>.lora_a` (rank × inputs) and
`<name>.lora_b` (outputs × rank), and the file says `adapter.lora.alpha`, so the update is
(alpha / rank) · B·A, as PEFT and llama.cpp both define it. `--type q8_0` halves the file; the
update it gives differs from float32's by well under the merged weights' own Q8_0 step (the docs
give the measured figure).

Given several adapters (runs of one recipe on different draws of data), it writes their average:
each matrix's update is exactly the mean of the runs' updates, as their factors side by side (the
ranks add up; each run's scale is folded into its A and 1/n into its B, and alpha equals the
rank). Averaging evens out what one run's draw of synthetic data taught by chance. `--rank R`
keeps each update's R leading singular directions (runs from one initialisation share most of
theirs), so that the file does not grow with the number of runs; it prints the share of each
update's energy (squared Frobenius norm) kept.
"""

import argparse
import json
from pathlib import Path

import gguf
import numpy as np
from dequantize_gguf import LAYER
from gguf.quants import dequantize, quantize
from safetensors.numpy import load_file

PARTS = {hf: name for name, hf in LAYER.items()}  # Transformers module → GGUF tensor part


def factors(adapter: Path) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """alpha, and per GGUF matrix name the (A, B) factors in float32."""
    if adapter.suffix == ".gguf":
        return gguf_factors(adapter)
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


def gguf_factors(adapter: Path) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The same from a GGUF adapter: its tensors dequantized, its alpha read from its metadata."""
    reader = gguf.GGUFReader(adapter)
    field = reader.get_field(gguf.Keys.Adapter.LORA_ALPHA)
    if field is None:
        raise SystemExit(f"{adapter}: not a LoRA adapter (no {gguf.Keys.Adapter.LORA_ALPHA})")
    tensors = {t.name: dequantize(t.data, t.tensor_type).astype(np.float32) for t in reader.tensors}
    out = {}
    for name, a in tensors.items():
        if name.endswith(".lora_a"):
            out[name.removesuffix(".lora_a")] = (a, tensors[name.removesuffix("a") + "b"])
    return float(field.contents()), out


def average(adapters: list[Path]) -> tuple[float, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """One adapter whose every update is the mean of the adapters' updates, and its alpha."""
    runs = [factors(adapter) for adapter in adapters]
    if len(runs) == 1:
        return runs[0]
    out = {}
    for name in runs[0][1]:
        pairs = [(a * (alpha / a.shape[0]), b / len(runs)) for alpha, run in runs for a, b in [run[name]]]
        out[name] = (np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs], axis=1))
    rank = next(iter(out.values()))[0].shape[0]
    return float(rank), out  # alpha = rank: the scales are already in the factors


def truncate(a: np.ndarray, b: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The factors of B·A's best rank-R approximation, and the share of its energy they keep."""
    qb, rb = np.linalg.qr(b.astype(np.float64))  # B·A = qb · (rb · ra^T) · qa^T, the core rank × rank
    qa, ra = np.linalg.qr(a.astype(np.float64).T)
    u, s, vt = np.linalg.svd(rb @ ra.T)
    root = np.sqrt(s[:rank])
    kept = float((s[:rank] ** 2).sum() / (s**2).sum())
    return ((root[:, None] * vt[:rank]) @ qa.T).astype(np.float32), ((qb @ u[:, :rank]) * root).astype(np.float32), kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapters", type=Path, nargs="+", metavar="ADAPTER")
    parser.add_argument("out", type=Path)
    parser.add_argument("--type", choices=["f16", "q8_0"], default="q8_0")
    parser.add_argument("--rank", type=int, help="keep each update's R leading directions")
    args = parser.parse_args()
    alpha, matrices = average(args.adapters)
    if args.rank is not None:
        scale = alpha / next(iter(matrices.values()))[0].shape[0]
        kept = []
        for name, (a, b) in matrices.items():
            a, b, share = truncate(a, b * scale, args.rank)
            matrices[name] = (a, b)
            kept.append(share)
        alpha = float(args.rank)
        print(f"rank {args.rank} keeps {min(kept):.2%} of an update's energy at least, {np.mean(kept):.2%} on average")
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
