"""A decision, as the use case takes it: a state, ordered asks and a policy; no wire format.

Every contract (System One, OpenAI Decisions) translates its request into a `Decision` and the
use case's `Outcome` back into its response, so the same question gets the same probabilities
whichever contract asked it. Nothing here knows field names of a wire: where an ask or the state
sits in the caller's request is carried as an opaque location (`where`), only to name it in errors.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from openjev.domain.debiasing import DebiasMode
from openjev.domain.ports import ChatMessage

Loc = tuple[str | int, ...]
"""Where something sits in the caller's request, in the contract's own terms (for error messages)."""

AskKind = Literal["yes_no", "choice", "scale"]
OptionKey = str | bool | int
"""How the caller names an option: a choice's name or typed value, a level's index, True/False for yes/no."""


class Conversation(msgspec.Struct, frozen=True):
    """A chat or agent transcript: it renders as these messages, with their roles, through the chat template."""

    messages: tuple[ChatMessage, ...]


class Document(msgspec.Struct, frozen=True):
    """Any other state: the whole text in one user message, framed as data to be judged."""

    text: str


State = Conversation | Document


class Option(msgspec.Struct, frozen=True):
    """One answer an ask offers: its key, and the text the model is shown for it (None: nothing is shown)."""

    key: OptionKey
    text: str | None


class Example(msgspec.Struct, frozen=True):
    """A solved case the caller sends with an ask: a state and the index of its right option."""

    state: State
    answer: int


class Ask(msgspec.Struct, frozen=True, kw_only=True):
    """One question: its kind, its instructions (None: the kind's default) and its options, in order.

    A yes/no ask has two options, yes (key True) then no (key False), whose texts are the optional
    descriptions of what each answer means. A choice ask's options are shown under single-token
    labels in the order given; a scale's levels go from the lowest to the highest. `examples`: the
    caller's solved cases, shown to the model before the state (docs/prompt-format.md). `name`: the
    caller's name for the question (System One's question id), never shown by openjev's layout; a
    decision model's own template may show it.
    """

    kind: AskKind
    instructions: str | None
    options: tuple[Option, ...]
    where: Loc = ()
    examples: tuple[Example, ...] = ()
    name: str | None = None

    def option_index(self, key: OptionKey) -> int | None:
        """Where the option named `key` sits, typed (`1` is no yes, `"1"` no level), or None."""
        for index, option in enumerate(self.options):
            if type(option.key) is type(key) and option.key == key:
                return index
        return None


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    """How to answer: bias removal (None: the server's default), label mass, refusals.

    `refusals`: the contract can express a refusal, so the server's refusal policy applies (a contract
    without one always gets a distribution). `label_mass`: report each answer's label mass.
    """

    debias: DebiasMode | None = None
    label_mass: bool = False
    refusals: bool = False


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """`root` and `state_where` locate the request and its state in the caller's terms (for errors)."""

    state: State
    asks: tuple[Ask, ...]
    policy: Policy = Policy()
    root: Loc = ()
    state_where: Loc = ()
