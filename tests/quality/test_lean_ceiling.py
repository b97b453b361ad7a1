"""`benchmarks/lean_ceiling.py` bounds what per-option offsets can do, from an eval report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "lean_ceiling.py"


def _answer(gold: str, probabilities: dict[str, float]) -> dict[str, object]:
    return {"gold": gold, "answer": max(probabilities, key=probabilities.__getitem__), "probabilities": probabilities}


def _run(tmp_path: Path, answers: list[dict[str, object]]) -> subprocess.CompletedProcess[str]:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"files": [{"file": "dir/kind.jsonl", "answers": answers}]}))
    return subprocess.run([sys.executable, str(SCRIPT), str(report)], capture_output=True, text=True, check=True)


def _rows(tmp_path: Path, answers: list[dict[str, object]]) -> list[list[str]]:
    return [line.split() for line in _run(tmp_path, answers).stdout.splitlines()[1:]]


def test_a_lean_is_taken_back_whole(tmp_path: Path) -> None:
    # Every case leans to "a", each by less than the one before it: offsets can make all three right.
    answers = [
        _answer("a", {"a": 0.90, "b": 0.05, "c": 0.05}),
        _answer("b", {"a": 0.60, "b": 0.35, "c": 0.05}),
        _answer("c", {"a": 0.60, "b": 0.05, "c": 0.35}),
    ]
    assert _rows(tmp_path, answers) == [["kind.jsonl", "3", "3", "1", "3", "3"], ["all", "3", "1", "3", "3"]]


def test_cases_the_model_cannot_tell_apart_cap_the_best(tmp_path: Path) -> None:
    # The same distribution with two different gold answers: no offsets get both right.
    same = {"a": 0.7, "b": 0.3}
    answers = [_answer("a", same), _answer("b", same), _answer("b", {"a": 0.2, "b": 0.8})]
    assert _rows(tmp_path, answers)[-1] == ["all", "3", "2", "2", "2"]


def test_yes_no_items_are_left_out(tmp_path: Path) -> None:
    answers = [_answer("True", {"yes": 0.9, "no": 0.1}), _answer("a", {"a": 0.9, "b": 0.1})]
    assert _rows(tmp_path, answers)[-1] == ["all", "1", "1", "1", "1"]
    assert _run(tmp_path, answers).stderr.startswith("left out: 1 item, yes/no")


def test_items_the_eval_could_not_answer_are_left_out_and_counted(tmp_path: Path) -> None:
    failed: dict[str, object] = {"gold": "b", "error": "HTTP 504: the backend did not answer within 120 s"}
    answers = [failed, failed, _answer("a", {"a": 0.9, "b": 0.1})]
    assert _rows(tmp_path, answers)[-1] == ["all", "1", "1", "1", "1"]
    assert _run(tmp_path, answers).stderr.startswith("left out: 2 items, the eval did not answer")
