"""Send one request per input row and write one output line per row as it is answered (`openjev run`).

The output is JSON Lines in completion order; every line names its input row (`row`, 1-based) and
its `id`. Each line goes out in one write and is flushed at once, so a crash or Ctrl-C loses at
most the rows in flight and, after a hard kill, leaves at most one torn last line. `--resume`
keeps the answered lines, drops failed and torn ones, and sends only the rows still missing, so
the finished file holds exactly one line per row; it first checks that the file is this command's
output for this input (`output.py`), and never rewrites one that is not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from openjev.bulk.output import answered_rows
from openjev.bulk.rows import InputError, Row
from openjev.client.progress import Progress
from openjev.client.systemone import SystemOneClient

MAX_ERRORS_SHOWN = 5


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    key: str | None = None
    model: str = "jev-latest"
    concurrency: int = 4
    retries: int = 5  # per row, for 503/529 answers (the server's Retry-After is honoured)
    timeout: float = 300.0
    resume: bool = False
    progress: bool | None = None  # None: a bar when stderr is a terminal


class Summary(msgspec.Struct):
    rows: int = 0  # in the input
    skipped: int = 0  # already answered in the output (--resume)
    answered: int = 0
    failed: int = 0
    decisions: int = 0  # answers received: answered rows times their questions
    input_tokens: int = 0
    calls: int = 0  # backend calls (usage.output_tokens)
    elapsed: float = 0.0
    interrupted: bool = False
    errors: list[str] = msgspec.field(default_factory=list)

    @property
    def pending(self) -> int:
        return self.rows - self.skipped - self.answered - self.failed


def request_for(row: Row, questions: dict[str, Any], model: str) -> dict[str, Any]:
    return {"model": model, "state": row.state, "questions": questions}


async def decide_row(client: SystemOneClient, row: Row, questions: dict[str, Any], model: str) -> dict[str, Any]:
    """The output line of one row: its answers and usage, or why it failed."""
    try:
        reply = await client.decide(request_for(row, questions, model))
    except (aiohttp.ClientError, TimeoutError) as exc:
        return {"row": row.number, "id": row.id, "error": f"{type(exc).__name__}: {exc}".rstrip(": ")}
    if not reply.ok or not isinstance(reply.body, dict) or "answers" not in reply.body:
        return {"row": row.number, "id": row.id, "status": reply.status, "error": reply.error()}
    return {"row": row.number, "id": row.id, "answers": reply.body["answers"], "usage": reply.body.get("usage")}


def rows_to_send(rows: Sequence[Row], out: Path, *, resume: bool) -> list[Row]:
    """The rows `out` does not answer yet (all of them unless resuming; `out` must then be new or empty)."""
    if resume:
        done = answered_rows(out, rows)
    elif out.exists() and out.stat().st_size > 0:
        raise InputError(f"{out} already exists: pass --resume to continue it, or remove it to start over")
    else:
        done = set()
    return [row for row in rows if row.number not in done]


async def run_rows(
    rows: Sequence[Row], questions: dict[str, Any], out: Path, options: RunOptions, summary: Summary
) -> Summary:
    """Answer every row not yet in `out`, appending a line per row; `summary` is updated as it goes."""
    summary.rows = len(rows)
    todo = await asyncio.to_thread(rows_to_send, rows, out, resume=options.resume)
    summary.skipped = len(rows) - len(todo)
    progress = Progress(len(todo), out.name, enabled=options.progress)
    pending: Iterator[Row] = iter(todo)
    started = time.perf_counter()
    try:
        try:
            sink = out.open("ab")
        except OSError as exc:
            raise InputError(f"--out {out}: {exc.strerror or exc}") from None
        with sink:
            async with SystemOneClient(
                options.url, key=options.key, timeout=options.timeout, retries=options.retries
            ) as c:

                async def worker() -> None:
                    for row in pending:  # shared iterator: each row goes to exactly one worker
                        line = await decide_row(c, row, questions, options.model)
                        sink.write(msgspec.json.encode(line) + b"\n")
                        sink.flush()
                        _count(summary, line, len(questions))
                        progress.advance(failed="error" in line)

                async with asyncio.TaskGroup() as group:
                    for _ in range(min(options.concurrency, len(todo))):
                        group.create_task(worker())
    finally:
        summary.elapsed = time.perf_counter() - started
        progress.close()
    return summary


def _count(summary: Summary, line: dict[str, Any], questions: int) -> None:
    if "error" in line:
        summary.failed += 1
        if len(summary.errors) < MAX_ERRORS_SHOWN and line["error"] not in summary.errors:
            summary.errors.append(line["error"])
        return
    summary.answered += 1
    summary.decisions += questions
    usage = line.get("usage") or {}
    summary.input_tokens += int(usage.get("input_tokens", 0))
    summary.calls += int(usage.get("output_tokens", 0))


def format_summary(summary: Summary, out: Path) -> str:
    elapsed = summary.elapsed
    rate = summary.answered / elapsed if elapsed > 0 else 0.0
    per_row = summary.input_tokens / summary.answered if summary.answered else 0.0
    head = f"{summary.rows} rows: {summary.answered} answered, {summary.failed} failed"
    if summary.skipped:
        head += f", {summary.skipped} already in {out}"
    if summary.interrupted:
        head += f"; interrupted with {summary.pending} left: run again with --resume"
    lines = [
        head,
        f"  {elapsed:.1f} s   {rate:.2f} rows/s   {summary.decisions / elapsed if elapsed > 0 else 0.0:.2f} decisions/s"
        f"   {summary.input_tokens} input tokens ({per_row:.0f} per row)   {summary.calls} backend calls",
        f"  output: {out}",
    ]
    lines += [f"  error: {error}" for error in summary.errors]
    if summary.failed:
        lines.append("  failed rows have an `error` line; --resume sends them again")
    return "\n".join(lines)
