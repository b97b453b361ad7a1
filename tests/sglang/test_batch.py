"""A request's branches in ONE batched /generate: the body, the per-item checks, aborts and usage."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.score_each import score_each
from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.wire import rid_for
from openjev.contracts import systemone
from openjev.domain.errors import BackendError, BackendUnavailable
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.ports import CallUsage, LabelScores, ScoreCall
from openjev.evaluation import Evaluator
from tests.sglang_emulator import SGLangEmulator, logprob_of, split_generate_body
from tests.use_case.systemone_use_case import OverSystemOne

PROMPT = [151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198]
LABELS = [32, 33, 34, 35]
GREEDY = {"max_new_tokens": 1, "temperature": 0}
CODEC = ChatMLByteCodec()
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Refund?"},
    "dept": {"type": "choice", "criteria": {"billing": "Payments", "technical": "Bugs"}},
    "urgency": {"type": "score", "criteria": ["Routine", "Urgent", "Emergency"]},
}


def new_id() -> str:
    return uuid.uuid4().hex


def three_calls() -> list[ScoreCall]:
    return [
        ScoreCall(new_id(), PROMPT, LABELS),
        ScoreCall(new_id(), [*PROMPT, 40, 41], LABELS[:2]),
        ScoreCall("not-hex", PROMPT[:6], tuple(reversed(LABELS))),
    ]


def evaluator(backend: SGLangBackend, **limits: Any) -> OverSystemOne:
    return OverSystemOne(
        Evaluator(backend=backend, codec=CODEC, labels=verify_labels(CODEC, 64), limits=Limits(**limits))
    )


def request(questions: dict[str, Any] | None = None) -> Any:
    body = {"model": "jev-latest", "state": "I was charged twice.", "questions": questions or QUESTIONS}
    return systemone.parse(json.dumps(body).encode(), Limits(), frozenset())


async def test_score_many_is_one_batched_generate_with_one_rid_per_call(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    calls = three_calls()
    results = await backend.score_many(calls)
    [body] = emulator.generate_bodies()
    assert body == {
        "input_ids": [list(c.token_ids) for c in calls],
        "sampling_params": GREEDY,  # one object, repeated for every item by SGLang
        "return_logprob": True,
        "token_ids_logprob": [list(c.label_ids) for c in calls],  # one list per item
        "logprob_start_len": -1,
        "rid": [rid_for(c.call_id) for c in calls],
    }
    assert body["rid"][2] == "openjev-7-not-hex"
    for call, result in zip(calls, results, strict=True):  # in order, each from its own prompt and labels
        assert result.logprobs == tuple(logprob_of(call.token_ids, label) for label in call.label_ids)
        assert result.usage.prompt_tokens == len(call.token_ids)
    assert results[1].usage == CallUsage(prompt_tokens=len(PROMPT) + 2, cached_tokens=len(PROMPT))


async def test_the_label_mass_is_the_sum_of_the_labels_raw_probabilities_when_asked(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    asked, plain = ScoreCall(new_id(), PROMPT, LABELS, label_mass=True), ScoreCall(new_id(), PROMPT, LABELS)
    measured, unmeasured = await backend.score_many([asked, plain])
    expected = math.fsum(math.exp(logprob_of(PROMPT, label)) for label in LABELS)
    assert measured.label_mass == pytest.approx(expected, rel=1e-12) and 0 < expected < 1
    assert unmeasured.label_mass is None
    [body] = emulator.generate_bodies()
    assert body["token_ids_logprob"] == [LABELS, LABELS]  # nothing more is asked of SGLang for it


async def test_one_call_keeps_the_plain_body(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    call = ScoreCall(new_id(), PROMPT, LABELS)
    await backend.score_many([call])
    assert await backend.score_many([]) == []
    assert emulator.generate_bodies() == [
        {
            "input_ids": PROMPT,
            "sampling_params": GREEDY,
            "return_logprob": True,
            "token_ids_logprob": LABELS,
            "logprob_start_len": -1,
            "rid": call.call_id,
        }
    ]


async def test_a_three_question_request_makes_two_generate_requests_with_unchanged_usage(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    ev = evaluator(backend)
    prepared = ev.prepare(request())
    result = await ev.evaluate(prepared)
    warm, batch = emulator.generate_bodies()
    prefix = list(prepared.plan.prefix_ids)
    assert warm == {"input_ids": prefix, "sampling_params": GREEDY, "rid": warm["rid"]}
    branches = prepared.plan.branches
    assert batch["input_ids"] == [prefix + list(b.suffix_ids) for b in branches]
    assert batch["token_ids_logprob"] == [list(b.label_ids) for b in branches]
    assert (batch["sampling_params"], batch["return_logprob"], batch["logprob_start_len"]) == (GREEDY, True, -1)
    assert len(set(batch["rid"])) == 3 and warm["rid"] not in batch["rid"]
    # usage and cached tokens: the same values as one call per branch gave.
    replies = [emulator.replies[rid] for rid in batch["rid"]]
    usage = result.response.usage
    assert usage.output_tokens == 4
    assert usage.input_tokens == len(prefix) + sum(r["prompt_tokens"] for r in replies)
    assert result.cached_tokens == sum(r["cached_tokens"] for r in replies) >= 3 * len(prefix)

    one_by_one = SGLangEmulator()
    await one_by_one.start()
    client = SGLangBackend(one_by_one.url, startup_timeout=5.0)
    await client.start()
    one_by_one.reset()  # forget the start-up label check
    try:

        async def alone(call_id: str, token_ids: Sequence[int], label_ids: Sequence[int]) -> LabelScores:
            (scores,) = await SGLangBackend.score_many(client, [ScoreCall(call_id, token_ids, label_ids)])
            return scores

        client.score_many = lambda calls: score_each(alone, calls)  # type: ignore[method-assign]
        separate = await evaluator(client).evaluate(prepared)
    finally:
        await client.close()
        await one_by_one.stop()
    assert len(one_by_one.generate_bodies()) == 4
    assert separate.response == result.response
    assert separate.cached_tokens == result.cached_tokens


async def test_aborting_an_in_flight_batch_posts_every_rid_and_ends_every_item(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.slow = 30.0
    calls = three_calls()
    task = asyncio.ensure_future(backend.score_many(calls))
    rids = {rid_for(c.call_id) for c in calls}
    assert await emulator.wait_in_flight(3) == rids
    task.cancel()
    await backend.abort([c.call_id for c in calls])
    with pytest.raises(asyncio.CancelledError):
        await task
    assert set(emulator.aborted) == rids
    await asyncio.wait_for(emulator.wait_idle(), timeout=5)  # every item ended well before its 30 s


async def test_a_cancelled_request_aborts_every_branch_of_its_batch(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.slow = 30.0
    emulator.config.slow_scoring_only = True
    ev = evaluator(backend)
    task = asyncio.ensure_future(ev.evaluate(ev.prepare(request())))
    branch_rids = await emulator.wait_in_flight(3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [batch] = [b for b in emulator.generate_bodies() if "token_ids_logprob" in b]
    assert set(batch["rid"]) == branch_rids
    assert branch_rids <= set(emulator.aborted)
    await asyncio.wait_for(emulator.wait_idle(), timeout=5)


async def test_one_item_aborted_by_sglang_fails_the_batch(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    emulator.config.slow = 0.5
    calls = three_calls()
    task = asyncio.ensure_future(backend.score_many(calls))
    await emulator.wait_in_flight(3)
    await backend.abort([calls[1].call_id])  # someone else stops one item; the others answer normally
    with pytest.raises(BackendError, match="SGLang aborted the call"):
        await asyncio.wait_for(task, 5)
    reasons = [emulator.replies[rid_for(c.call_id)]["finish_reason"]["type"] for c in calls]
    assert reasons == ["length", "abort", "length"]


@pytest.mark.parametrize(
    ("knob", "value", "error", "message"),
    [
        ("omit_label_ids", [34], BackendError, "label token id 34"),
        ("fail", 500, BackendError, "answered 500"),
        ("fail", 503, BackendUnavailable, "unavailable"),
        ("malformed", True, BackendError, "malformed"),
        ("close", True, BackendUnavailable, "dropped the connection"),
    ],
)
async def test_errors_in_a_batch_are_the_errors_of_a_single_call(
    backend: SGLangBackend,
    emulator: SGLangEmulator,
    knob: str,
    value: object,
    error: type[Exception],
    message: str,
) -> None:
    setattr(emulator.config, knob, value)
    with pytest.raises(error, match=message):
        await backend.score_many(three_calls())
    with pytest.raises(error, match=message):
        await backend.score(new_id(), PROMPT, LABELS)
    setattr(emulator.config, knob, type(emulator.config)().__dict__[knob])
    assert [len(r.logprobs) for r in await backend.score_many(three_calls())] == [4, 2, 4]


async def test_a_batch_reply_without_label_logprobs_fails_that_request_only(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.label_logprobs = False
    with pytest.raises(BackendError, match="no output_token_ids_logprobs"):
        await backend.score_many(three_calls())
    assert (await backend.health()).ok  # one reply is no evidence that the backend is unfit
    emulator.config.label_logprobs = True
    assert [len(r.logprobs) for r in await backend.score_many(three_calls())] == [4, 2, 4]


async def test_a_reply_with_the_wrong_number_of_items_is_a_backend_error(
    backend: SGLangBackend, emulator: SGLangEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = emulator._expand
    monkeypatch.setattr(emulator, "_expand", lambda body: original(body)[:2])
    with pytest.raises(BackendError, match="2 results for a batch of 3"):
        await backend.score_many(three_calls())


def test_the_emulator_splits_a_batch_as_sglang_normalises_it() -> None:
    body = {
        "input_ids": [[1, 2], [3]],
        "sampling_params": GREEDY,
        "return_logprob": True,
        "token_ids_logprob": [[5], [6, 7]],
        "logprob_start_len": -1,
        "rid": "r",
    }
    assert split_generate_body(body) == [
        {**body, "input_ids": [1, 2], "token_ids_logprob": [5], "rid": "r_0"},
        {**body, "input_ids": [3], "token_ids_logprob": [6, 7], "rid": "r_1"},
    ]
    flat = {"input_ids": [[1], [2]], "token_ids_logprob": [5, 6], "rid": ["a", "b"]}
    assert [i["token_ids_logprob"] for i in split_generate_body(flat)] == [[5, 6], [5, 6]]


@pytest.mark.parametrize(
    ("tamper", "message"), [("id", "is for request 'someone-else'"), ("prompt_tokens", "prompt tokens")]
)
async def test_a_reply_meant_for_another_request_is_a_backend_error(
    backend: SGLangBackend, emulator: SGLangEmulator, monkeypatch: pytest.MonkeyPatch, tamper: str, message: str
) -> None:
    original = emulator._answer

    def answer(item: dict[str, Any], *, aborted: bool) -> dict[str, Any]:
        reply = original(item, aborted=aborted)
        meta = reply["meta_info"]
        if tamper == "id":
            meta["id"] = "someone-else"
        else:
            meta["prompt_tokens"] += 1
        return reply

    monkeypatch.setattr(emulator, "_answer", answer)
    with pytest.raises(BackendError, match=message):
        await backend.score_many(three_calls())
    with pytest.raises(BackendError, match=message):
        await backend.score(new_id(), PROMPT, LABELS)
    with pytest.raises(BackendError, match=message):
        await backend.warm(new_id(), PROMPT)


async def test_a_reply_without_ids_is_checked_on_its_prompt_length_only(
    backend: SGLangBackend, emulator: SGLangEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = emulator._answer

    def answer(item: dict[str, Any], *, aborted: bool) -> dict[str, Any]:
        reply = original(item, aborted=aborted)
        del reply["meta_info"]["id"]  # a frontend that does not echo the rid
        return reply

    monkeypatch.setattr(emulator, "_answer", answer)
    assert [len(r.logprobs) for r in await backend.score_many(three_calls())] == [4, 2, 4]
