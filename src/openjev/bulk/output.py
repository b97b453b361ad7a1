"""The output file of `openjev run`: where it may be written, and what `--resume` keeps of it.

Nothing here overwrites a file that is not this command's output for this input. Without
`--resume` the output must be new (or empty); with it, every line must be one `openjev run`
wrote (`row`, `id`, then `answers` or `error`), and each line's `id` must be the id of the input
row it names, or the file is refused untouched: a questions file, the input itself, or the
output of another input are never rewritten. Only the last line may be torn (what a hard kill
in the middle of a write leaves), and only when the lines before it are output or it begins as
one does (`{"row":`): a one-line note or a key file without a newline is not taken for a torn
line. Once the file is known to be ours, the answered lines are kept and the failed, torn and
duplicate ones dropped.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from openjev.bulk.rows import InputError, Row

OUTPUT_KEYS = frozenset({"row", "id", "answers", "usage", "status", "error"})
LINE_START = b'{"row":'  # how every line `openjev run` writes begins (msgspec, compact, `row` first)


def check_output_path(out: Path, inputs: Sequence[Path]) -> None:
    """InputError when `out` cannot be the output file: a folder, in a missing folder, or one of the inputs."""
    if out.is_dir():
        raise InputError(f"--out {out} is a directory: name a file (e.g. {out / 'out.jsonl'})")
    if not out.parent.is_dir():
        raise InputError(f"--out {out}: the folder {out.parent} does not exist")
    for path in inputs:
        if out.exists() and path.exists() and out.samefile(path):
            raise InputError(f"--out {out} is an input of this run ({path}): name another output file")


def answered_rows(out: Path, rows: Sequence[Row]) -> set[int]:
    """The rows `out` already answers; rewrites it without failed, torn or duplicate lines.

    InputError, with `out` left as it is, when it is not `openjev run` output for these rows.
    """
    if not out.exists():
        return set()
    try:
        lines = out.read_bytes().splitlines()
    except OSError as exc:
        raise InputError(f"--out {out}: {exc.strerror or exc}") from None
    kept: list[bytes] = []
    done: set[int] = set()
    ours = False  # a line before this one was output
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        torn = number == len(lines) and (ours or _begins_like_output(line))
        record = _output_line(out, number, line, torn_allowed=torn)
        if record is None:
            continue  # the torn last line: its row is sent again
        ours = True
        row = _matching_row(out, number, record, rows)
        if "answers" in record and row not in done:
            done.add(row)
            kept.append(line)
    handle, temporary = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".resume", dir=out.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(b"".join(line + b"\n" for line in kept))
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return done


def _begins_like_output(line: bytes) -> bool:
    """The line starts as an output line does, or is a start of one cut short."""
    start = line.strip()
    return start.startswith(LINE_START) or (bool(start) and LINE_START.startswith(start))


def _output_line(out: Path, number: int, line: bytes, *, torn_allowed: bool) -> dict[str, Any] | None:
    """The line as an output record; None for an allowed torn line; InputError for anything not ours."""
    refusal = f"{out} is not `openjev run` output (line {number}"
    try:
        record = msgspec.json.decode(line)
    except msgspec.DecodeError:
        if torn_allowed:
            return None
        raise InputError(f"{refusal} is not JSON): refusing to rewrite it; name another --out") from None
    if (
        not isinstance(record, dict)
        or not set(record) <= OUTPUT_KEYS
        or "row" not in record
        or "id" not in record
        or ("answers" in record) == ("error" in record)
    ):
        raise InputError(f"{refusal} is not a row's answers or error): refusing to rewrite it; name another --out")
    return record


def _matching_row(out: Path, number: int, record: dict[str, Any], rows: Sequence[Row]) -> int:
    """The input row a line answers, checked by position and id; InputError for another input's output."""
    row = record["row"]
    if not isinstance(row, int) or isinstance(row, bool) or not 1 <= row <= len(rows):
        raise InputError(
            f"{out}, line {number}: row {row!r} is not a row of this input ({len(rows)} rows): it is the "
            "output of another input; name another --out"
        )
    expected = rows[row - 1].id
    if record["id"] != expected:
        raise InputError(
            f"{out}, line {number}: row {row} has id {record['id']!r} there but {expected!r} in this input: it is "
            "the output of another input (or the input changed); name another --out"
        )
    return row
