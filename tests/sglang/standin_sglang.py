"""Stands in for an SGLang Python (`--sglang-python`) in the launcher tests: no GPU, no model.

Run through a small wrapper script as `PYTHON -c PROBE` (the launcher's version probe) or
`PYTHON -m sglang.launch_server FLAGS...`. It records its argv, its pid, SGLANG_RUST_SERVER and
SGLANG_WARMUP_TIMEOUT to the JSON file named by STANDIN_RECORD, then serves the SGLang emulator on `--port` (with
`--api-key`, `--served-model-name`, `--model-path`, `--enable-lora`, `--lora-paths`), answering /health 503
for STANDIN_LOAD_SECONDS first, like a model that is loading. On SIGTERM it writes STANDIN_RECORD + ".stopped"
and exits 0.

Other knobs: STANDIN_SGLANG_VERSION (what the probe prints, default 0.5.23), STANDIN_NO_SGLANG=1
(the probe fails like an environment without SGLang), STANDIN_IGNORE_SIGTERM=1 (only SIGKILL
stops it), STANDIN_RUST_REFUSES=1 (with SGLANG_RUST_SERVER=1, print SGLang's "no Rust MM pipeline"
error and exit 1, as 0.5.23 does for a multimodal-family model its Rust frontend cannot serve).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.sglang_emulator import EmulatorConfig, SGLangEmulator, add_lora_arguments, lora_paths_from_flags


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["-c"]:
        if os.environ.get("STANDIN_NO_SGLANG"):
            print("ModuleNotFoundError: No module named 'sglang'", file=sys.stderr)
            return 1
        print(os.environ.get("STANDIN_SGLANG_VERSION", "0.5.23"))
        return 0
    record = Path(os.environ["STANDIN_RECORD"])
    record.write_text(
        json.dumps(
            {
                "argv": argv,
                "pid": os.getpid(),
                **{name: os.environ.get(name) for name in ("SGLANG_RUST_SERVER", "SGLANG_WARMUP_TIMEOUT")},
            }
        )
    )
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--api-key")
    parser.add_argument("--served-model-name")
    parser.add_argument("--model-path", required=True)
    add_lora_arguments(parser)
    args, _ = parser.parse_known_args(argv[2:] if argv[:1] == ["-m"] else argv)
    print("standin: loading weights", flush=True)
    if os.environ.get("STANDIN_RUST_REFUSES") and os.environ.get("SGLANG_RUST_SERVER") == "1":
        # SGLang 0.5.23's message (rust_server/server.py `_resolve_multimodal`) before the scheduler exits.
        print(
            "RuntimeError: SGLANG_RUST_SERVER=1: no Rust MM pipeline for model_type='qwen3_5_moe' "
            "(supported: qwen2_5_vl, qwen2_vl, qwen3_5, qwen3_5_moe, qwen3_vl, qwen3_vl_moe; images only). "
            "Unset SGLANG_RUST_SERVER to serve this model.",
            flush=True,
        )
        return 1
    print("standin: a line on stderr", file=sys.stderr, flush=True)
    asyncio.run(serve(args, record))
    return 0


async def serve(args: argparse.Namespace, record: Path) -> None:
    load = float(os.environ.get("STANDIN_LOAD_SECONDS", "0"))
    config = EmulatorConfig(
        api_key=args.api_key,
        model_path=args.model_path,
        served_model_name=args.served_model_name,
        unhealthy_until=time.monotonic() + load,
        lora_paths=lora_paths_from_flags(args.lora_paths),
        enable_lora=args.enable_lora,
    )
    emulator = SGLangEmulator(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    if os.environ.get("STANDIN_IGNORE_SIGTERM"):
        loop.add_signal_handler(signal.SIGTERM, lambda: print("standin: ignoring SIGTERM", flush=True))
    else:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    await emulator.start(port=args.port)
    print(f"standin: serving on {emulator.url}", flush=True)
    await stop.wait()
    await emulator.stop()
    record.with_name(record.name + ".stopped").write_text("SIGTERM")
    print("standin: stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
