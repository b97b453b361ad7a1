"""The items' hidden states below the adapted layers, computed once for the whole run.

Training changes only the top `--layers` blocks, so what the blocks below make of a prompt is the
same at every step: it is computed once, before the first step, and each step runs the adapted
blocks alone. The prompts also share their first tokens (the chat header and the framing before the
state): those are read once for all items, and each item's own tokens attend to their keys and
values; an item's option orders share its prefix the same way. The states kept take
(tokens read) × (model width) numbers: the memory check counts them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol

import torch

from openjev.tuning.examples import TrainingItem
from openjev.tuning.lower import LowerLayers, Past

REPORT_EVERY_SECONDS = 30.0


@dataclass(frozen=True)
class FrozenItem:
    """One item's states at the first adapted block: its prefix after the shared head, and each reading's suffix."""

    tail: torch.Tensor
    suffixes: tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class FrozenSet:
    """A set's items and their states as the adapted blocks receive them (`states(i, r)`: item i in order r)."""

    head: torch.Tensor
    items: tuple[TrainingItem, ...]
    frozen: tuple[FrozenItem, ...]

    def __len__(self) -> int:
        return len(self.items)

    def states(self, item: int, reading: int) -> torch.Tensor:
        return torch.cat((self.head, self.own(item, reading)))

    def own(self, item: int, reading: int) -> torch.Tensor:
        """Item `item`'s states in order `reading`, after the shared head."""
        frozen = self.frozen[item]
        return torch.cat((frozen.tail, frozen.suffixes[reading]))


class StateStore(Protocol):
    """Where read states are kept while a run lasts (kept_states.py), so a resumed run reads only the rest."""

    def load(self, name: str, items: Sequence[TrainingItem]) -> list[FrozenItem]:
        """The states kept of `items`' first items (those of set `name`), in order."""
        ...

    def keep(self, name: str, start: int, items: Sequence[TrainingItem], frozen: Sequence[FrozenItem]) -> None:
        """Keep `frozen`, the states of `items`: set `name`'s items from `start` on."""
        ...


def shared_head(*sets: Sequence[TrainingItem]) -> tuple[int, ...]:
    """The tokens every item's prefix begins with (at most all but one of the shortest prefix's)."""
    prefixes = [item.prefix for items in sets for item in items]
    if not prefixes:
        return ()
    shortest = min(len(p) for p in prefixes)
    length = next((i for i in range(shortest - 1) if len({p[i] for p in prefixes}) > 1), shortest - 1)
    return tuple(prefixes[0][: max(length, 0)])


def cached_tokens(items: Sequence[TrainingItem], head: tuple[int, ...]) -> int:
    """How many positions' states `freeze` keeps for `items` (besides the head's)."""
    return sum(len(i.prefix) - len(head) + sum(len(r.suffix) for r in i.readings) for i in items)


class HeadReader(Generic[Past]):
    """The shared head read once through the frozen blocks; then each item's tokens after it."""

    def __init__(self, lower: LowerLayers[Past], head: tuple[int, ...], width: int, dtype: torch.dtype) -> None:
        self.lower = lower
        self.empty = torch.empty(0, width, dtype=dtype)
        self.past: Past | None
        self.states, self.past = self.empty, None
        if head:
            self.states, self.past = lower.read(head, None)
        self.length = len(head)

    def item(self, item: TrainingItem) -> FrozenItem:
        tail, past = self.after(self.past, item.prefix[self.length :])
        suffixes = tuple(self.after(past, reading.suffix)[0] for reading in item.readings)
        return FrozenItem(tail, suffixes)

    def after(self, past: Past | None, token_ids: Sequence[int]) -> tuple[torch.Tensor, Past | None]:
        if not token_ids:
            return self.empty, past
        return self.lower.read(token_ids, past)


def freeze(
    items: Sequence[TrainingItem],
    reader: HeadReader[Past],
    what: str,
    report: Callable[[str], None],
    store: StateStore | None = None,
    name: str = "",
) -> FrozenSet:
    """Every item of `items` read through the frozen blocks, with a line of progress every half minute;
    with a `store`, the states it kept of set `name` are not read again, and what is read is kept there
    every half minute and when reading stops, however it stops."""
    frozen = store.load(name, items) if store is not None else []
    if frozen:
        report(f"{what}: {len(frozen)} of {len(items)} read before, kept in the run's folder")
    started = last = time.monotonic()
    first = unkept = len(frozen)
    try:
        for done, item in enumerate(items[first:], start=first + 1):
            frozen.append(reader.item(item))
            now = time.monotonic()
            if now - last > REPORT_EVERY_SECONDS and done < len(items):
                left = (now - started) / (done - first) * (len(items) - done)
                report(f"reading {what} through the unchanged layers: {done}/{len(items)}, {left / 60:.1f} min left")
                last = now
                if store is not None:
                    store.keep(name, unkept, items[unkept:done], frozen[unkept:done])
                    unkept = done
    finally:
        if store is not None:
            store.keep(name, unkept, items[unkept : len(frozen)], frozen[unkept:])
    return FrozenSet(reader.states, tuple(items), tuple(frozen))
