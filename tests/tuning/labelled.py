"""Labelled sets with a rule no model knows: which (unnamed) team handles a message, by its topic."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

MONEY = [
    "I was charged twice for my order, please refund one payment.",
    "My invoice shows the wrong amount.",
    "Can I get a refund for the cancelled subscription?",
    "The card payment failed but the money left my account.",
    "Please send me a receipt for last month's charge.",
    "Why was my bank account debited again?",
]
PARCELS = [
    "My parcel has not arrived after two weeks.",
    "The courier left the package at the wrong address.",
    "Tracking says delivered but there is no box at my door.",
    "The delivery van never came on the promised day.",
    "My package arrived crushed and wet.",
    "Can the courier deliver to my office instead?",
]
QUESTION = {
    "type": "choice",
    "instructions": "Which team handles this message?",
    "criteria": {"team_a": "Team A", "team_b": "Team B"},
}
YES_NO = {"type": "noul", "instructions": "Does Team A handle this message?"}


def team_items(count: int, seed: int, *, yes_no: bool = False) -> list[dict[str, Any]]:
    """Money matters go to team_a, parcels to team_b: the option texts do not say so, the labels teach it.
    `yes_no`: asked as "does Team A handle it?" instead (one prompt per item, learnt in a few steps)."""
    rnd = random.Random(seed)
    items = []
    for index in range(count):
        money = index % 2 == 0
        text = rnd.choice(MONEY if money else PARCELS)
        items.append(
            {
                "id": f"team-{seed}-{index}",
                "state": f"Customer #{rnd.randint(100, 999)} writes: {text}",
                "question": YES_NO if yes_no else QUESTION,
                "gold": money if yes_no else ("team_a" if money else "team_b"),
            }
        )
    return items


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path
