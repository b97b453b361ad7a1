"""Input rows for `openjev run`: JSONL objects or CSV records, each with a state and an optional id."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import msgspec

# The largest CSV cell taken (csv's own default is 131,072 characters). A state as large as that
# is refused by the server (OPENJEV_MAX_BODY_BYTES) as that row's error, not by the reader.
MAX_CSV_CELL = 64 * 1024 * 1024


class InputError(ValueError):
    """An input, questions or output file that cannot be used: names the file, the line and why."""


class Row(msgspec.Struct, frozen=True):
    number: int  # 1-based position among the data rows (blank JSONL lines and the CSV header not counted)
    id: Any  # the row's id field/column when it has one, else its number
    state: Any


def load_rows(path: Path, state_field: str, id_field: str) -> list[Row]:
    """Every row of a `.csv` file (header first) or of a JSON Lines file (any other name)."""
    try:
        if path.suffix.lower() == ".csv":
            return _csv_rows(path, state_field, id_field)
        return _jsonl_rows(path, state_field, id_field)
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None


def _jsonl_rows(path: Path, state_field: str, id_field: str) -> list[Row]:
    rows: list[Row] = []
    for line_number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise InputError(f"{path}, line {line_number}: not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}, line {line_number}: expected a JSON object, got {type(record).__name__}")
        rows.append(_row(record, len(rows) + 1, state_field, id_field, f"{path}, line {line_number}"))
    return rows


def _csv_rows(path: Path, state_field: str, id_field: str) -> list[Row]:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{path}, line {line}: not UTF-8 text (byte {data[exc.start]:#04x}); save it as UTF-8"
        ) from None
    previous = csv.field_size_limit(MAX_CSV_CELL)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        if reader.fieldnames is None or state_field not in reader.fieldnames:
            raise InputError(f"{path}: no {state_field!r} column (columns: {reader.fieldnames}); use --state-field")
        return [
            _row(record, number, state_field, id_field, f"{path}, line {reader.line_num}")
            for number, record in enumerate(reader, start=1)
        ]
    except csv.Error as exc:
        raise InputError(f"{path}, line {reader.line_num}: {exc}") from None
    finally:
        csv.field_size_limit(previous)


def _row(record: dict[str, Any], number: int, state_field: str, id_field: str, where: str) -> Row:
    state = record.get(state_field)
    if state is None or state == "":
        raise InputError(f"{where}: no {state_field!r} field (use --state-field to name the state's field)")
    row_id = record.get(id_field)
    return Row(number=number, id=row_id if row_id not in (None, "") else number, state=state)


def load_questions(path: Path) -> dict[str, Any]:
    """The request's `questions` object, read from a JSON file (checked by the server, not here)."""
    try:
        questions = msgspec.json.decode(path.read_bytes())
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(questions, dict) or not questions:
        raise InputError(f'{path}: expected the request\'s `questions` object: {{"id": {{"type": ...}}, ...}}')
    return questions
