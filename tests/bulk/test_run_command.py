"""`openjev run` end to end: the real CLI against a real `openjev serve --backend fake` process."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.smoke.servers import OPENJEV, clean_env, openjev_server, wait_ready

QUESTIONS = {
    "positive": {"type": "noul", "instructions": "Is the review positive?"},
    "topic": {"type": "choice", "instructions": "Topic?", "criteria": {"food": None, "service": None, "price": None}},
}
ROWS = [{"id": f"r{i}", "text": f"Review number {i}: the soup was cold."} for i in range(30)]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    # Each call takes 100 ms, so a run of 30 rows lasts about 3 s: long enough to be interrupted even
    # on a busy machine, where the test may take a while to notice the fifth line.
    with openjev_server("--backend", "fake", env={"OPENJEV_FAKE_LATENCY": "0.1"}) as url:
        wait_ready(url)
        yield url


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "reviews.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS))
    return data, questions


def command(server: str, data: Path, questions: Path, out: Path, *extra: str) -> list[str]:
    return [
        str(OPENJEV), "run", str(data), "--questions", str(questions), "--state-field", "text",
        "--out", str(out), "--url", server, "--concurrency", "2", *extra,
    ]  # fmt: skip


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=clean_env({}), capture_output=True, text=True, timeout=120)


def lines(path: Path) -> list[dict[str, Any]]:
    return sorted((json.loads(line) for line in path.read_text().splitlines()), key=lambda r: r["row"])


def test_one_line_per_row_with_answers_and_usage(server: str, inputs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    done = run(command(server, *inputs, out))
    assert done.returncode == 0, done.stderr
    result = lines(out)
    assert [r["row"] for r in result] == list(range(1, 31))
    assert [r["id"] for r in result] == [row["id"] for row in ROWS]
    assert all(set(r["answers"]) == {"positive", "topic"} and r["usage"]["output_tokens"] == 3 for r in result)
    assert "30 rows: 30 answered, 0 failed" in done.stdout and "decisions/s" in done.stdout
    tokens = sum(r["usage"]["input_tokens"] for r in result)
    assert f"{tokens} input tokens" in done.stdout and "90 backend calls" in done.stdout
    # The same answers as a direct request.
    body = json.dumps({"model": "jev-latest", "state": ROWS[3]["text"], "questions": QUESTIONS}).encode()
    request = urllib.request.Request(server + "/v1/systemone", data=body, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert json.loads(reply.read())["answers"] == result[3]["answers"]
    # A second run without --resume refuses to overwrite; with it, there is nothing left to send.
    assert run(command(server, *inputs, out)).returncode == 2
    again = run(command(server, *inputs, out, "--resume"))
    assert again.returncode == 0 and "0 answered" in again.stdout and "30 already in" in again.stdout
    assert lines(out) == result


def _interruptible() -> None:
    """Ctrl-C reaches the run even when the tests run as a background job (whose SIGINT is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_killed_mid_run_then_resumed_equals_an_uninterrupted_run(
    server: str, inputs: tuple[Path, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    reference = tmp_path / "reference.jsonl"
    assert run(command(server, *inputs, reference)).returncode == 0
    out = tmp_path / "out.jsonl"
    process = subprocess.Popen(
        command(server, *inputs, out),
        env=clean_env({}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )
    deadline = time.monotonic() + 60
    while not out.exists() or out.read_text().count("\n") < 5:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, sig)
    _, stderr = process.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "--resume" in stderr
    else:
        assert process.returncode == -signal.SIGKILL
        with out.open("a") as torn:
            torn.write('{"row": 29, "id": "r28", "answ')  # what a kill in the middle of a write leaves
    partial = out.read_text().count("\n")
    assert 5 <= partial < 30
    resumed = run(command(server, *inputs, out, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{30 - partial} answered" in resumed.stdout
    assert lines(out) == lines(reference)
    assert len(out.read_text().splitlines()) == 30  # nothing duplicated


def test_failed_rows_are_written_and_sent_again_on_resume(server: str, tmp_path: Path) -> None:
    data = tmp_path / "rows.csv"
    with data.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "state"])
        writer.writerows([["a", "first text"], ["b", "second text"]])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"topic": {"type": "choice", "criteria": {"only": None}}}))  # one option: 422
    out = tmp_path / "out.jsonl"
    args = [str(OPENJEV), "run", str(data), "--questions", str(bad), "--out", str(out), "--url", server]
    failed = run(args)
    assert failed.returncode == 1 and "2 failed" in failed.stdout and "HTTP 422" in failed.stdout
    assert [(r["id"], r["status"]) for r in lines(out)] == [("a", 422), ("b", 422)]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(QUESTIONS))
    fixed = run([*args[:4], str(good), *args[5:], "--resume"])
    assert fixed.returncode == 0, fixed.stdout
    assert [(r["id"], sorted(r["answers"])) for r in lines(out)] == [
        ("a", ["positive", "topic"]),
        ("b", ["positive", "topic"]),
    ]


def test_bad_inputs_name_the_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"state": "ok"}\n{"text": "no state"}\n')
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS))
    done = run([str(OPENJEV), "run", str(data), "--questions", str(questions), "--url", "http://127.0.0.1:9"])
    assert done.returncode == 2 and "line 2" in done.stderr and "--state-field" in done.stderr
    questions.write_text("[]")
    data.write_text('{"state": "ok"}\n')
    done = run([str(OPENJEV), "run", str(data), "--questions", str(questions), "--url", "http://127.0.0.1:9"])
    assert done.returncode == 2 and "questions" in done.stderr
