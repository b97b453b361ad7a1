"""The embedded backend on the real engine: SmolLM2-135M-Instruct on llama.cpp (xllamacpp), CPU.

Loads the model once for the module (about half a second) and checks what the adapter promises:
exact label probabilities, prefix-cache reuse, equality with a cold evaluation, concurrency, abort.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.build import build_runtime
from openjev.adapters.embedded.cache_plan import warm_prefix
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_protocol import ReplyCollector, label_probabilities, score_request
from openjev.contracts.systemone.parsing import state_of
from openjev.contracts.systemone.wire import ChoiceQuestion, NoulQuestion, Question, TextValue
from openjev.domain.errors import BackendError
from openjev.domain.labels import LabelSet, verify_labels
from openjev.domain.layout import layout
from openjev.domain.ports import ChatMessage, ScoreCall
from openjev.domain.prompt import build_plan
from openjev.settings import load_settings
from tests.backend_conformance.contract import BackendContract, ContractPrompt

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SKY = "The sky this afternoon is perfectly clear and deep blue, without a single cloud."
TICKET = "I was charged twice for my order #4411. Please refund the duplicate payment to my card."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def backend() -> AsyncIterator[EmbeddedBackend]:
    runtime = build_runtime(load_settings({"OPENJEV_MODEL": "smollm2-135m"}, parallel_slots=2, slot_context=2048))
    assert isinstance(runtime.backend, EmbeddedBackend)
    await runtime.backend.start()
    yield runtime.backend
    await runtime.backend.close()


@pytest.fixture(scope="module")
def codec(backend: EmbeddedBackend) -> GGUFCodec:
    codec = GGUFCodec.from_gguf(backend.config.model_path)
    backend.check_codec(codec)
    return codec


@pytest.fixture(scope="module")
def labels(codec: GGUFCodec) -> LabelSet:
    return verify_labels(codec, 64)


@pytest.fixture(scope="module")
def prompt(codec: GGUFCodec, labels: LabelSet) -> ContractPrompt:
    split = layout(codec, [ChatMessage(role="user", content=SKY)])
    return ContractPrompt(
        prefix_ids=tuple(codec.encode_template(split.prefix_text)),
        suffix_ids=tuple(codec.encode_template("Is the sky green? Answer with Yes or No." + split.tail_text)),
        label_ids=labels.token_ids[:4],
        missing_label_id=49152 + 7,
    )


class TestEmbeddedContract(BackendContract):
    """The contract every backend passes, on the real engine."""


def plan_for(codec: GGUFCodec, labels: LabelSet, state: str, questions: dict[str, Question]) -> Any:
    """The plan of System One questions about a System One state (branches in question order)."""
    return build_plan(state_of(state), [q.ask(()) for q in questions.values()], codec, labels)


def full_distribution(backend: EmbeddedBackend, token_ids: list[int]) -> dict[int, float]:
    """Every token's log-probability, from llama.cpp without bias or sampling (a second method)."""
    chunks: list[dict[str, Any]] = []

    def collect(chunk: bytes) -> bool:
        chunks.append(msgspec.json.decode(chunk))
        return False

    request = {"prompt": token_ids, "n_predict": 1, "n_probs": 49152, "cache_prompt": False, "stream": True}
    backend.engine.complete(msgspec.json.encode(request), collect)
    for chunk in chunks:
        for choice in chunk.get("choices") or ():
            content = (choice.get("logprobs") or {}).get("content")
            if content:
                return {e["id"]: e["logprob"] for e in content[0]["top_logprobs"]}
    raise AssertionError("no distribution in the reply")


@pytest.mark.parametrize("count", [2, 64])
async def test_label_probabilities_equal_the_full_distribution_restricted_to_the_labels(
    backend: EmbeddedBackend, codec: GGUFCodec, labels: LabelSet, count: int
) -> None:
    options: dict[str, TextValue | None] = {f"option {i}": f"Description number {i}" for i in range(count)}
    question: Question = (
        NoulQuestion(instructions="Is the sky green?") if count == 2 else ChoiceQuestion(criteria=options)
    )
    plan = plan_for(codec, labels, SKY, {"q": question})
    ids = [*plan.prefix_ids, *plan.branches[0].suffix_ids]
    label_ids = list(plan.branches[0].label_ids)
    scores = await backend.score(f"exact-{count}", ids, label_ids)
    reference = full_distribution(backend, ids)
    restricted = [math.exp(reference[label]) for label in label_ids]
    total = sum(restricted)
    ours = [math.exp(x) for x in scores.logprobs]
    assert sum(ours) == pytest.approx(1.0, abs=1e-6)  # label-normalised
    for got, want in zip(ours, restricted, strict=True):  # measured: at most 4e-7 apart
        assert got == pytest.approx(want / total, abs=1e-6)


