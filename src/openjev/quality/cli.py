"""The `openjev eval FILE.jsonl…` subcommand. `openjev.cli` calls `register(subparsers)`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import msgspec

from openjev.client.systemone import DEFAULT_URL
from openjev.quality.dataset import DatasetError
from openjev.quality.runner import EvalOptions, format_report, run_eval

DEBIAS_CHOICES = ("none", "rotate", "calibrate", "rotate+calibrate")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure answer quality on labelled JSONL files against a running server",
        description=(
            "Send each labelled item ({state, question, gold} per line) to a System One server and report "
            "accuracy, Brier score, expected calibration error with its reliability table, latency and "
            "throughput per file. Exits 1 when any item failed."
        ),
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.jsonl")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})")
    parser.add_argument("--key", default=None, help="bearer key (default: $OPENJEV_API_KEY when set)")
    parser.add_argument("--model", default="jev-latest", help="model field of each request (default jev-latest)")
    parser.add_argument("--concurrency", type=_positive_int, default=2, help="requests in flight (default 2)")
    parser.add_argument(
        "--reverse", action="store_true", help="ask every choice question again with its options reversed"
    )
    parser.add_argument(
        "--fit-temperature",
        action="store_true",
        help="fit the temperature that minimises the negative log-likelihood on each file",
    )
    parser.add_argument(
        "--debias", choices=DEBIAS_CHOICES, default=None, help="send x_debias with every request (default: server's)"
    )
    parser.add_argument("--limit", type=_positive_int, default=None, help="only the first N items of each file")
    parser.add_argument("--out", type=Path, default=None, help="also write the full report as JSON here")
    parser.set_defaults(run=main_from_args)


def main_from_args(args: argparse.Namespace) -> int:
    options = EvalOptions(
        url=args.url,
        key=args.key if args.key is not None else os.environ.get("OPENJEV_API_KEY") or None,
        model=args.model,
        concurrency=args.concurrency,
        reverse=args.reverse,
        fit_temperature=args.fit_temperature,
        debias=args.debias,
        limit=args.limit,
    )
    try:
        report = asyncio.run(run_eval(args.files, options))
    except DatasetError as exc:
        print(f"openjev eval: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    if args.out is not None:
        args.out.write_bytes(msgspec.json.format(msgspec.json.encode(report)) + b"\n")
    return 1 if any(f.failures for f in report.files) else 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value
