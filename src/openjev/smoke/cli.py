"""The `openjev smoke URL` subcommand. `openjev.cli` calls `register(subparsers)`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from openjev.smoke.checks import ALIAS_MODEL
from openjev.smoke.runner import SmokeOptions, format_summary, run_smoke_sync

_DEFAULTS = SmokeOptions(url="")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `smoke` to the `openjev` command line; its handler is `args.run(args) -> exit code`."""
    parser = subparsers.add_parser(
        "smoke",
        help="end-to-end check of a running System One server",
        description=(
            "Wait for the server at URL to be ready (through 503s and refused connections), then check "
            "all three question types, 64 and 65 options and a few obvious answers. Writes a JSON "
            "result and exits non-zero when any check fails (2 when the server never became ready)."
        ),
    )
    add_arguments(parser)
    parser.set_defaults(run=main_from_args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="base URL of the server, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--key",
        default=None,
        help="bearer key for the server's API (default: $OPENJEV_API_KEY when set)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=_DEFAULTS.out,
        help=f"where to write the JSON result (default: {_DEFAULTS.out})",
    )
    parser.add_argument(
        "--startup-timeout",
        type=_positive_seconds,
        default=_DEFAULTS.startup_timeout,
        metavar="SECONDS",
        help=f"how long to wait for a server that is starting (default: {_DEFAULTS.startup_timeout:.0f})",
    )
    parser.add_argument(
        "--request-timeout",
        type=_positive_seconds,
        default=_DEFAULTS.request_timeout,
        metavar="SECONDS",
        help=f"timeout of each check's request (default: {_DEFAULTS.request_timeout:.0f})",
    )
    parser.add_argument(
        "--model",
        default=ALIAS_MODEL,
        help=f"the `model` sent with each request (default: {ALIAS_MODEL}, the alias every server accepts)",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def options_from_args(args: argparse.Namespace) -> SmokeOptions:
    key = args.key if args.key is not None else os.environ.get("OPENJEV_API_KEY") or None
    return SmokeOptions(
        url=args.url,
        key=key,
        out=args.out,
        startup_timeout=args.startup_timeout,
        request_timeout=args.request_timeout,
        model=args.model,
    )


def main_from_args(args: argparse.Namespace) -> int:
    result = run_smoke_sync(options_from_args(args))
    print(format_summary(result))
    if args.out is not None:
        print(f"wrote {args.out}", file=sys.stderr)
    return result.exit_code


def main(argv: list[str] | None = None) -> int:
    """Standalone entry (`python -m openjev.smoke.cli URL`), the same as `openjev smoke URL`."""
    parser = argparse.ArgumentParser(prog="openjev smoke")
    add_arguments(parser)
    return main_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
