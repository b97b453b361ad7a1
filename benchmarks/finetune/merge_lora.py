"""Merge a GGUF LoRA adapter (`export_adapter.py`'s) into a GGUF model, as openjev merges its packaged one.

    uv run python benchmarks/finetune/merge_lora.py MODEL.gguf ADAPTER.gguf OUT.gguf

Every weight matrix is rewritten as Q8_0, the adapted ones with (alpha / rank) · B·A added (openjev's
`requantize` with an adapter, the code that builds `qwen2.5-coder-1.5b-decisions` at its first start).
The result is an ordinary GGUF, served with `OPENJEV_MODEL=OUT.gguf` on either embedded engine.
"""

import os
import sys
from pathlib import Path

from openjev.adapters.embedded.requantize import requantize


def main() -> None:
    source, adapter, target = (Path(arg) for arg in sys.argv[1:4])
    requantize(source, target, workers=os.cpu_count() or 1, adapter=adapter)
    print(f"merged {adapter} into {target}")


if __name__ == "__main__":
    main()
