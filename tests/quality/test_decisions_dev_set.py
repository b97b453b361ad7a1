"""The realistic-decision dev set loads through `openjev eval`'s own loader, each file as one kind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from openjev.quality.dataset import answer_keys, gold_index, load_items
from openjev.quality.examples import ExamplePool

DECISIONS = Path(__file__).parents[2] / "benchmarks" / "quality-dev" / "decisions"
FILES = sorted(DECISIONS.glob("*.jsonl"))
SUBSET = Path(__file__).parents[2] / "benchmarks" / "decisions_subset.py"
TEMPLATE = re.compile(r"^(.*-t[0-9]+)-")  # the case family the docs pass as --examples-apart


def test_the_set_has_its_eight_kinds() -> None:
    assert [path.stem for path in FILES] == [
        "action_review",
        "agent_routing",
        "claim_support",
        "content_moderation",
        "returns_policy",
        "review_sentiment",
        "support_intent",
        "ticket_triage",
    ]


@pytest.mark.parametrize("path", FILES, ids=[path.stem for path in FILES])
def test_every_item_is_a_choice_of_its_own_kind(path: Path) -> None:
    items = load_items(path)
    assert {item.question.kind for item in items} == {"choice"}
    assert {item.dataset for item in items} == {f"decisions/{path.stem}"}
    assert len({item.id for item in items}) == len(items)
    for item in items:
        gold_index(item)  # the gold answer is one of the item's options


def test_the_shared_sample_gets_an_example_of_every_option_from_other_cases(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SUBSET), str(tmp_path), "shared"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    items = [item for path in sorted(tmp_path.glob("*.jsonl")) for item in load_items(path)]
    assert len(items) == 82
    pool = ExamplePool(items, TEMPLATE)
    for item in items:
        examples = pool.question_for(item).x_examples or []
        assert [e.answer for e in examples] == answer_keys(item.question)  # the item's own answer included
        family = TEMPLATE.search(item.id or "")
        assert family is not None
        sources = [next(i for i in items if i.state == e.state) for e in examples]
        assert all(not (s.id or "").startswith(family.group(1) + "-") for s in sources)
