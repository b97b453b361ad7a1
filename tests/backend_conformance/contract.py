"""The contract every ScoringBackend adapter passes (ports and adapters: every adapter proves itself here).

Subclass `BackendContract` in a `test_*.py` module and provide two fixtures:
- `backend`: an async fixture yielding a started ScoringBackend;
- `prompt`: a `ContractPrompt` with token ids the backend accepts (a real prompt for real models)
  and at least three distinct valid label token ids.
"""

from __future__ import annotations

import asyncio
import math
import uuid

import msgspec
import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.domain.errors import BackendError
from openjev.domain.labels import verify_labels
from openjev.domain.layout import layout
from openjev.domain.ports import CallUsage, ChatMessage, LabelScores, ScoreCall, ScoringBackend


class ContractPrompt(msgspec.Struct, frozen=True, kw_only=True):
    prefix_ids: tuple[int, ...]  # a shared prefix
    suffix_ids: tuple[int, ...]  # a question suffix; prefix + suffix is a full branch prompt
    label_ids: tuple[int, ...]  # >= 3 distinct label ids
    missing_label_id: int  # an id the backend cannot return (e.g. out of vocabulary)


def chatml_prompt(missing_label_id: int) -> ContractPrompt:
    """A sky question rendered with the built-in ChatML codec, for backends that take any token ids."""
    codec = ChatMLByteCodec()
    split = layout(codec, [ChatMessage(role="user", content="The sky is blue today.")])
    labels = verify_labels(codec, 4)
    return ContractPrompt(
        prefix_ids=tuple(codec.encode_template(split.prefix_text)),
        suffix_ids=tuple(codec.encode_template("Is the sky green?" + split.tail_text)),
        label_ids=labels.token_ids[:4],
        missing_label_id=missing_label_id,
    )


def new_id() -> str:
    return uuid.uuid4().hex


