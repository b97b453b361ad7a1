"""The OpenVINO backend's scheduling and caching, on a stand-in engine (no model)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from openjev.adapters.openvino.backend import OpenVINOBackend
from openjev.adapters.openvino.engine import PIECE
from openjev.domain.errors import BackendError
from openjev.domain.ports import ScoreCall
from tests.openvino.fake_engine import FakeEngine

PREFIX = list(range(1, 41))
LABELS = [7, 9, 11]


async def first_step(engine: FakeEngine, after: int = 0) -> None:
    """Until the engine has run one more step than `after` (the steps run in a worker thread)."""
    async with asyncio.timeout(10):
        while len(engine.evaluated) <= after:  # noqa: ASYNC110 - the engine's thread has no event to wait on
            await asyncio.sleep(0.001)


def backend_with(engine: FakeEngine, snapshot_bytes: int = 1 << 30) -> OpenVINOBackend:
    return OpenVINOBackend(lambda: engine, model="model.gguf", threads=1, context=4096, snapshot_bytes=snapshot_bytes)


@pytest.fixture
async def engine_and_backend() -> AsyncIterator[tuple[FakeEngine, OpenVINOBackend]]:
    engine = FakeEngine()
    backend = backend_with(engine)
    await backend.start()
    yield engine, backend
    await backend.close()


async def test_an_answer_does_not_depend_on_the_cache_or_on_other_calls(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    _, backend = engine_and_backend
    prompt = [*PREFIX, 50, 51, 52]
    await backend.warm("w1", PREFIX)
    first = await backend.score("a", prompt, LABELS)  # the prefix restored from its snapshot
    others = [ScoreCall(f"o{i}", [*PREFIX, 60 + i, 61], LABELS) for i in range(5)]
    await backend.score_many(others)
    assert (await backend.score("b", prompt, LABELS)).logprobs == first.logprobs
    evicting = backend_with(FakeEngine(), snapshot_bytes=1)  # keeps no snapshot: recomputes the prefix
    await evicting.start()
    await evicting.warm("w2", PREFIX)
    assert (await evicting.score("c", prompt, LABELS)).logprobs == first.logprobs
    await evicting.close()
    assert first.usage.cached_tokens == len(PREFIX)


async def test_a_prefix_extending_a_warmed_one_continues_from_it_and_gets_the_same_bits_when_evicted(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    engine, backend = engine_and_backend
    head, other = PREFIX[:25], [*PREFIX[:25], 90, 91, 92]  # two requests sharing worked examples
    await backend.warm("h", head)
    await backend.warm("p", PREFIX)
    assert engine.evaluated == [(0, 25), (25, 15)]  # the examples once, then only the rest
    engine.evaluated.clear()
    await backend.warm("h2", head)
    await backend.warm("q", other)
    assert engine.evaluated == [(25, 3)]  # the second request pays for its own part only
    first = await backend.score("a", [*PREFIX, 50, 51], LABELS)
    assert engine.read == [(40, 2)]  # warming computes no logits: only the scored step reads them
    evicting = backend_with(FakeEngine(), snapshot_bytes=1)  # keeps no snapshot: recomputes both
    await evicting.start()
    await evicting.warm("w1", head)
    await evicting.warm("w2", PREFIX)
    assert (await evicting.score("c", [*PREFIX, 50, 51], LABELS)).logprobs == first.logprobs
    await evicting.close()


async def test_a_prompt_never_warmed_is_evaluated_from_position_zero(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    engine, backend = engine_and_backend
    prompt = list(range(3, 3 + PIECE + 20))
    scores = await backend.score("a", prompt, LABELS)
    assert engine.evaluated == [(0, PIECE), (PIECE, 20)]  # canonical pieces
    assert engine.read == [(PIECE, 20)]  # the logits of the last piece only
    assert scores.usage.cached_tokens == 0
    assert (await backend.score("b", prompt, LABELS)).logprobs == scores.logprobs


async def test_label_mass_is_the_labels_share_of_the_same_distribution(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    _, backend = engine_and_backend
    [measured, plain] = await backend.score_many(
        [ScoreCall("a", [*PREFIX, 1], LABELS, label_mass=True), ScoreCall("b", [*PREFIX, 1], LABELS)]
    )
    assert plain.label_mass is None and measured.logprobs == plain.logprobs
    assert measured.label_mass == pytest.approx(sum(2.718281828459045**x for x in measured.logprobs))


async def test_an_aborted_call_stops_before_its_next_step(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    engine, backend = engine_and_backend
    long_prompt = list(range(1, 1 + PIECE * 6))
    task = asyncio.create_task(backend.score("long", long_prompt, LABELS))
    await first_step(engine)
    await backend.abort(["long"])
    with pytest.raises(BackendError, match="aborted"):
        await task
    assert len(engine.evaluated) < 6


async def test_a_small_request_is_not_queued_behind_every_step_of_a_large_one(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    engine, backend = engine_and_backend
    prefix = list(range(1000, 1000 + 2 * PIECE))
    await backend.warm("w", prefix)
    large = [ScoreCall(f"l{i}", [*prefix, *range(i, i + PIECE + 5)], LABELS) for i in range(8)]  # 2 steps each
    large_task = asyncio.create_task(backend.score_many(large))
    await first_step(engine, after=len(engine.evaluated))
    submitted_at = len(engine.evaluated)
    small = await backend.score("small", [5, 6, 7], LABELS)
    await large_task
    ran_at = engine.evaluated.index((0, 3))
    assert small.logprobs and len(engine.evaluated) == 2 + 8 * 2 + 1
    # The step running when it came, then at most one step of the large request's turn.
    assert ran_at - submitted_at <= 2, f"the small call waited behind {ran_at - submitted_at} steps"


async def test_labels_outside_the_vocabulary_are_refused(
    engine_and_backend: tuple[FakeEngine, OpenVINOBackend],
) -> None:
    _, backend = engine_and_backend
    with pytest.raises(BackendError, match="vocabulary"):
        await backend.score("a", PREFIX, [1, 10_000])
