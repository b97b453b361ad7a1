"""Slot routing for the embedded engine (pure): which llama.cpp slot a call should run in.

llama.cpp keeps one KV cache per slot and reuses the longest common prefix of the previous prompt
in the same slot. Each call is pinned to a slot (`id_slot`) chosen by `SlotRouter`: the slot whose
cache shares the most tokens with the prompt, unless its queue makes another slot cheaper. The
branches of one request therefore follow their warm-up into its slot and pay only for their
suffix, while other requests use other slots in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from openjev.adapters.common_prefix import common_prefix_length

QUEUE_WEIGHT = 0.125  # how much a token waiting in a slot's queue counts against a token of prefill


@dataclass
class _SlotState:
    tail: tuple[int, ...] = ()  # the prompt of the last call routed here: what its cache will hold
    pending_calls: int = 0
    pending_tokens: int = 0  # tokens still to prefill for the calls routed here and not finished
    last_routed: int = -1


@dataclass(frozen=True)
class Route:
    slot: int
    new_tokens: int  # the tokens this call is expected to prefill


@dataclass
class SlotRouter:
    """Chooses a slot per call: least prefill work plus a fraction of the slot's queued work.

    On a CPU every slot shares the same cores, so total prefill is what costs. A call joins a busy
    slot only when it continues that slot's prompt: a branch that reuses at least half of its tokens
    there, or a warm-up whose whole prefix is already there. Another request's warm-up, which may
    share a long chat header and data frame, must not evict a prefix whose branches are still coming.
    The queue term lets a very long queue spill to another slot when the prefix is cheap to
    recompute. Ties go to the least recently used slot, which keeps the most recent caches alive.
    """

    slots: int
    queue_weight: float = QUEUE_WEIGHT
    _states: list[_SlotState] = field(init=False)
    _clock: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._states = [_SlotState() for _ in range(self.slots)]

    def route(self, token_ids: Sequence[int], *, warm_up: bool = False) -> Route:
        tokens = tuple(token_ids)
        continues = len(tokens) - 1 if warm_up else (len(tokens) + 1) // 2
        options: list[tuple[tuple[float, int, int], Route, bool]] = []
        for slot, state in enumerate(self._states):
            reused = min(common_prefix_length(state.tail, tokens), max(len(tokens) - 1, 0))
            new = len(tokens) - reused
            eligible = state.pending_calls == 0 or reused >= continues
            key = (new + self.queue_weight * state.pending_tokens, state.pending_calls, state.last_routed)
            options.append((key, Route(slot=slot, new_tokens=new), eligible))
        candidates = [o for o in options if o[2]] or options
        chosen = min(candidates, key=lambda o: o[0])[1]
        state = self._states[chosen.slot]
        self._clock += 1
        state.tail = tokens
        state.pending_calls += 1
        state.pending_tokens += chosen.new_tokens
        state.last_routed = self._clock
        return chosen

    def done(self, route: Route) -> None:
        state = self._states[route.slot]
        state.pending_calls -= 1
        state.pending_tokens -= route.new_tokens

    def busy(self) -> int:
        return sum(s.pending_calls for s in self._states)