class BackendContract:
    async def test_satisfies_the_port(self, backend: ScoringBackend) -> None:
        assert isinstance(backend, ScoringBackend)
        assert (await backend.health()).ok

    async def test_warm_reports_prompt_tokens(self, backend: ScoringBackend, prompt: ContractPrompt) -> None:
        usage = await backend.warm(new_id(), list(prompt.prefix_ids))
        assert isinstance(usage, CallUsage)
        assert usage.prompt_tokens == len(prompt.prefix_ids)
        assert usage.cached_tokens is None or 0 <= usage.cached_tokens < usage.prompt_tokens

    async def test_score_returns_exactly_the_labels_in_order(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        scores = await backend.score(new_id(), ids, prompt.label_ids)
        assert isinstance(scores, LabelScores)
        assert len(scores.logprobs) == len(prompt.label_ids)
        assert all(x <= 1e-9 and not math.isnan(x) for x in scores.logprobs)
        assert any(math.isfinite(x) for x in scores.logprobs)
        assert scores.usage.prompt_tokens == len(ids)
        reversed_scores = await backend.score(new_id(), ids, tuple(reversed(prompt.label_ids)))
        # Same distribution up to a common shift (some backends return label-normalised values).
        shift = scores.logprobs[0] - reversed_scores.logprobs[-1]
        for a, b in zip(scores.logprobs, reversed(reversed_scores.logprobs), strict=True):
            assert a - b == pytest.approx(shift, abs=1e-4)

    async def test_scores_are_deterministic(self, backend: ScoringBackend, prompt: ContractPrompt) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        first = await backend.score(new_id(), ids, prompt.label_ids)
        second = await backend.score(new_id(), ids, prompt.label_ids)
        for a, b in zip(first.logprobs, second.logprobs, strict=True):
            assert a == pytest.approx(b, abs=1e-4)

    async def test_branch_after_warm_up_reuses_the_prefix(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        await backend.warm(new_id(), list(prompt.prefix_ids))
        scores = await backend.score(new_id(), [*prompt.prefix_ids, *prompt.suffix_ids], prompt.label_ids)
        cached = scores.usage.cached_tokens
        assert cached is None or cached >= len(prompt.prefix_ids) // 2

    async def test_concurrent_calls(self, backend: ScoringBackend, prompt: ContractPrompt) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        results = await asyncio.gather(*(backend.score(new_id(), ids, prompt.label_ids) for _ in range(6)))
        assert len({tuple(round(x, 3) for x in r.logprobs) for r in results}) == 1

    async def test_abort_of_unknown_or_finished_calls_never_raises(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        call_id = new_id()
        await backend.warm(call_id, list(prompt.prefix_ids))
        await backend.abort([call_id, new_id()])
        assert (await backend.health()).ok

    async def test_cancelled_call_leaves_the_backend_usable(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        call_id = new_id()
        task = asyncio.ensure_future(backend.score(call_id, ids, prompt.label_ids))
        await asyncio.sleep(0)
        task.cancel()
        await backend.abort([call_id])
        with pytest.raises(asyncio.CancelledError):
            await task
        again = await backend.score(new_id(), ids, prompt.label_ids)
        assert len(again.logprobs) == len(prompt.label_ids)

    async def test_a_label_the_backend_cannot_return_is_an_error(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        with pytest.raises(BackendError):
            await backend.score(new_id(), list(prompt.prefix_ids), (*prompt.label_ids, prompt.missing_label_id))

    async def test_score_many_equals_the_calls_scored_one_by_one_in_order(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        prefix = list(prompt.prefix_ids)
        await backend.warm(new_id(), prefix)
        full = [*prefix, *prompt.suffix_ids]
        labels = prompt.label_ids
        # Different prompts and label sets (sizes, orders), so a result out of place shows.
        calls = [
            ScoreCall(new_id(), full, labels),
            ScoreCall(new_id(), full[:-1], tuple(reversed(labels[:3]))),
            ScoreCall(new_id(), prefix, labels[1:]),
            ScoreCall(new_id(), full, labels[:2]),
        ]
        batch = await backend.score_many(calls)
        assert isinstance(batch, list)
        assert [len(r.logprobs) for r in batch] == [len(c.label_ids) for c in calls]
        for call, result in zip(calls, batch, strict=True):
            alone = await backend.score(new_id(), call.token_ids, call.label_ids)
            assert result.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
            assert result.usage.prompt_tokens == len(call.token_ids)
            cached = result.usage.cached_tokens
            assert cached is None or 0 <= cached < result.usage.prompt_tokens

    async def test_the_label_mass_is_measured_only_when_asked_and_grows_with_the_labels(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        full = [*prompt.prefix_ids, *prompt.suffix_ids]
        labels = prompt.label_ids
        plain, few, all_of_them = await backend.score_many(
            [
                ScoreCall(new_id(), full, labels),
                ScoreCall(new_id(), full, labels[:2], label_mass=True),
                ScoreCall(new_id(), full, labels, label_mass=True),
            ]
        )
        assert plain.label_mass is None
        for measured in (few, all_of_them):
            assert measured.label_mass is not None and 0.0 < measured.label_mass <= 1.0
        assert few.label_mass is not None and all_of_them.label_mass is not None
        if self.exact_label_mass:  # a share of one distribution: more labels never get less of it
            assert few.label_mass <= all_of_them.label_mass * (1 + 1e-6)
        assert all_of_them.logprobs == pytest.approx(plain.logprobs, abs=1e-4)  # measuring changes no answer

    exact_label_mass = True  # False for a backend whose label mass is made up (the fake)

    async def test_score_many_of_one_call_and_of_none(self, backend: ScoringBackend, prompt: ContractPrompt) -> None:
        assert await backend.score_many([]) == []
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        [one] = await backend.score_many([ScoreCall(new_id(), ids, prompt.label_ids)])
        alone = await backend.score(new_id(), ids, prompt.label_ids)
        assert one.logprobs == pytest.approx(alone.logprobs, abs=1e-4)

    async def test_a_batch_with_a_label_the_backend_cannot_return_fails_with_a_backend_error(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        calls = [
            ScoreCall(new_id(), ids, prompt.label_ids),
            ScoreCall(new_id(), ids, (*prompt.label_ids, prompt.missing_label_id)),
        ]
        with pytest.raises(BackendError):
            await backend.score_many(calls)
        [again] = await backend.score_many([ScoreCall(new_id(), ids, prompt.label_ids)])  # ids are never reused
        assert len(again.logprobs) == len(prompt.label_ids)

    async def test_a_cancelled_batch_leaves_the_backend_usable(
        self, backend: ScoringBackend, prompt: ContractPrompt
    ) -> None:
        ids = [*prompt.prefix_ids, *prompt.suffix_ids]
        calls = [ScoreCall(new_id(), ids, prompt.label_ids) for _ in range(3)]
        task = asyncio.ensure_future(backend.score_many(calls))
        await asyncio.sleep(0)
        task.cancel()
        await backend.abort([c.call_id for c in calls])
        with pytest.raises(asyncio.CancelledError):
            await task
        again = await backend.score_many([ScoreCall(new_id(), ids, prompt.label_ids) for _ in range(2)])
        assert [len(r.logprobs) for r in again] == [len(prompt.label_ids)] * 2
