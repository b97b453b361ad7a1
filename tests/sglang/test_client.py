"""The SGLang adapter against the emulator: SGLang's JSON, errors, aborts, start-up and recovery."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.adapters.sglang.backend import CONTROL_CONNECTIONS, SGLangBackend
from openjev.adapters.sglang.control import models_limit, server_limit
from openjev.adapters.sglang.wire import rid_for
from openjev.domain.errors import BackendError, BackendUnavailable, StartupError
from openjev.domain.ports import CallUsage, ScoringBackend
from tests.sglang_emulator import EmulatorConfig, SGLangEmulator, logprob_of

PROMPT = [151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198]
LABELS = [32, 33, 34, 35]


def new_id() -> str:
    return uuid.uuid4().hex


async def test_score_is_one_greedy_single_token_call_on_ids_for_exact_labels(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    call = new_id()
    scores = await backend.score(call, PROMPT, LABELS)
    [body] = emulator.generate_bodies()
    assert body == {
        "input_ids": PROMPT,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
        "return_logprob": True,
        "token_ids_logprob": LABELS,
        "logprob_start_len": -1,
        "rid": call,
    }
    assert scores.logprobs == tuple(logprob_of(PROMPT, label) for label in LABELS)
    assert scores.usage == CallUsage(prompt_tokens=len(PROMPT), cached_tokens=0)
    assert isinstance(backend, ScoringBackend)


async def test_labels_are_matched_by_token_id_not_by_position(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    emulator.config.reverse_label_order = True
    scores = await backend.score(new_id(), PROMPT, LABELS)
    assert scores.logprobs == tuple(logprob_of(PROMPT, label) for label in LABELS)


async def test_warm_asks_for_no_labels_and_the_cache_shows_in_later_calls(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    prefix = PROMPT[:8]
    first = await backend.warm(new_id(), prefix)
    branch = await backend.score(new_id(), [*prefix, 5, 6, 7], LABELS)
    again = await backend.warm(new_id(), prefix)
    warm_body = emulator.generate_bodies()[0]
    assert warm_body["sampling_params"] == {"max_new_tokens": 1, "temperature": 0}
    assert "token_ids_logprob" not in warm_body
    assert "text" not in warm_body
    assert first == CallUsage(prompt_tokens=8, cached_tokens=0)
    assert branch.usage == CallUsage(prompt_tokens=11, cached_tokens=8)
    assert again == CallUsage(prompt_tokens=8, cached_tokens=7)  # SGLang caps a hit at len - 1


async def test_cached_tokens_absent_from_the_reply_is_reported_as_unknown(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.cached_tokens = False
    await backend.warm(new_id(), PROMPT)
    scores = await backend.score(new_id(), PROMPT, LABELS)
    assert scores.usage == CallUsage(prompt_tokens=len(PROMPT), cached_tokens=None)


async def test_a_label_sglang_did_not_return_is_an_error_never_a_zero(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.omit_label_ids = [34]
    with pytest.raises(BackendError, match="label token id 34"):
        await backend.score(new_id(), PROMPT, LABELS)


async def test_sglang_400_is_a_backend_error_carrying_its_message(backend: SGLangBackend) -> None:
    with pytest.raises(BackendError, match="out-of-vocabulary token id 99999999"):
        await backend.score(new_id(), PROMPT, [*LABELS, 99_999_999])


async def test_concurrent_calls_each_use_their_own_rid(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    calls = [new_id() for _ in range(12)]
    results = await asyncio.gather(*(backend.score(c, PROMPT, LABELS) for c in calls))
    assert sorted(b["rid"] for b in emulator.generate_bodies()) == sorted(calls)
    assert len({r.logprobs for r in results}) == 1


async def test_bearer_key_is_sent_on_every_route() -> None:
    emu = SGLangEmulator(EmulatorConfig(api_key="s3cret"))
    await emu.start()
    client = SGLangBackend(emu.url, api_key="s3cret", startup_timeout=5)
    try:
        await client.start()
        await client.score(new_id(), PROMPT, LABELS)
        await client.abort([new_id()])
        sent = {r.path: r.authorization for r in emu.requests if r.path != "/health"}
        assert set(sent) >= {"/generate", "/model_info", "/server_info", "/abort_request"}
        assert set(sent.values()) == {"Bearer s3cret"}
        emu.config.api_key = "rotated"
        with pytest.raises(BackendError, match="OPENJEV_BACKEND_API_KEY"):
            await client.score(new_id(), PROMPT, LABELS)
    finally:
        await client.close()
        await emu.stop()


async def test_a_wrong_key_stops_start_up_with_an_actionable_message() -> None:
    emu = SGLangEmulator(EmulatorConfig(api_key="s3cret"))
    await emu.start()
    client = SGLangBackend(emu.url, api_key="wrong", startup_timeout=5)
    try:
        with pytest.raises(StartupError, match="OPENJEV_BACKEND_API_KEY"):
            await client.start()
    finally:
        await client.close()
        await emu.stop()


@pytest.mark.parametrize(
    ("knob", "value", "error", "message"),
    [
        ("fail", 500, BackendError, "answered 500"),
        ("fail", 502, BackendError, "answered 502"),
        ("fail", 503, BackendUnavailable, "unavailable"),
        ("malformed", True, BackendError, "malformed"),
        ("close", True, BackendUnavailable, "dropped the connection"),
    ],
)
async def test_backend_failures_map_to_502_or_503_errors(
    backend: SGLangBackend,
    emulator: SGLangEmulator,
    knob: str,
    value: object,
    error: type[Exception],
    message: str,
) -> None:
    setattr(emulator.config, knob, value)
    with pytest.raises(error, match=message):
        await backend.score(new_id(), PROMPT, LABELS)
    setattr(emulator.config, knob, EmulatorConfig().__dict__[knob])
    assert len((await backend.score(new_id(), PROMPT, LABELS)).logprobs) == len(LABELS)


async def test_backend_going_away_and_coming_back() -> None:
    emu = SGLangEmulator()
    await emu.start()
    port = emu.port
    client = SGLangBackend(emu.url, startup_timeout=5)
    await client.start()
    try:
        await client.score(new_id(), PROMPT, LABELS)
        await emu.stop()
        with pytest.raises(BackendUnavailable):
            await client.score(new_id(), PROMPT, LABELS)
        health = await client.health()
        assert not health.ok
        assert "cannot connect" in health.detail
        await client.abort([new_id()])  # never raises, even with nobody listening
        emu = SGLangEmulator()
        await emu.start(port=port)
        assert (await client.health()).ok
        assert len((await client.score(new_id(), PROMPT, LABELS)).logprobs) == len(LABELS)
    finally:
        await client.close()
        await emu.stop()


async def test_abort_posts_each_rid_and_stops_the_call_in_the_backend(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.slow = 30.0
    call = new_id()
    task = asyncio.ensure_future(backend.score(call, PROMPT, LABELS))
    assert await emulator.wait_in_flight(1) == {call}
    task.cancel()
    other = new_id()
    await backend.abort([call, other])
    with pytest.raises(asyncio.CancelledError):
        await task
    assert emulator.aborted == [call, other]
    assert [r.body for r in emulator.requests if r.path == "/abort_request"] == [{"rid": call}, {"rid": other}]
    await asyncio.wait_for(emulator.wait_idle(), timeout=5)  # the abort ended it well before its 30 s


async def test_abort_through_a_router_without_the_route_is_quiet(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.abort_route = False
    await backend.abort([new_id(), new_id()])
    await backend.abort([new_id()])
    assert emulator.aborted == []
    assert (await backend.health()).ok


async def test_cancelled_calls_release_their_connections(emulator: SGLangEmulator) -> None:
    client = SGLangBackend(emulator.url, max_connections=1, startup_timeout=5)
    await client.start()
    try:
        emulator.config.slow = 30.0
        pool = 1 + CONTROL_CONNECTIONS
        tasks = [asyncio.ensure_future(client.score(new_id(), PROMPT, LABELS)) for _ in range(pool)]
        await emulator.wait_in_flight(pool)  # every pooled connection is busy
        for task in tasks:
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        emulator.config.slow = 0.0
        # With a connection leaked, this call would wait for a free one for ever.
        scores = await asyncio.wait_for(client.score(new_id(), PROMPT, LABELS), timeout=5)
        assert len(scores.logprobs) == len(LABELS)
    finally:
        await client.close()


async def test_start_waits_for_health_then_reads_the_request_limit(emulator: SGLangEmulator) -> None:
    emulator.config.unhealthy_until = time.monotonic() + 1.0
    client = SGLangBackend(emulator.url, startup_timeout=10)
    try:
        await client.start()
        assert time.monotonic() >= emulator.config.unhealthy_until
        probes = [r for r in emulator.requests if r.path == "/health"]
        assert len(probes) >= 2
        assert client.context_tokens() == 32_768 - 6  # /server_info max_req_input_len
        assert client.model_info["model_path"] == "emulated/model"
    finally:
        await client.close()


async def test_start_gives_up_after_the_budget_with_the_reason(emulator: SGLangEmulator) -> None:
    emulator.config.unhealthy = True
    client = SGLangBackend(emulator.url, startup_timeout=1.0)
    try:
        with pytest.raises(BackendUnavailable, match=r"within 1 s \(last check: SGLang /health answered 503\)"):
            await client.start()
    finally:
        await client.close()


async def test_start_against_nothing_listening_says_so() -> None:
    emu = SGLangEmulator()
    await emu.start()
    url = emu.url
    await emu.stop()
    # A budget a busy machine's first lookup and refused connect fit in: with 0.5 s, the first check
    # itself once ran out of time on a loaded CI machine, and the reason said "did not answer".
    client = SGLangBackend(url, startup_timeout=3.0)
    try:
        with pytest.raises(BackendUnavailable, match="cannot connect to SGLang"):
            await client.start()
    finally:
        await client.close()


async def test_context_limit_is_capped_by_the_setting_and_falls_back_to_v1_models(emulator: SGLangEmulator) -> None:
    capped = SGLangBackend(emulator.url, context_length=1000, startup_timeout=5)
    await capped.start()
    await capped.close()
    assert capped.context_tokens() == 1000
    emulator.config.server_info = False
    emulator.config.context_length = 4096
    fallback = SGLangBackend(emulator.url, startup_timeout=5)
    await fallback.start()
    await fallback.close()
    assert fallback.context_tokens() == 4096  # /v1/models max_model_len


def test_request_limit_parsing() -> None:
    assert server_limit({"max_req_input_len": 100, "context_length": 200}) == 100
    assert server_limit({"context_length": 200}) == 200
    assert server_limit({"context_length": None}) is None
    assert server_limit([]) is None
    assert models_limit({"data": [{"id": "m", "max_model_len": 300}]}) == 300
    assert models_limit({"data": []}) is None
    assert models_limit(None) is None


async def test_calls_before_start_are_unavailable_not_crashes() -> None:
    client = SGLangBackend("http://127.0.0.1:9")
    with pytest.raises(BackendUnavailable, match="not started"):
        await client.score(new_id(), PROMPT, LABELS)
    assert not (await client.health()).ok
    await client.abort([new_id()])
    await client.close()


def test_uuid_hex_call_ids_are_used_as_rids() -> None:
    call = new_id()
    assert rid_for(call) == call


@given(st.lists(st.text(min_size=1, max_size=40), min_size=2, max_size=6, unique=True))
def test_rids_are_prefix_free_so_an_abort_hits_one_call_only(call_ids: list[str]) -> None:
    # SGLang aborts every request whose rid starts with the aborted rid.
    rids = [rid_for(c) for c in call_ids]
    for a in rids:
        for b in rids:
            assert a == b or not b.startswith(a)


@pytest.mark.parametrize("missing", [None, "prompt_tokens"])
def test_the_recorded_abort_reply_is_an_aborted_call_not_a_malformed_one(missing: str | None) -> None:
    """SGLang 0.5.23 answers an aborted /generate with HTTP 200 and finish_reason abort (its record)."""
    from openjev.adapters.sglang.wire import read_reply, score_body
    from openjev.domain.ports import ScoreCall

    call = ScoreCall(new_id(), PROMPT, LABELS)
    sent = score_body([call])
    meta = {
        "id": call.call_id,
        "finish_reason": {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None},
        "prompt_tokens": len(PROMPT),
        "weight_version": "default",
        "completion_tokens": 0,
    }
    if missing:
        del meta[missing]
    raw = json.dumps({"text": "", "output_ids": [], "meta_info": meta}).encode()
    with pytest.raises(BackendError, match=r"^SGLang aborted the call: Aborted$"):
        read_reply(raw, sent)
    batch = score_body([call, ScoreCall(new_id(), PROMPT, LABELS)])
    finished = {"text": "", "output_ids": [1], "meta_info": {"id": batch.rids[1], "prompt_tokens": len(PROMPT)}}
    with pytest.raises(BackendError, match="SGLang aborted the call: Aborted"):
        read_reply(json.dumps([{"text": "", "output_ids": [], "meta_info": meta}, finished]).encode(), batch)
