"""The realistic-decision dev set loads through `openjev eval`'s own loader, each file as one kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.quality.dataset import gold_index, load_items

DECISIONS = Path(__file__).parents[2] / "benchmarks" / "quality-dev" / "decisions"
FILES = sorted(DECISIONS.glob("*.jsonl"))


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
