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


def test_resume_refuses_a_file_that_is_not_this_inputs_output_and_leaves_it_untouched(
    server: str, inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    data, questions = inputs
    other_input = tmp_path / "other.jsonl"
    other_input.write_text("".join(json.dumps({"id": f"x{i}", "text": f"Other {i}"}) + "\n" for i in range(3)))
    others_output = tmp_path / "others.out.jsonl"
    assert run(command(server, other_input, questions, others_output)).returncode == 0
    questions_copy = tmp_path / "questions-copy.json"
    questions_copy.write_text(questions.read_text())
    input_copy = tmp_path / "input-copy.jsonl"
    input_copy.write_text(data.read_text())
    cases = {
        questions: "is an input of this run",
        data: "is an input of this run",
        questions_copy: "is not `openjev run` output (line 1",
        input_copy: "is not `openjev run` output (line 1",
        others_output: "there but 'r",  # row N has id 'xK' there but 'rK' in this input (lines in completion order)
    }
    for out, refusal in cases.items():
        before = out.read_bytes()
        refused = run(command(server, data, questions, out, "--resume"))
        assert refused.returncode == 2 and refusal in refused.stderr, (out, refused.stderr)
        assert out != others_output or "it is the output of another input" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert out.read_bytes() == before  # never rewritten


@pytest.mark.parametrize("case", ["directory", "missing folder", "non-UTF-8 CSV", "non-UTF-8 JSONL"])
def test_unusable_paths_and_files_exit_2_with_a_message(tmp_path: Path, case: str) -> None:
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS))
    data, out = tmp_path / "rows.jsonl", tmp_path / "out.jsonl"
    data.write_text('{"state": "fine"}\n')
    if case == "directory":
        out.mkdir()
    elif case == "missing folder":
        out = tmp_path / "nowhere" / "out.jsonl"
    elif case == "non-UTF-8 CSV":
        data = tmp_path / "rows.csv"
        data.write_bytes(b"state\ncaf\xe9 cr\xe8me\n")  # Latin-1, not UTF-8
    else:
        data.write_bytes(b'{"state": "fine"}\n{"state": "caf\xe9"}\n')
    args = [str(OPENJEV), "run", str(data), "--questions", str(questions), "--out", str(out)]
    done = run([*args, "--url", "http://127.0.0.1:9"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    expected = {"directory": "is a directory", "missing folder": "does not exist", "non-UTF-8 CSV": "line 2: not UTF-8",
                "non-UTF-8 JSONL": "line 2: not valid JSON"}[case]  # fmt: skip
    assert expected in done.stderr, done.stderr


def test_a_csv_cell_larger_than_csvs_default_limit_is_read_and_sent(server: str, tmp_path: Path) -> None:
    data = tmp_path / "rows.csv"
    data.write_text("id,state\nbig," + "word " * 30_000 + "\nsmall,fine\n")  # 150,000 characters in one cell
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(QUESTIONS))
    out = tmp_path / "out.jsonl"
    done = run([str(OPENJEV), "run", str(data), "--questions", str(questions), "--out", str(out), "--url", server])
    assert "Traceback" not in done.stderr, done.stderr
    answered = {r["id"]: r for r in lines(out)}
    assert set(answered) == {"big", "small"} and "answers" in answered["small"]
    assert answered["big"].get("status") in (None, 413, 422)  # the server's verdict on its size, not the reader's
