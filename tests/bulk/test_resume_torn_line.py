"""`openjev run --resume` takes a non-JSON last line for a torn output line only when the file is output.

The real CLI: a one-line note or a key file without a newline is refused and left as it is; a
lone line cut short in the middle of an output line is resumed over.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.smoke.servers import OPENJEV, clean_env, openjev_server, wait_ready

QUESTIONS = {"positive": {"type": "noul", "instructions": "Is the review positive?"}}
ROWS = [{"id": f"r{i}", "text": f"Review number {i}: the soup was cold."} for i in range(3)]


def inputs(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS))
    return data, questions


def resume(data: Path, questions: Path, out: Path, url: str) -> subprocess.CompletedProcess[str]:
    args = [str(OPENJEV), "run", str(data), "--questions", str(questions), "--state-field", "text"]
    return subprocess.run(
        [*args, "--out", str(out), "--url", url, "--resume"],
        env=clean_env({}),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "content",
    [
        b"remember to check row 3 before sending",  # a note, no newline
        b"remember to check row 3 before sending\n",  # the same with its newline
        b"sk-3f9a61c2d4e8b7a05f1e",  # a key file without a newline
        b'["row", 1]',  # JSON, but not an output line
        b'{"note": "not output"',  # cut JSON that was never output
    ],
)
def test_a_one_line_file_that_is_not_output_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    data, questions = inputs(tmp_path)
    out = tmp_path / "notes.txt"
    out.write_bytes(content)
    refused = resume(data, questions, out, "http://127.0.0.1:9")  # refused before any request
    assert refused.returncode == 2, refused.stderr
    assert "is not `openjev run` output (line 1" in refused.stderr and "Traceback" not in refused.stderr
    assert out.read_bytes() == content


@pytest.mark.parametrize("torn", [b'{"row":2,"id":"r1","answ', b'{"ro'])
def test_a_lone_line_cut_short_in_an_output_line_is_resumed_over(tmp_path: Path, torn: bytes) -> None:
    data, questions = inputs(tmp_path)
    out = tmp_path / "reviews.out.jsonl"
    out.write_bytes(torn)
    with openjev_server("--backend", "fake") as url:
        wait_ready(url)
        done = resume(data, questions, out, url)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["r0", "r1", "r2"] and all("answers" in r for r in records)
