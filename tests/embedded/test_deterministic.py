"""Deterministic mode of the embedded backend, against an engine whose results depend on batching.

`SimulatedEngine` with `batch_noise` moves a result whenever llama.cpp would (a reused prefix that
ends between groups of 8, a short batch, two calls batched together, a prefix computed that way):
the backend's plan must give every arrangement of the same question the cold answer, and the same
simulation without the plan must not.
"""

from __future__ import annotations

import asyncio

import pytest

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.domain.errors import BackendError
from tests.embedded.simulated_engine import SimulatedEngine, config


@pytest.fixture
def engine() -> SimulatedEngine:
    engine = SimulatedEngine()
    engine.batch_noise = True
    return engine


async def _same_question_many_ways(backend: EmbeddedBackend) -> list[tuple[float, ...]]:
    """One question's scores: cold, cached, after a warm-up, beside other branches, in another order."""
    prefix = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6]
    question = [*prefix, 33, 8, 32]
    others = [[*prefix, 33, 8, 12, 5], [*prefix, 33, 40], [*prefix, 33, 8, 32, 9, 1, 2]]
    labels = [1, 2]
    seen = [(await backend.score("cold", question, labels)).logprobs]
    seen.append((await backend.score("again", question, labels)).logprobs)
    await backend.warm("w", prefix)
    for ordering in (others, others[::-1]):
        asked = await asyncio.gather(
            *(backend.score(f"o{i}", other, labels) for i, other in enumerate(ordering)),
            backend.score("q", question, labels),
            *(backend.score(f"p{i}", other, labels) for i, other in enumerate(ordering)),
        )
        seen.append(asked[len(ordering)].logprobs)
    return seen


async def test_deterministic_answers_do_not_depend_on_the_cache_or_the_other_calls(engine: SimulatedEngine) -> None:
    backend = EmbeddedBackend(config(engine.slots), load_engine=lambda _: engine)
    await backend.start()
    try:
        seen = await _same_question_many_ways(backend)
    finally:
        await backend.close()
    assert len(set(seen)) == 1
    assert engine.most_at_once == 1


async def test_without_determinism_the_same_question_gets_other_answers(engine: SimulatedEngine) -> None:
    """The simulation is sensitive enough to catch a plan that does not hold."""
    backend = EmbeddedBackend(config(engine.slots, deterministic=False), load_engine=lambda _: engine)
    await backend.start()
    try:
        seen = await _same_question_many_ways(backend)
    finally:
        await backend.close()
    assert len(set(seen)) > 1


async def test_after_an_aborted_call_the_slot_is_cut_to_nothing_before_the_next() -> None:
    one = SimulatedEngine(slots=1)
    one.batch_noise = True
    backend = EmbeddedBackend(config(1), load_engine=lambda _: one)
    await backend.start()
    try:
        cold = (await backend.score("cold", [5] * 30, [1, 2])).logprobs
        one.release.clear()
        call = asyncio.ensure_future(backend.score("slow", [5] * 40, [1, 2]))
        await asyncio.sleep(0.05)
        await backend.abort(["slow"])
        with pytest.raises(BackendError, match="aborted"):
            await asyncio.wait_for(call, 2)
        one.release.set()
        again = (await backend.score("again", [5] * 30, [1, 2])).logprobs
    finally:
        await backend.close()
    assert again == cold
    assert one.requests[-2]["prompt"] == [6]  # the cut: one token that is not the prompt's first