@pytest.mark.parametrize("count", [2, 64])
async def test_the_label_mass_is_the_labels_share_of_the_full_distribution(
    backend: EmbeddedBackend, codec: GGUFCodec, labels: LabelSet, count: int
) -> None:
    options: dict[str, TextValue | None] = {f"option {i}": f"Description number {i}" for i in range(count)}
    question: Question = (
        NoulQuestion(instructions="Is the sky green?") if count == 2 else ChoiceQuestion(criteria=options)
    )
    plan = plan_for(codec, labels, SKY, {"q": question})
    ids = [*plan.prefix_ids, *plan.branches[0].suffix_ids]
    label_ids = list(plan.branches[0].label_ids)
    (scores,) = await backend.score_many([ScoreCall(f"mass-{count}", ids, label_ids, label_mass=True)])
    reference = full_distribution(backend, ids)
    expected = math.fsum(math.exp(reference[label]) for label in label_ids)
    assert scores.label_mass == pytest.approx(expected, rel=1e-4)  # float32 probabilities in the engine


async def test_a_branch_after_the_warm_up_equals_a_cold_evaluation(
    backend: EmbeddedBackend, codec: GGUFCodec, labels: LabelSet
) -> None:
    criteria: dict[str, TextValue | None] = {
        "refund": "A refund",
        "technical": "A software bug",
        "sales": "Buying something",
    }
    plan = plan_for(codec, labels, TICKET, {"dept": ChoiceQuestion(criteria=criteria, instructions="Which team?")})
    prefix, branch = list(plan.prefix_ids), plan.branches[0]
    warm = await backend.warm("warm-1", prefix)
    assert warm.prompt_tokens == len(prefix)
    warm_branch = await backend.score("branch-1", [*prefix, *branch.suffix_ids], branch.label_ids)
    assert warm_branch.usage.cached_tokens == len(warm_prefix(prefix))  # deterministic: whole groups of 8

    cold = ReplyCollector()  # same request, prompt cache disabled: everything is recomputed
    request = score_request([*prefix, *branch.suffix_ids], list(branch.label_ids), slot=1, bias=32.0)
    backend.engine.complete(msgspec.json.encode({**request, "cache_prompt": False}), cold)
    assert cold.call_usage().cached_tokens == 0
    cold_probs = label_probabilities(cold, branch.label_ids)
    assert cold_probs is not None
    for label, logprob in zip(branch.label_ids, warm_branch.logprobs, strict=True):
        assert math.exp(logprob) == pytest.approx(cold_probs[label], abs=1e-4)


async def test_concurrent_branches_of_two_requests_match_sequential_ones(
    backend: EmbeddedBackend, codec: GGUFCodec, labels: LabelSet
) -> None:
    questions: dict[str, Question] = {
        f"q{i}": NoulQuestion(instructions=text)
        for i, text in enumerate(["Is it blue?", "Is it raining?", "Is it night?", "Is it cloudy?"])
    }
    plans = [plan_for(codec, labels, state, questions) for state in (SKY, TICKET)]

    async def run(plan: Any, tag: str) -> list[tuple[float, ...]]:
        await backend.warm(f"{tag}-warm", list(plan.prefix_ids))
        scores = await asyncio.gather(
            *(
                backend.score(f"{tag}-{i}", [*plan.prefix_ids, *b.suffix_ids], b.label_ids)
                for i, b in enumerate(plan.branches)
            )
        )
        assert all((s.usage.cached_tokens or 0) >= len(warm_prefix(plan.prefix_ids)) for s in scores)
        return [s.logprobs for s in scores]

    together = await asyncio.gather(run(plans[0], "a"), run(plans[1], "b"))
    alone = [await run(plans[0], "c"), await run(plans[1], "d")]
    for got_plan, want_plan in zip(together, alone, strict=True):
        for got, want in zip(got_plan, want_plan, strict=True):
            assert [math.exp(x) for x in got] == pytest.approx([math.exp(x) for x in want], abs=1e-4)


async def test_abort_stops_a_long_prefill_in_the_engine(backend: EmbeddedBackend, codec: GGUFCodec) -> None:
    long_prompt = codec.encode_template(" ".join(f"item{i}" for i in range(1300)))[:2000]
    assert len(long_prompt) == 2000  # four prompt batches of 512 tokens
    call = asyncio.ensure_future(backend.warm("to-abort", long_prompt))
    await asyncio.sleep(0.1)  # dispatched: the engine is prefilling the first batch
    await backend.abort(["to-abort"])
    with pytest.raises(BackendError, match="aborted"):
        await call
    # llama.cpp stops within a batch of the next progress report, so the slot holds at most the
    # first two batches of the prompt: a prompt that continues further finds no more than that cached.
    again = await backend.warm("after-abort", long_prompt[:1100])
    assert again.prompt_tokens == 1100
    assert again.cached_tokens is not None and again.cached_tokens <= 1024


async def test_health_reports_the_engine(backend: EmbeddedBackend) -> None:
    health = await backend.health()
    assert health.ok and "SmolLM2-135M-Instruct.Q4_1.gguf" in health.detail
    assert backend.context_tokens() == 2048
