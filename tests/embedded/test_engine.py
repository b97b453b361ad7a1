"""The embedded backend's own logic, against a simulated llama.cpp engine (no model).

Against `SimulatedEngine` (simulated_engine.py), these tests check the request the adapter builds,
how it reads replies, slot routing, abort and shutdown.
The real engine is exercised in tests/integration/test_embedded_*.py.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.adapters.common_prefix import common_prefix_length
from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.llama_engine import EngineConfig
from openjev.adapters.embedded.llama_protocol import (
    FALLBACK_LABEL_BIAS,
    LABEL_BIAS,
    LOG_PROB_FLOOR,
    ReplyCollector,
    label_probabilities,
    score_request,
    to_logprobs,
    warm_request,
)
from openjev.adapters.embedded.slot_router import SlotRouter
from openjev.domain.errors import BackendError, BackendUnavailable, StartupError
from openjev.domain.ports import CallUsage, ScoringBackend
from tests.embedded.simulated_engine import VOCAB, SimulatedEngine, base_logits, config


@pytest.fixture
def engine() -> SimulatedEngine:
    return SimulatedEngine()


@pytest.fixture
async def backend(engine: SimulatedEngine) -> AsyncIterator[EmbeddedBackend]:
    backend = EmbeddedBackend(config(engine.slots), load_engine=lambda _: engine)
    await backend.start()
    yield backend
    await backend.close()


@pytest.fixture
async def parallel_backend(engine: SimulatedEngine) -> AsyncIterator[EmbeddedBackend]:
    """OPENJEV_DETERMINISTIC=false: calls in different slots run side by side, reusing whole prefixes."""
    backend = EmbeddedBackend(config(engine.slots, deterministic=False), load_engine=lambda _: engine)
    await backend.start()
    yield backend
    await backend.close()


def log_softmax(values: list[float]) -> list[float]:
    top = max(values)
    total = math.log(sum(math.exp(v - top) for v in values))
    return [v - top - total for v in values]


# --- requests and replies ----------------------------------------------------------------------------


def test_score_request_biases_exactly_the_labels_and_keeps_only_them() -> None:
    request = score_request([5, 6, 7], [11, 3, 9], slot=1, bias=LABEL_BIAS)
    assert request["logit_bias"] == [[11, LABEL_BIAS], [3, LABEL_BIAS], [9, LABEL_BIAS]]
    assert request["top_k"] == request["n_probs"] == 3
    assert request["samplers"] == ["top_k", "temperature"] and request["temperature"] == 1.0
    assert request["post_sampling_probs"] is True
    assert request["n_predict"] == 1 and request["cache_prompt"] is True and request["id_slot"] == 1
    assert request["prompt"] == [5, 6, 7]
    assert request["stream"] is True and request["return_progress"] is True


def test_warm_request_asks_for_one_token_and_no_probabilities() -> None:
    request = warm_request([1, 2], slot=0)
    assert request["n_predict"] == 1 and request["cache_prompt"] is True and request["id_slot"] == 0
    assert "n_probs" not in request and "logit_bias" not in request


def test_reply_collector_merges_the_stream_chunks() -> None:
    reply = ReplyCollector()
    assert reply(b'{"choices":[{"text":"","logprobs":null}],"prompt_progress":{"processed":0}}') is False
    probs = b'[{"id":3,"prob":0.75},{"id":4,"prob":0.25}]'
    assert reply(b'{"choices":[{"logprobs":{"content":[{"id":3,"top_probs":' + probs + b"}]}}]}") is False
    usage = {"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 7}}
    assert reply({"choices": [{"finish_reason": "length"}], "usage": usage}) is False
    assert reply.call_usage() == CallUsage(prompt_tokens=9, cached_tokens=7)
    assert label_probabilities(reply, [4, 3]) == {4: 0.25, 3: 0.75}
    assert label_probabilities(reply, [4, 5]) is None


def test_reply_collector_falls_back_to_timings_for_cached_tokens() -> None:
    reply = ReplyCollector()
    reply({"usage": {"prompt_tokens": 9}, "timings": {"cache_n": 4, "prompt_n": 5}})
    assert reply.call_usage() == CallUsage(prompt_tokens=9, cached_tokens=4)


def test_reply_collector_stops_on_errors_garbage_and_requests() -> None:
    error = ReplyCollector()
    assert error(b'{"error":{"code":400,"message":"too long"}}') is True
    assert error.error == "too long"
    garbage = ReplyCollector()
    assert garbage(b"not json") is True and garbage.error is not None
    stop = ReplyCollector(lambda: True)
    assert stop({"choices": []}) is True and stop.stopped
    with pytest.raises(BackendError, match="without reporting usage"):
        ReplyCollector().call_usage()
    with pytest.raises(BackendError, match="no token probabilities"):
        label_probabilities(ReplyCollector(), [1])


def test_an_underflowed_probability_reads_as_the_floor_never_minus_infinity() -> None:
    assert to_logprobs({1: 0.0, 2: 1.0}, [1, 2]) == (LOG_PROB_FLOOR, 0.0)
    with pytest.raises(BackendError):
        to_logprobs({1: float("nan")}, [1])


@given(st.lists(st.integers(0, 3), max_size=600), st.lists(st.integers(0, 3), max_size=600))
def test_common_prefix_length_matches_the_obvious_definition(a: list[int], b: list[int]) -> None:
    expected = 0
    while expected < min(len(a), len(b)) and a[expected] == b[expected]:
        expected += 1
    assert common_prefix_length(a, b) == expected
    assert common_prefix_length(tuple(a), b) == expected  # mixed sequence types compare by element


# --- slot routing ------------------------------------------------------------------------------------


def test_branches_follow_their_warm_up_and_unrelated_requests_take_an_idle_slot() -> None:
    router = SlotRouter(3)
    prefix = list(range(100, 400))
    warm = router.route(prefix, warm_up=True)
    router.done(warm)
    branches = [router.route([*prefix, 1000 + i, *range(40)]) for i in range(8)]
    assert {b.slot for b in branches} == {warm.slot}
    assert all(b.new_tokens == 41 for b in branches)
    other = router.route([*prefix[:20], *range(5000, 5300)])  # shares only a short header with the busy slot
    assert other.slot != warm.slot and other.new_tokens == 320


def test_a_long_queue_spills_when_the_prefix_is_cheap_to_recompute() -> None:
    router = SlotRouter(2)
    router.done(router.route([1, 2, 3, 4]))
    slots = [router.route([1, 2, 3, 4, *range(10 + 100 * i, 110 + 100 * i)]).slot for i in range(12)]
    assert len(set(slots)) == 2


def test_ties_go_to_the_least_recently_used_slot() -> None:
    router = SlotRouter(3)
    first = router.route([1, 2, 3])
    router.done(first)
    second = router.route([7, 8, 9])
    router.done(second)
    third = router.route([20, 21])
    assert len({first.slot, second.slot, third.slot}) == 3


# --- the backend ---------------------------------------------------------------------------------------


async def test_it_satisfies_the_port_and_reports_the_engine_context(backend: EmbeddedBackend) -> None:
    assert isinstance(backend, ScoringBackend)
    assert backend.context_tokens() == 256
    health = await backend.health()
    assert health.ok and "2 slots x 256 tokens" in health.detail


async def test_scores_are_the_label_normalised_log_softmax_in_the_order_asked(backend: EmbeddedBackend) -> None:
    prompt = [3, 1, 4, 1, 5]
    labels = [9, 2, 30, 17]
    scores = await backend.score("c1", prompt, labels)
    expected = log_softmax([base_logits(prompt)[t] for t in labels])
    assert scores.logprobs == pytest.approx(expected, abs=1e-9)
    assert scores.usage == CallUsage(prompt_tokens=5, cached_tokens=0)


async def test_an_evicted_label_is_retried_with_a_large_bias(backend: EmbeddedBackend, engine: SimulatedEngine) -> None:
    def logits(prompt: list[int]) -> list[float]:
        values = [0.0] * VOCAB
        values[40] = 60.0  # a non-label token far above the labels
        values[2], values[3] = -1.0, -45.0
        return values

    engine.logits = logits
    scores = await backend.score("c1", [1, 2, 3], [2, 3])
    scored = [r for r in engine.requests if "logit_bias" in r]  # (deterministic: a cut before the retry)
    assert [r["logit_bias"][0][1] for r in scored] == [LABEL_BIAS, FALLBACK_LABEL_BIAS]
    assert scores.logprobs == pytest.approx(log_softmax([-1.0, -45.0]), abs=1e-9)


async def test_a_label_the_engine_never_returns_is_an_error_not_a_zero(
    backend: EmbeddedBackend, engine: SimulatedEngine
) -> None:
    engine.never_returned = {5}
    with pytest.raises(BackendError, match="did not return every label"):
        await backend.score("c1", [1, 2, 3], [4, 5])


async def test_a_label_outside_the_vocabulary_is_refused_before_any_engine_call(
    backend: EmbeddedBackend, engine: SimulatedEngine
) -> None:
    with pytest.raises(BackendError, match="vocabulary"):
        await backend.score("c1", [1, 2, 3], [4, VOCAB + 1])
    assert engine.requests == []


async def test_an_engine_error_is_a_backend_error_with_its_message(backend: EmbeddedBackend) -> None:
    with pytest.raises(BackendError, match="exceeds the available context"):
        await backend.warm("c1", list(range(300)))


async def test_branches_after_the_warm_up_reuse_the_prefix(
    parallel_backend: EmbeddedBackend, engine: SimulatedEngine
) -> None:
    prefix = [7] * 50
    assert (await parallel_backend.warm("w", prefix)).cached_tokens == 0
    results = await asyncio.gather(*(parallel_backend.score(f"b{i}", [*prefix, i, i], [1, 2]) for i in range(5)))
    assert [r.usage.cached_tokens for r in results] == [50] * 5
    assert {r["id_slot"] for r in engine.requests} == {engine.requests[0]["id_slot"]}
    assert not engine.overlap


async def test_concurrent_requests_use_several_slots(
    parallel_backend: EmbeddedBackend, engine: SimulatedEngine
) -> None:
    engine.release.clear()
    calls = [asyncio.ensure_future(parallel_backend.warm(f"w{i}", [i + 1] * 40)) for i in range(2)]
    await asyncio.sleep(0.05)
    assert sorted(engine.busy_slots) == [0, 1]
    engine.release.set()
    await asyncio.gather(*calls)


async def test_abort_stops_a_running_call_in_the_engine(backend: EmbeddedBackend, engine: SimulatedEngine) -> None:
    engine.release.clear()
    call = asyncio.ensure_future(backend.score("slow", [1] * 40, [1, 2]))
    await asyncio.sleep(0.05)
    await backend.abort(["slow", "unknown"])
    with pytest.raises(BackendError, match="aborted"):
        await asyncio.wait_for(call, 2)
    assert engine.stopped_calls == 1
    engine.release.set()
    assert len((await backend.score("next", [1] * 40, [1, 2])).logprobs) == 2


async def test_a_queued_call_that_is_aborted_never_reaches_the_engine() -> None:
    engine = SimulatedEngine(slots=1)
    backend = EmbeddedBackend(config(1), load_engine=lambda _: engine)
    await backend.start()
    engine.release.clear()
    running = asyncio.ensure_future(backend.warm("first", [1] * 10))
    queued = asyncio.ensure_future(backend.score("second", [1] * 12, [1, 2]))
    await asyncio.sleep(0.05)
    await backend.abort(["second"])
    engine.release.set()
    await running
    with pytest.raises(BackendError, match="before it reached the engine"):
        await queued
    assert engine.started_calls == 1
    await backend.close()


async def test_a_cancelled_call_keeps_its_slot_until_the_engine_lets_go() -> None:
    engine = SimulatedEngine(slots=1)
    backend = EmbeddedBackend(config(1), load_engine=lambda _: engine)
    await backend.start()
    engine.release.clear()
    call = asyncio.ensure_future(backend.score("c", [2] * 30, [1, 2]))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    engine.release.set()
    after = await backend.score("d", [2] * 30, [1, 2])  # waits for the slot, never overlaps the old call
    assert len(after.logprobs) == 2 and not engine.overlap
    assert engine.stopped_calls == 1  # the cancelled call was stopped at a progress report
    await backend.close()


async def test_close_stops_running_calls_and_frees_the_engine(
    backend: EmbeddedBackend, engine: SimulatedEngine
) -> None:
    engine.release.clear()
    call = asyncio.ensure_future(backend.warm("long", [5] * 20))
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    await backend.close()
    assert time.perf_counter() - started < 2
    with pytest.raises(BackendUnavailable):
        await call
    assert engine.shut_down
    assert not (await backend.health()).ok
    with pytest.raises(BackendUnavailable):
        await backend.warm("after", [1, 2])


async def test_calls_before_start_are_unavailable() -> None:
    backend = EmbeddedBackend(config(), load_engine=lambda _: SimulatedEngine())
    assert backend.context_tokens() is None
    with pytest.raises(BackendUnavailable):
        await backend.score("c", [1, 2], [1])


async def test_a_failed_start_raises_and_health_says_why() -> None:
    def refuse(_: EngineConfig) -> SimulatedEngine:
        raise StartupError("llama.cpp could not load x.gguf")

    backend = EmbeddedBackend(config(), load_engine=refuse)
    with pytest.raises(StartupError, match="could not load"):
        await backend.start()
    health = await backend.health()
    assert not health.ok and "could not load" in health.detail


async def test_check_codec_refuses_a_codec_that_disagrees_with_the_engine(backend: EmbeddedBackend) -> None:
    class Codec:
        def render(self, messages: Any) -> str:
            return "".join(m.content for m in messages)

        def encode_template(self, text: str) -> list[int]:
            return [ord(c) % VOCAB for c in text.replace("é", "e")]

        def encode_caller_text(self, text: str) -> list[int]:
            return self.encode_template(text)

        def min_tokens(self, text: str) -> int:
            return 0

        def decode(self, token_ids: Any) -> str:
            return ""

    with pytest.raises(StartupError, match=r"disagrees with llama\.cpp"):
        backend.check_codec(Codec())


def test_a_request_sharing_only_a_header_never_evicts_a_busy_prefix() -> None:
    router = SlotRouter(2)
    header = list(range(30))
    warm_a = router.route([*header, *range(100, 110)], warm_up=True)  # still running
    warm_b = router.route([*header, *range(200, 210)], warm_up=True)  # shares 30 of its 40 tokens with it
    assert warm_b.slot != warm_a.slot
    router.done(warm_a)
    router.done(warm_b)
    branch_a = router.route([*header, *range(100, 110), 7, 7])
    branch_b = router.route([*header, *range(200, 210), 8, 8])
    assert (branch_a.slot, branch_b.slot) == (warm_a.slot, warm_b.slot)
    assert branch_a.new_tokens == branch_b.new_tokens == 2


def test_a_warm_up_of_the_same_prefix_joins_the_busy_slot_that_holds_it() -> None:
    router = SlotRouter(2)
    first = router.route(list(range(50)), warm_up=True)
    second = router.route(list(range(50)), warm_up=True)
    assert second.slot == first.slot and second.new_tokens == 1


async def test_an_unexpected_start_failure_becomes_a_startup_error() -> None:
    def crash(_: EngineConfig) -> SimulatedEngine:
        raise MemoryError("cannot allocate the KV cache")

    backend = EmbeddedBackend(config(), load_engine=crash)
    with pytest.raises(StartupError, match="KV cache"):
        await backend.start()
    assert "KV cache" in (await backend.health()).detail
