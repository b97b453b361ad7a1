"""A model that brings its own decision prompt: the port, and the prompt plan built on it.

A decision model (a decision GGUF, docs/models.md#decision-ggufs) was trained on prompts its own
template writes, one whole prompt per question, read on its own labels. Such a model replaces
openjev's layout (docs/prompt-format.md) through `ModelPrompt`; everything else stays the same:
the contracts, the limits, bias removal, the backend calls. The plan's prefix is the longest start
every branch's prompt shares, so the backend still computes it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from openjev.domain.debiasing import Order
from openjev.domain.decision import Ask, Conversation, Loc, State
from openjev.domain.errors import InvalidRequest, TemplateRefused
from openjev.domain.labels import LabelSet
from openjev.domain.ports import PromptCodec
from openjev.domain.prompt import Branch, PromptPlan
from openjev.domain.reading import Reading


class ModelPrompt(Protocol):
    """A model's own decision prompt: each ask rendered whole by its template, and how it is read.

    `labels`: the model's labels by position, as far as they are fixed (some models choose a question's
    labels from its option keys); `max_options`: the most options an ask may have; `description`: what
    the prompt is, for the start-up log and /health.
    """

    labels: LabelSet
    max_options: int
    description: str

    def orders(self, ask: Ask) -> tuple[Order, ...]:
        """The orders the model's format shows the ask's options in without any bias removal
        (order[k]: the ask's option shown k-th); several when the model always asks in several."""

    def check(self, ask: Ask) -> None:
        """Raise InvalidRequest (at the ask's location) when the model cannot take this ask."""

    def prompt_ids(self, state: State, asks: Sequence[Ask], index: int, order: Order) -> list[int]:
        """The whole prompt's token ids for `asks[index]` shown in `order`; TemplateRefused when the
        model's template refuses it."""

    def reading(self, ask: Ask, order: Order) -> tuple[tuple[int, ...], Reading]:
        """The label ids to score for the ask shown in `order`, and how they are read."""


def build_own_plan(
    state: State,
    asks: Sequence[Ask],
    prompt: ModelPrompt,
    orders: Callable[[Ask], Sequence[Order]],
    where: Loc = (),
) -> PromptPlan:
    """Every ask in each of its orders as a whole prompt; the prefix is what all of them share
    (each branch keeps at least one token of its own, where the label is read)."""
    for ask in asks:
        prompt.check(ask)
    prompts: list[tuple[int, Order, list[int]]] = []
    for i, ask in enumerate(asks):
        for order in orders(ask):
            try:
                prompts.append((i, tuple(order), prompt.prompt_ids(state, asks, i, order)))
            except TemplateRefused as exc:
                raise InvalidRequest.one(
                    where, f"the model's decision template cannot render this: {exc.message}", "template_error"
                ) from None
    first = prompts[0][2]
    shared = min(len(ids) for _, _, ids in prompts) - 1
    for _, _, ids in prompts[1:]:
        shared = min(shared, _common(first, ids))
    branches = []
    for i, order, ids in prompts:
        label_ids, reading = prompt.reading(asks[i], order)
        suffix = tuple(ids[shared:])
        branches.append(Branch(ask=i, suffix_ids=suffix, label_ids=label_ids, order=order, reading=reading))
    return PromptPlan(prefix_ids=tuple(first[:shared]), branches=tuple(branches))


def own_floors(state: State, asks: Sequence[Ask], codec: PromptCodec) -> tuple[int, tuple[int, ...]]:
    """Lower bounds on the tokens of the state and of each ask's own text, with nothing tokenized."""
    contents = [m.content for m in state.messages] if isinstance(state, Conversation) else [state.text]
    prefix = sum(codec.min_tokens(content) for content in contents)
    texts = [[ask.instructions or "", *(option.text or "" for option in ask.options)] for ask in asks]
    return prefix, tuple(sum(codec.min_tokens(text) for text in ask_texts) for ask_texts in texts)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
