"""The SGLang adapter behind SGLang's real router (sglang-router 0.3.2) over two emulated workers.

The router refuses batch `/generate` bodies (422) and has no `/model_info`, `/server_info` or
`/abort_request`: the adapter finds out at start-up, sends one body per call, all of a request's
calls at once, and cache-aware routing keeps them on the worker that holds their prefix. The
context length behind the router is test_router_context.py's.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.sglang.backend import SGLangBackend
from openjev.contracts import systemone
from openjev.domain.errors import BackendError, InvalidRequest, StartupError
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.ports import ScoreCall
from openjev.evaluation import Evaluator
from tests.sglang.router import Router, router_process
from tests.sglang_emulator import EmulatorConfig, EmulatorThread, logprob_of

PREFIX = [151644, 872, 198, *range(1000, 1200), 151645, 198]
LABELS = (32, 33, 34, 35)
CONTEXT = 4096


def new_id() -> str:
    return uuid.uuid4().hex


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[EmulatorThread, EmulatorThread]]:
    with EmulatorThread(EmulatorConfig()) as one, EmulatorThread(EmulatorConfig()) as two:
        yield one, two


@pytest.fixture(scope="module")
def router(
    workers: tuple[EmulatorThread, EmulatorThread], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Router]:
    log = tmp_path_factory.mktemp("router") / "router.log"
    with router_process([w.url for w in workers], log) as running:
        yield running


@pytest.fixture
async def backend(router: Router, workers: tuple[EmulatorThread, EmulatorThread]) -> AsyncIterator[SGLangBackend]:
    client = SGLangBackend(router.url, context_length=CONTEXT, startup_timeout=10)
    await client.start()
    for worker in workers:
        worker.emulator.reset()
        worker.emulator.config = EmulatorConfig()
    yield client
    await client.close()


def generate_bodies(workers: tuple[EmulatorThread, EmulatorThread]) -> list[list[dict[str, Any]]]:
    return [w.emulator.generate_bodies() for w in workers]


async def test_start_up_finds_a_router_and_reads_what_it_has(
    router: Router, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    client = SGLangBackend(router.url, context_length=CONTEXT, startup_timeout=10)
    try:
        with structlog.testing.capture_logs() as logs:
            await client.start()
        assert client.peer == "router"
        [peer] = [e for e in logs if e["event"] == "sglang_peer"]
        assert peer["how"] == "/get_server_info answers the router's worker counts"
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["sglang_abort_unsupported"]
        assert client.context_tokens() == CONTEXT  # the setting, which overrides what the workers say
        assert client.model_info == {"model_path": "emulated/model", "served_model_name": "emulated/model"}
        assert client.vocab_size() is None  # a router does not say (the tokenizer's bounds the ids then)
        assert (await client.health()).ok  # /health_generate: a worker is healthy
    finally:
        await client.close()


async def test_a_requests_calls_go_one_body_each_at_once_to_the_worker_with_the_prefix(
    backend: SGLangBackend, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    for worker in workers:
        worker.emulator.config.slow, worker.emulator.config.slow_scoring_only = 0.3, True
    await backend.warm(new_id(), PREFIX)
    calls = [ScoreCall(new_id(), [*PREFIX, 500 + i, 600 + i], LABELS[: 2 + i % 3]) for i in range(12)]
    began = time.monotonic()
    results = await backend.score_many(calls)
    took = time.monotonic() - began
    assert took < 12 * 0.3 / 2  # together, not one after the other (each takes 0.3 s)
    for call, result in zip(calls, results, strict=True):
        assert result.logprobs == tuple(logprob_of(call.token_ids, label) for label in call.label_ids)
    served = generate_bodies(workers)
    [(holder, bodies)] = [(i, b) for i, b in enumerate(served) if b]  # one worker served every call
    assert len(bodies) == 13
    assert all(not isinstance(body["input_ids"][0], list) for body in bodies)  # plain bodies only
    assert {body["rid"] for body in bodies[1:]} == {call.call_id for call in calls}
    asked = {body["rid"]: body["token_ids_logprob"] for body in bodies[1:]}
    assert all(asked[call.call_id] == list(call.label_ids) for call in calls)
    # The cache did its work: every branch found the prefix the warm-up left on that worker.
    cached = [r.usage.cached_tokens for r in results]
    assert all(c is not None and c >= len(PREFIX) for c in cached), cached
    print(f"\n12 branches behind the router: all on worker {holder + 1}, {took:.2f} s for 12 calls of 0.3 s")


async def test_the_same_state_keeps_landing_on_one_worker(
    backend: SGLangBackend, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    holders = []
    for state in range(3):
        prefix = [*PREFIX[:3], *range(2000 + 300 * state, 2200 + 300 * state)]
        for _ in range(3):
            for worker in workers:
                worker.emulator.reset()
            await backend.warm(new_id(), prefix)
            await backend.score_many([ScoreCall(new_id(), [*prefix, 7, i], LABELS) for i in range(4)])
            served = [len(b) for b in generate_bodies(workers)]
            assert sorted(served) == [0, 5], served
            holders.append((state, served.index(5)))
    by_state = {state: {worker for s, worker in holders if s == state} for state, _ in holders}
    assert all(len(w) == 1 for w in by_state.values()), holders
    print(f"\nstates -> worker: { {s: next(iter(w)) + 1 for s, w in by_state.items()} }")


async def test_nothing_is_aborted_through_a_router(
    backend: SGLangBackend, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    await backend.abort([new_id(), new_id()])
    assert all(not w.emulator.aborted and not w.emulator.requests for w in workers)


async def test_a_label_out_of_the_vocabulary_gets_the_workers_refusal_through_the_router(
    backend: SGLangBackend, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    with pytest.raises(BackendError, match=r"out-of-vocabulary token id 151940; valid range is \[0, 151936\)"):
        await backend.score(new_id(), PREFIX, (*LABELS, 151_940))


async def test_a_prompt_id_out_of_the_vocabulary_is_refused_before_any_call(
    backend: SGLangBackend, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    """Behind a router the tokenizer's size is the bound; a tokenizer larger than the model is the danger."""
    codec = ChatMLByteCodec()
    labels = verify_labels(codec, 8)
    evaluator = Evaluator(backend=backend, codec=codec, labels=labels, limits=Limits())
    raw = json.dumps({"model": "jev-latest", "state": "Hi", "questions": {"q": {"type": "noul"}}}).encode()
    decision = systemone.parse(raw, Limits(), frozenset()).decision
    plan = evaluator.prepare(decision).plan
    backend.use_tokenizer_vocab(max(plan.prefix_ids))  # as if the model had one id fewer than this prompt uses
    with pytest.raises(InvalidRequest, match="is outside the model's vocabulary") as refused:
        evaluator.prepare(decision)
    assert refused.value.issues[0].type == "token_out_of_vocabulary"
    assert generate_bodies(workers) == [[], []]  # nothing was sent
    assert all(w.emulator.crashed is None for w in workers)


