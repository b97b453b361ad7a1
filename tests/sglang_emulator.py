"""An SGLang 0.5.23 emulator: the native HTTP routes openjev uses, with SGLang's JSON, and no GPU.

It answers like the real engine where a run of it showed how (tests/data/sglang_0_5_23_replies.json:
reply fields, batch replies, the abort reply, empty health bodies, the 400 messages, and an
out-of-vocabulary prompt id taking the whole server down); elsewhere it follows SGLang's source.
Its parts live in `tests/sglang_emulation/` (see its `__init__`); this module gathers them and is
the command line.

What is deliberately different: it has no tokenizer, so `text` prompts are refused (openjev must
send ids), and the log-probabilities are a deterministic hash of the input ids and the token id
(`logprob_of`), not a model.

Use it in-process (`SGLangEmulator`, `EmulatorThread`) or as a subprocess:

    python tests/sglang_emulator.py --port 0 [--slow S] [--fail 500] [--close] [--malformed]
        [--no-cached-tokens] [--api-key K] [--unhealthy-for S] [--omit-label ID]
        [--enable-lora] [--lora-paths NAME=PATH ...] ...

It prints `sglang-emulator listening on http://127.0.0.1:PORT` once it accepts connections, and
exits with status 1 if it goes down the way SGLang does (an out-of-vocabulary id in `input_ids`).
It only ever binds loopback addresses.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tests.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.sglang_emulation.config import (
    DEFAULT_VOCAB_SIZE,
    SAMPLING_PARAM_KEYS,
    EmulatorConfig,
    RecordedRequest,
    lora_paths_from_flags,
)
from tests.sglang_emulation.generate_input import body_is_batch, split_generate_body
from tests.sglang_emulation.model import logprob_of
from tests.sglang_emulation.server import SGLangEmulator
from tests.sglang_emulation.thread import EmulatorThread

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "SAMPLING_PARAM_KEYS",
    "EmulatorConfig",
    "EmulatorThread",
    "RecordedRequest",
    "SGLangEmulator",
    "add_cli_arguments",
    "add_lora_arguments",
    "body_is_batch",
    "config_from_args",
    "logprob_of",
    "lora_paths_from_flags",
    "main",
    "serve_forever",
    "split_generate_body",
]


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The emulator's behaviour flags (shared with the SGLang stand-in used by the launcher tests)."""
    parser.add_argument("--slow", type=float, default=0.0, help="seconds each /generate takes")
    parser.add_argument("--fail", type=int, default=None, help="answer every /generate with this status")
    parser.add_argument("--close", action="store_true", help="drop /generate connections")
    parser.add_argument("--malformed", action="store_true", help="answer /generate with invalid JSON")
    parser.add_argument("--no-cached-tokens", action="store_true", help="omit meta_info.cached_tokens")
    parser.add_argument("--unhealthy-for", type=float, default=0.0, help="/health answers 503 this long")
    parser.add_argument("--omit-label", type=int, action="append", default=[], help="leave this id out")
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--emulated-context-length", type=int, default=32_768)
    add_lora_arguments(parser)


def add_lora_arguments(parser: argparse.ArgumentParser) -> None:
    """SGLang's own LoRA flags (`--enable-lora`, `--lora-paths NAME=PATH ...`), as the emulator takes them."""
    parser.add_argument("--enable-lora", action="store_true", default=None, help="serve LoRA adapters")
    parser.add_argument("--lora-paths", nargs="+", default=[], metavar="NAME=PATH", help="the adapters served")


def config_from_args(args: argparse.Namespace) -> EmulatorConfig:
    return EmulatorConfig(
        slow=args.slow,
        fail=args.fail,
        close=args.close,
        malformed=args.malformed,
        cached_tokens=not args.no_cached_tokens,
        unhealthy_until=time.monotonic() + args.unhealthy_for,
        omit_label_ids=list(args.omit_label),
        vocab_size=args.vocab_size,
        context_length=args.emulated_context_length,
        lora_paths=lora_paths_from_flags(args.lora_paths),
        enable_lora=args.enable_lora,
    )


async def serve_forever(emulator: SGLangEmulator, host: str, port: int, announce: bool = True) -> int:
    """Run until SIGTERM or SIGINT (0), or until it goes down as SGLang does (1); announce the URL once listening."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def crashed(why: str) -> None:
        print(f"sglang-emulator: the scheduler failed ({why}); the server exits", file=sys.stderr, flush=True)
        stop.set()

    emulator.on_crash = crashed
    url = await emulator.start(host, port)
    if announce:
        print(f"sglang-emulator listening on {url}", flush=True)
    try:
        await stop.wait()
    finally:
        await emulator.stop()
    return 1 if emulator.crashed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SGLang 0.5.23 emulator for openjev tests (loopback only).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY like --api-key")
    parser.add_argument("--model-path", default="emulated/model")
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--frontend", choices=("python", "rust"), default="python")
    add_cli_arguments(parser)
    args = parser.parse_args(argv)
    config = config_from_args(args)
    config.api_key = args.api_key
    config.model_path = args.model_path
    config.served_model_name = args.served_model_name
    config.frontend = args.frontend
    return asyncio.run(serve_forever(SGLangEmulator(config), args.host, args.port))


if __name__ == "__main__":
    sys.exit(main())
