"""The `openjev generate NAME COUNT --seed S --out FILE.jsonl` subcommand. `openjev.cli` calls `register(subparsers)`.

One sub-subcommand per entry of `openjev.tuning.generators.GENERATORS`, its flags from the entry. The
file is what `openjev tune` trains on and `openjev eval` measures. An existing file is never
overwritten (a training set is a record of what a run saw), and the file appears whole or not at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openjev.client.arguments import positive_int
from openjev.tuning.atomic_file import create_atomically
from openjev.tuning.generators import GENERATORS, Generator


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="write labelled items made by a generator (JSONL, as `openjev tune` and `openjev eval` read)",
        description=(
            "Write COUNT labelled items ({id, state, question, gold} per line) whose answers are computed from "
            "what was drawn. The same name, count, seed and flags write the same bytes. A generator's own "
            "flags: `openjev generate NAME --help`."
        ),
    )
    generators = parser.add_subparsers(dest="generator", required=True, metavar="NAME")
    for generator in GENERATORS.values():
        command = generators.add_parser(generator.name, help=generator.help, description=generator.help)
        command.add_argument("count", type=positive_int, metavar="COUNT", help="how many items")
        command.add_argument("--seed", type=int, default=0, help="the random seed (0)")
        command.add_argument(
            "--out", type=Path, required=True, metavar="FILE.jsonl", help="a new file (an existing one is refused)"
        )
        for flag in generator.flags:
            command.add_argument(f"--{flag.name}", dest=_dest(flag.name), action="store_true", help=flag.help)
        command.set_defaults(run=main_from_args)


def _dest(flag: str) -> str:
    return "flag_" + flag.replace("-", "_")


def main_from_args(args: argparse.Namespace) -> int:
    generator: Generator = GENERATORS[args.generator]
    out: Path = args.out
    if out.exists():  # before the items are made; `create_atomically` refuses it again at the end
        return _exists(out)
    options = {flag.name: bool(getattr(args, _dest(flag.name))) for flag in generator.flags}
    text = "".join(json.dumps(item) + "\n" for item in generator.generate(args.count, args.seed, options))
    try:
        create_atomically(out, text.encode())
    except FileExistsError:
        return _exists(out)
    except OSError as exc:
        print(f"openjev generate: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"openjev generate: {args.count} {generator.name} items in {out}", file=sys.stderr)
    return 0


def _exists(out: Path) -> int:
    print(f"openjev generate: {out} already exists; nothing was written", file=sys.stderr)
    return 2
