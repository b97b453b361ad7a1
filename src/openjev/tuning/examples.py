"""Labelled items as the token ids the server sends for them: what training reads, and nothing else.

Each item (the JSONL `openjev eval` reads) goes through the System One contract's own checks and
translation, then the evaluator's planner with the server's settings: the prompt is the one
`openjev serve` would send for that question, in every option order its bias removal asks it in
(the order sent and its reverse, by default), with the label ids it would read. An adapter trained
on these prompts learns the distribution the server reports, not some other prompt's.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from pathlib import Path

import msgspec

from openjev.contracts.systemone.parsing import to_decision, validate_request
from openjev.contracts.systemone.wire import SystemOneRequest
from openjev.domain.errors import InvalidRequest
from openjev.domain.labels import LabelSet
from openjev.domain.ports import PromptCodec
from openjev.evaluation_plan import EvaluatorConfig, plan
from openjev.quality.dataset import DatasetError, EvalItem, gold_index, load_items


class Reading(msgspec.Struct, frozen=True):
    """One option order of an item: the tokens after the shared prefix, the label ids read, and the
    order the options are shown in (label k shows option `order[k]`)."""

    suffix: tuple[int, ...]
    labels: tuple[int, ...]
    order: tuple[int, ...]

    def position_of(self, option: int) -> int:
        return self.order.index(option)


class TrainingItem(msgspec.Struct, frozen=True):
    """An item as the server asks it: its id, gold option index, shared prefix and one reading per order."""

    id: str
    gold: int
    prefix: tuple[int, ...]
    readings: tuple[Reading, ...]

    @property
    def longest(self) -> int:
        return len(self.prefix) + max(len(r.suffix) for r in self.readings)


class LabelledSet(msgspec.Struct, frozen=True):
    """A file's items and the sha256 of its bytes (the manifest names the data an adapter learnt from)."""

    path: str
    sha256: str
    items: tuple[EvalItem, ...]


def read_labelled(path: Path) -> LabelledSet:
    """The file's items, checked as `openjev eval` checks them (DatasetError saying which line and why)."""
    items = load_items(path)
    return LabelledSet(str(path), hashlib.sha256(path.read_bytes()).hexdigest(), tuple(items))


def held_out_slice(items: Sequence[EvalItem], share: float, seed: int) -> tuple[list[EvalItem], list[EvalItem]]:
    """(train, eval): `share` of the items, drawn by a seeded shuffle, at least one each; the same draw every run."""
    if len(items) < 2:
        raise DatasetError(f"{len(items)} item: training needs at least 2 (one to learn from, one to measure on)")
    count = min(len(items) - 1, max(1, round(len(items) * share)))
    picked = set(random.Random(seed).sample(range(len(items)), count))
    return [x for i, x in enumerate(items) if i not in picked], [x for i, x in enumerate(items) if i in picked]


def render(
    items: Sequence[EvalItem], codec: PromptCodec, labels: LabelSet, config: EvaluatorConfig, *, source: str
) -> list[TrainingItem]:
    """Every item's prompts, as `plan` builds them; DatasetError naming the item the server would refuse."""
    rendered = []
    for number, item in enumerate(items, start=1):
        name = item.id or f"{source}#{number}"
        request = SystemOneRequest(model="jev-latest", state=item.state, questions={"q": item.question})
        try:
            validate_request(request, config.limits)
            prepared = plan(to_decision(request), codec, labels, config)
        except InvalidRequest as exc:
            problems = "; ".join(issue.msg for issue in exc.issues)
            raise DatasetError(f"{source}, item {name}: the server would refuse it: {problems}") from None
        readings = tuple(
            Reading(b.suffix_ids, b.label_ids, b.order or tuple(range(len(b.label_ids))))
            for b in prepared.plan.branches
        )
        rendered.append(TrainingItem(name, gold_index(item), prepared.plan.prefix_ids, readings))
    return rendered