async def test_an_adapter_is_looked_for_on_every_worker_and_named_through_the_router(
    router: Router, workers: tuple[EmulatorThread, EmulatorThread]
) -> None:
    """The router's own /v1/models lists no adapter: start-up asks each worker the router lists for its
    list, and stops naming the one without it; the router passes `lora_path` on to the workers."""
    one, two = workers
    one.emulator.config = EmulatorConfig(lora_paths={"ticket": "/adapters/ticket"})
    try:
        refused = SGLangBackend(router.url, context_length=CONTEXT, startup_timeout=10, adapter="ticket")
        try:
            with pytest.raises(StartupError, match=f"SGLang at {two.url} serves no LoRA adapter of that name"):
                await refused.start()
        finally:
            await refused.close()
        two.emulator.config = EmulatorConfig(lora_paths={"ticket": "/adapters/ticket"})
        client = SGLangBackend(router.url, context_length=CONTEXT, startup_timeout=10, adapter="ticket")
        try:
            await client.start()
            calls = [ScoreCall(new_id(), [*PREFIX, 700 + i], LABELS) for i in range(3)]
            results = await client.score_many(calls)
        finally:
            await client.close()
        for call, result in zip(calls, results, strict=True):
            assert result.logprobs == tuple(logprob_of(call.token_ids, label, adapter="ticket") for label in LABELS)
        bodies = [body for served in generate_bodies(workers) for body in served]
        assert bodies and all(body["lora_path"] == "ticket" for body in bodies)
    finally:
        for worker in workers:
            worker.emulator.reset()
            worker.emulator.config = EmulatorConfig()


async def test_batch_bodies_are_what_the_router_refuses(router: Router) -> None:
    """Why the adapter must know: forced to drive the router like a worker, every batch fails."""
    client = SGLangBackend(router.url, context_length=CONTEXT, startup_timeout=10, peer="worker")
    try:
        await client.start()
        with pytest.raises(BackendError, match=r"422.*invalid type: sequence, expected u32"):
            await client.score_many([ScoreCall(new_id(), PREFIX, LABELS), ScoreCall(new_id(), PREFIX, LABELS)])
        assert len((await client.score_many([ScoreCall(new_id(), PREFIX, LABELS)]))[0].logprobs) == 4
    finally:
        await client.close()


async def test_a_worker_is_driven_with_batches_as_before(workers: tuple[EmulatorThread, EmulatorThread]) -> None:
    client = SGLangBackend(workers[0].url, startup_timeout=10)
    try:
        await client.start()
        assert client.peer == "worker"
        assert client.vocab_size() == 151_936  # from SGLang's own refusal of an id no vocabulary has
        workers[0].emulator.reset()
        await client.score_many([ScoreCall(new_id(), PREFIX, LABELS), ScoreCall(new_id(), PREFIX, LABELS)])
        [batch] = workers[0].emulator.generate_bodies()
        assert isinstance(batch["input_ids"], list) and isinstance(batch["input_ids"][0], list)
    finally:
        await client.close()


def test_the_router_log_is_readable(router: Router) -> None:
    assert router.process.poll() is None, router.output()
    assert Path(router.log).is_file()


def test_the_setting_forces_the_peer() -> None:
    from openjev.adapters.sglang.build import build_runtime
    from openjev.domain.errors import SettingsError
    from openjev.settings import load_settings

    for peer in ("worker", "router"):
        runtime = build_runtime(
            load_settings({"OPENJEV_SGLANG_URL": "http://127.0.0.1:1", "OPENJEV_SGLANG_PEER": peer})
        )
        assert isinstance(runtime.backend, SGLangBackend) and runtime.backend.peer == peer
    with pytest.raises(SettingsError, match="OPENJEV_SGLANG_PEER"):
        load_settings({"OPENJEV_SGLANG_PEER": "gateway"})
