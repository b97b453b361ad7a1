"""Command-line options every client command shares: which server, which key, which model, how many at once."""

from __future__ import annotations

import argparse
import os

from openjev.client.systemone import DEFAULT_URL


def add_server_arguments(parser: argparse.ArgumentParser, *, concurrency: int) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help=f"server base URL (default {DEFAULT_URL})")
    parser.add_argument("--key", default=None, help="bearer key (default: $OPENJEV_API_KEY when set)")
    parser.add_argument("--model", default="jev-latest", help="model field of each request (default jev-latest)")
    parser.add_argument(
        "--concurrency", type=positive_int, default=concurrency, help=f"requests in flight (default {concurrency})"
    )


def api_key(args: argparse.Namespace) -> str | None:
    """--key, else $OPENJEV_API_KEY, else none."""
    key: str | None = args.key if args.key is not None else os.environ.get("OPENJEV_API_KEY") or None
    return key


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0: {text}")
    return value
