"""The `openjev eval FILE.jsonl…` subcommand. `openjev.cli` calls `register(subparsers)`."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path

import msgspec

from openjev.client.arguments import add_server_arguments, api_key, positive_int
from openjev.domain.debiasing import DEBIAS_MODES
from openjev.quality.dataset import DatasetError
from openjev.quality.html_report import render_html
from openjev.quality.runner import Collected, EvalOptions, EvalReport, format_report, run_eval

DEBIAS_CHOICES = DEBIAS_MODES
INTERRUPTED_EXIT_CODE = 130  # Ctrl-C, as a shell reports it


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="measure answer quality on labelled JSONL files against a running server",
        description=(
            "Send each labelled item ({state, question, gold} per line) to a System One server and report "
            "accuracy, Brier score, expected calibration error with its reliability table, latency and "
            "throughput per file. Exits 1 when any item failed, 130 when interrupted (the report then covers "
            "what was answered, and --out and --html still get it)."
        ),
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.jsonl")
    add_server_arguments(parser, concurrency=2)
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
    parser.add_argument(
        "--examples",
        action="store_true",
        help="send each question with solved examples: for each option, another item of the file asking the same "
        "question with that answer (never the item itself)",
    )
    parser.add_argument(
        "--examples-from",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE.jsonl",
        help="with --examples: also draw examples from these files' items (e.g. the whole set a subset came from)",
    )
    parser.add_argument(
        "--examples-apart",
        type=_pattern,
        default=None,
        metavar="REGEX",
        help="with --examples: items whose ids give the same match (REGEX's first group, or the whole match) are "
        "never each other's examples, e.g. '^(.*-t[0-9]+)-' for the variants of one case",
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="only the first N items of each file")
    parser.add_argument("--out", type=Path, default=None, help="also write the full report as JSON here (a new file)")
    parser.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="REPORT.html",
        help="also write the report as one self-contained HTML page with its plots here (a new file)",
    )
    parser.add_argument(
        "--force", action="store_true", help="let --out and --html replace an existing file (never an input)"
    )
    parser.set_defaults(run=main_from_args)


def _pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {exc}") from None
    return text


def check_report_path(out: Path, inputs: list[Path], *, force: bool, flag: str = "--out") -> None:
    """DatasetError when the report cannot go to `out` (given as `flag`); checked before any item is sent."""
    example = "report.html" if flag == "--html" else "report.json"
    if out.is_dir():
        raise DatasetError(f"{flag} {out} is a directory: name a file (e.g. {out / example})")
    if not out.parent.is_dir():
        raise DatasetError(f"{flag} {out}: the folder {out.parent} does not exist")
    if not out.exists():
        return
    if any(path.exists() and out.samefile(path) for path in inputs):
        raise DatasetError(f"{flag} {out} is one of the labelled files: name another file for the report")
    if not force:
        raise DatasetError(f"{flag} {out} already exists: pass --force to replace it, or name another file")


def report_paths(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files the report goes to, as (flag, path); DatasetError when one cannot take it."""
    paths = [(flag, path) for flag, path in (("--out", args.out), ("--html", args.html)) if path is not None]
    inputs = [*args.files, *args.examples_from]
    for flag, path in paths:
        check_report_path(path, inputs, force=args.force, flag=flag)
    if len(paths) == 2 and paths[0][1].absolute() == paths[1][1].absolute():
        raise DatasetError(f"--out and --html both name {args.out}: give each its own file")
    return paths


def write_reports(report: EvalReport, paths: list[tuple[str, Path]]) -> bool:
    """Write the report to each file; False (and a message) when one could not be written."""
    ok = True
    for flag, path in paths:
        if flag == "--html":
            data = render_html(report).encode()
        else:
            data = msgspec.json.format(msgspec.json.encode(report)) + b"\n"
        try:
            path.write_bytes(data)
        except OSError as exc:
            print(f"openjev eval: {flag} {path}: {exc.strerror or exc}", file=sys.stderr)
            ok = False
    return ok


def main_from_args(args: argparse.Namespace) -> int:
    options = EvalOptions(
        url=args.url,
        key=api_key(args),
        model=args.model,
        concurrency=args.concurrency,
        reverse=args.reverse,
        fit_temperature=args.fit_temperature,
        debias=args.debias,
        limit=args.limit,
        examples=args.examples or bool(args.examples_from) or args.examples_apart is not None,
        examples_from=tuple(str(path) for path in args.examples_from),
        examples_apart=args.examples_apart,
    )
    collected = Collected()
    paths: list[tuple[str, Path]] = []  # none until checked: an early Ctrl-C writes nowhere
    try:
        paths = report_paths(args)
        report = asyncio.run(run_eval(args.files, options, collected))
    except DatasetError as exc:
        print(f"openjev eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: report what was answered, and keep it when --out or --html names a file
        report = collected.partial(options)
    print(format_report(report))
    if not write_reports(report, paths):
        return 2
    if report.interrupted:
        written = " and ".join(str(path) for _, path in paths)
        print("openjev eval: interrupted" + (f"; partial report in {written}" if paths else ""), file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    return 1 if any(f.failures for f in report.files) else 0
