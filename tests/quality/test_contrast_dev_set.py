"""The contrastive-pair set loads through `openjev eval`'s loader, and every pair is a real contrast:
the same question, cases that differ, and different right answers."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import msgspec
import pytest

from openjev.contracts.systemone.wire import Question
from openjev.quality.dataset import EvalItem, answer_keys, load_items

CONTRAST = Path(__file__).parents[2] / "benchmarks" / "quality-dev" / "contrast"
FILES = sorted(CONTRAST.glob("*.jsonl"))
DECISIONS = Path(__file__).parents[2] / "benchmarks" / "quality-dev" / "decisions"


def test_it_has_the_kinds_of_the_realistic_decisions() -> None:
    assert [path.stem for path in FILES] == [path.stem for path in sorted(DECISIONS.glob("*.jsonl"))]


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_every_item_belongs_to_one_pair_of_one_question(path: Path) -> None:
    items = load_items(path)
    assert len(items) == 24 and len({item.id for item in items}) == 24
    assert {item.dataset for item in items} == {f"contrast/{path.stem}"}
    pairs: dict[str | None, list[EvalItem]] = defaultdict(list)
    for item in items:
        pairs[item.pair].append(item)
    assert None not in pairs and len(pairs) == 12
    for first, second in pairs.values():
        assert first.question == second.question
        assert first.state != second.state and first.gold != second.gold


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_every_option_of_a_question_is_the_right_answer_somewhere(path: Path) -> None:
    golds: dict[str, set[str | bool | int]] = defaultdict(set)
    questions: dict[str, set[bytes]] = defaultdict(set)
    for item in load_items(path):
        key = (item.pair or "").rsplit("-p", 1)[0]  # `<kind>-c01-p01`: pair 01 of question 01
        golds[key].add(item.gold)
        questions[key].add(msgspec.json.encode(item.question))
    assert len(golds) in (3, 4)
    for key, answers in golds.items():
        assert len(questions[key]) == 1, key  # one question: the same instructions and options
        question = msgspec.json.decode(questions[key].pop(), type=Question)
        assert answers == set(answer_keys(question)), key
