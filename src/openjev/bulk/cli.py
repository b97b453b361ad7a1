"""The `openjev run FILE` subcommand. `openjev.cli` calls `register(subparsers)`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from openjev.bulk.output import check_output_path
from openjev.bulk.rows import InputError, load_questions, load_rows
from openjev.bulk.runner import RunOptions, Summary, format_summary, run_rows
from openjev.client.arguments import add_server_arguments, api_key, positive_int

INTERRUPTED_EXIT_CODE = 130


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="bulk decisions: send every row of a JSONL or CSV file to a running server",
        description=(
            "Ask the questions of --questions about the state of every row of FILE (JSON Lines, or CSV with "
            "a header) and write one JSON line per row (row, id, answers, usage; or error) to --out as each "
            "is answered. 503/529 answers are retried after Retry-After. --resume continues an interrupted "
            "or partly failed run. Exits 1 when a row failed, 130 when interrupted."
        ),
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="rows: .jsonl (one object per line) or .csv")
    parser.add_argument("--questions", type=Path, required=True, metavar="Q.json", help="the request's `questions`")
    parser.add_argument("--state-field", default="state", help="field (JSONL) or column (CSV) of the state")
    parser.add_argument("--id-field", default="id", help="field or column copied to each output line as `id`")
    parser.add_argument("--out", "-o", type=Path, default=None, help="output JSONL (default: FILE.out.jsonl)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows --out already answers, send the rest (--out must be this command's output for FILE)",
    )
    add_server_arguments(parser, concurrency=4)
    parser.add_argument("--retries", type=positive_int, default=5, help="resends of a 503/529 per row (default 5)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    parser.set_defaults(run=main_from_args)


def default_output(path: Path) -> Path:
    return path.with_name(path.stem + ".out.jsonl")


def main_from_args(args: argparse.Namespace) -> int:
    out: Path = args.out or default_output(args.file)
    options = RunOptions(
        url=args.url,
        key=api_key(args),
        model=args.model,
        concurrency=args.concurrency,
        retries=args.retries,
        timeout=args.timeout,
        resume=args.resume,
    )
    summary = Summary()
    try:
        check_output_path(out, (args.file, args.questions))
        rows = load_rows(args.file, args.state_field, args.id_field)
        questions = load_questions(args.questions)
        asyncio.run(run_rows(rows, questions, out, options, summary))
    except InputError as exc:
        print(f"openjev run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        summary.interrupted = True
        print(format_summary(summary, out), file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    print(format_summary(summary, out))
    return 1 if summary.failed else 0
