"""The `openjev tune TRAIN.jsonl --out DIR` subcommand. `openjev.cli` calls `register(subparsers)`.

PyTorch is imported only when the command runs: `openjev serve` and the rest never need it, and
without it the command says in one line what to run.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from pathlib import Path

from openjev.client.arguments import positive_float, positive_int
from openjev.domain.errors import StartupError
from openjev.quality.cli import INTERRUPTED_EXIT_CODE
from openjev.quality.dataset import DatasetError
from openjev.settings import load_settings

FINISH_SECONDS = 15.0  # of --max-minutes kept for what a deadline cannot see: the interpreter's start, the last files
NEEDS_TORCH = (
    "openjev tune needs PyTorch, which `uv run openjev` does not install: run `uv run --group tune openjev tune …`"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tune",
        help="train a LoRA adapter on labelled decisions (JSONL, as `openjev eval` reads), on the CPU",
        description=(
            "Train a LoRA adapter for the embedded model on labelled items ({state, question, gold} per line), "
            "reading each answer as the server does, and write it with a manifest and a report to --out. Serve "
            "it with OPENJEV_ADAPTER=DIR. Exits 130 when interrupted (--resume continues)."
        ),
    )
    parser.add_argument("train", type=Path, metavar="TRAIN.jsonl")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="a new folder for the adapter")
    parser.add_argument(
        "--eval",
        type=Path,
        default=None,
        metavar="DEV.jsonl",
        help="measure on these items (default: a held-out slice)",
    )
    parser.add_argument(
        "--eval-share", type=_share, default=0.2, help="the share of TRAIN held out when --eval is not given (0.2)"
    )
    parser.add_argument("--model", default=None, help="the embedded model to adapt (default: OPENJEV_MODEL's)")
    parser.add_argument("--max-minutes", type=positive_float, default=None, help="stop in time; keep the best")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    parser.add_argument("--steps", type=positive_int, default=None, help="training steps (default: --epochs passes)")
    parser.add_argument(
        "--epochs",
        type=positive_float,
        default=None,
        help="passes over TRAIN when --steps is not given (3; with --max-minutes, as many as fit, up to 10)",
    )
    parser.add_argument("--batch", type=positive_int, default=4, help="items a step averages its loss over (4)")
    parser.add_argument("--rank", type=positive_int, default=16, help="the LoRA rank (16)")
    parser.add_argument(
        "--layers", type=positive_int, default=None, help="adapt the top N layers (default: all; 4 from 1B weights)"
    )
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3, help="the peak (1e-3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto")
    parser.add_argument(
        "--name", type=_name, default=None, help="the adapter's name in /v1/models (default: DIR's name)"
    )
    parser.add_argument("--max-memory-gb", type=positive_float, default=None, help="refuse to start above this")
    parser.set_defaults(run=main_from_args)


def _name(text: str) -> str:
    from openjev.adapters.embedded.tuned import NAME_PATTERN  # the embedded group's package: only when used

    if not re.fullmatch(NAME_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r}: up to 64 letters, digits, '.', '_' or '-', a letter or digit first"
        )
    return text


def _share(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"a share is below 1: {text}")
    return value


def main_from_args(args: argparse.Namespace) -> int:
    deadline = None
    if args.max_minutes is not None:  # counted from here, before PyTorch is imported (seconds)
        deadline = time.monotonic() + args.max_minutes * 60 - FINISH_SECONDS
    if importlib.util.find_spec("torch") is None:
        print(NEEDS_TORCH, file=sys.stderr)
        return 2
    from openjev.adapters.embedded.tuned import adapter_name
    from openjev.tuning.session import Options, train

    options = Options(
        train=str(args.train),
        eval=str(args.eval) if args.eval is not None else None,
        eval_share=args.eval_share,
        steps=args.steps,
        batch=args.batch,
        epochs=args.epochs,
        rank=args.rank,
        layers=args.layers,
        learning_rate=args.learning_rate,
        seed=args.seed,
        dtype=args.dtype,
        name=args.name or adapter_name(args.out.resolve().name),
    )
    settings = load_settings(model=args.model, backend="embedded")
    try:
        return train(
            options,
            settings,
            args.out,
            resume=args.resume,
            deadline=deadline,
            max_memory_gb=args.max_memory_gb,
            report=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except (DatasetError, StartupError) as exc:
        print(f"openjev tune: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside the training loop: before the first checkpoint, or after the last
        kept = (args.out / ".partial").is_dir()
        print(
            "openjev tune: interrupted" + ("; continue with --resume" if kept else "; nothing was kept"),
            file=sys.stderr,
        )
        return INTERRUPTED_EXIT_CODE
