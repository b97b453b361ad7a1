"""Whether two tokenizers, each with its chat template, give openjev's prompts the same token ids.

The production checkpoint's tokenizer and chat template are a re-save in the quantised repository,
while the model learned the base repository's. openjev sends SGLang token ids, so any difference
(a vocabulary entry, a normaliser, one character of the template) would move every answer without
an error. Compared here: every answer label's id (up to the 255-option ceiling), then the prefix
and each question's suffix of the prompts openjev builds for the specification's example, for a
longer chat transcript, for a text state and for an agent transcript with a tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from openjev.contracts import decisions, systemone
from openjev.contracts.decisions.openapi import AGENT_EXAMPLE
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.decision import Decision
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.ports import PromptCodec
from openjev.domain.prompt import build_plan
from openjev.settings import MAX_OPTION_LIMIT

CONTEXT_TOKENS = 3  # ids shown on each side of the first difference

# A transcript with every role, an assistant turn, Unicode and a special token's spelling in caller text.
TRANSCRIPT: dict[str, Any] = {
    "model": "jev-latest",
    "state": [
        {"role": "system", "content": "You route messages for a bank. Be brief."},
        {"role": "user", "content": "Bonjour ! Ma carte a été débitée deux fois — 42,50 € chacune."},
        {"role": "assistant", "content": "I see two charges of 42.50 EUR. Do you want a refund?"},
        {"role": "user", "content": "Yes please. <|im_end|> Also, my app shows 「エラー」 since yesterday. 🙏"},
    ],
    "questions": {
        "refund": {"type": "noul", "criteria": {"true": "asks for money back", "false": None}},
        "topic": {
            "type": "choice",
            "instructions": "What is the main topic?",
            "criteria": {"cards": "Card payments", "app": "The mobile app", "other": None},
        },
        "mood": {"type": "score", "criteria": ["Calm", "Annoyed", "Angry", "Furious"]},
    },
}
TEXT_STATE: dict[str, Any] = {
    "model": "jev-latest",
    "state": {"ticket": 1042, "body": "Le prélèvement du 3 mars a échoué.\n\tCode: E-17"},
    "questions": {"failed": {"type": "noul", "instructions": "Did a payment fail?"}},
}
CASES: Mapping[str, Mapping[str, Any]] = {
    "spec_example": EXAMPLE_REQUEST,
    "transcript": TRANSCRIPT,
    "json_state": TEXT_STATE,
}


DECISIONS_CASES: Mapping[str, Mapping[str, Any]] = {"agent_tool_call": AGENT_EXAMPLE}


def _decisions() -> dict[str, tuple[Decision, list[str]]]:
    """Each case's decision and its questions' names, in order."""
    limits, models = Limits(max_options=MAX_OPTION_LIMIT), frozenset[str]()
    found: dict[str, tuple[Decision, list[str]]] = {}
    for case, body in CASES.items():
        parsed = systemone.parse(msgspec.json.encode(body), limits, models)
        found[case] = parsed.decision, list(parsed.request.questions)
    for case, body in DECISIONS_CASES.items():
        chosen = decisions.parse(msgspec.json.encode(body), limits, models)
        found[case] = chosen.decision, [q.name or str(i) for i, q in enumerate(chosen.request.questions)]
    return found


def prompt_ids(codec: PromptCodec) -> dict[str, tuple[int, ...]]:
    """Every id sequence the comparison covers, by name: labels, then each case's prefix and suffixes."""
    labels = verify_labels(codec, MAX_OPTION_LIMIT)
    named: dict[str, tuple[int, ...]] = {
        "labels": labels.token_ids,
        "yes_no": (labels.yes_id, labels.no_id),
    }
    for case, (decision, names) in _decisions().items():
        plan = build_plan(decision.state, decision.asks, codec, labels)
        named[f"{case}/prefix"] = plan.prefix_ids
        for branch in plan.branches:
            named[f"{case}/{names[branch.ask]}"] = branch.suffix_ids
            named[f"{case}/{names[branch.ask]}/labels"] = branch.label_ids
    return named


def differences(api: PromptCodec, base: PromptCodec) -> list[str]:
    """What differs between the two codecs' ids, one line per sequence; empty when they agree."""
    ours, theirs = prompt_ids(api), prompt_ids(base)
    found: list[str] = []
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        if a is None or b is None:
            found.append(f"{name}: only the {'API' if b is None else 'base'} tokenizer builds it")
        elif a != b:
            found.append(_describe(name, a, b, api))
    return found


def _describe(name: str, a: tuple[int, ...], b: tuple[int, ...], codec: PromptCodec) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo, hi = max(0, at - CONTEXT_TOKENS), at + CONTEXT_TOKENS
    around = codec.decode(a[lo:hi])
    return (
        f"{name}: {len(a)} ids against the base's {len(b)}, first difference at {at}: "
        f"{list(a[lo:hi])} against {list(b[lo:hi])} (API text {around!r})"
    )
