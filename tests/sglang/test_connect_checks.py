"""What openjev checks on an SGLang it did not launch (`--connect`): the backend key is enforced, the
KV cache dtype is reported, and a backend whose replies carry no label log-probabilities is told
apart from one bad reply: the start-up check, or several such replies in a row, and it recovers."""

from __future__ import annotations

import uuid

import pytest
import structlog

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.checks import INCOMPATIBLE_AFTER, NO_LABEL_LOGPROBS
from openjev.adapters.sglang.peer import PROBE_LABEL_ID
from openjev.domain.errors import BackendError, StartupError
from tests.sglang_emulator import EmulatorConfig, SGLangEmulator

PROMPT = [151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198]
LABELS = [32, 33, 34]


async def test_a_backend_key_that_sglang_does_not_enforce_stops_start_up() -> None:
    """SGLang 0.5.23's Rust frontend ignores --api-key: a keyless request must be refused, or openjev stops."""
    emu = SGLangEmulator(EmulatorConfig(api_key=None, frontend="rust"))
    await emu.start()
    client = SGLangBackend(emu.url, api_key="s3cret", startup_timeout=5)
    try:
        with pytest.raises(StartupError, match=r"accepts /generate without OPENJEV_BACKEND_API_KEY .*got 400"):
            await client.start()
        [keyless] = [r for r in emu.requests if r.path == "/generate"]
        assert keyless.authorization is None and keyless.body == {"input_ids": []}  # nothing to generate
    finally:
        await client.close()
        await emu.stop()


async def test_an_enforced_backend_key_passes_the_check() -> None:
    emu = SGLangEmulator(EmulatorConfig(api_key="s3cret"))
    await emu.start()
    client = SGLangBackend(emu.url, api_key="s3cret", startup_timeout=5)
    try:
        with structlog.testing.capture_logs() as logs:
            await client.start()
        assert any(e["event"] == "sglang_key_enforced" for e in logs)
        keyless, vocab_probe, label_check = emu.generate_bodies()
        assert keyless == {"input_ids": []}  # the keyless check, refused with 401
        assert vocab_probe["token_ids_logprob"] == [PROBE_LABEL_ID]  # then, with the key, the vocabulary's size
        assert label_check["token_ids_logprob"] == [0]  # and the label check
        assert (await client.score(uuid.uuid4().hex, PROMPT, LABELS)).logprobs
    finally:
        await client.close()
        await emu.stop()


async def test_no_key_no_key_check_but_a_vocabulary_probe_and_one_label_check() -> None:
    emu = SGLangEmulator()
    await emu.start()
    client = SGLangBackend(emu.url, startup_timeout=5)
    try:
        await client.start()
        vocab_probe, label_check = emu.generate_bodies()
        assert vocab_probe == {**label_check, "token_ids_logprob": [PROBE_LABEL_ID], "rid": vocab_probe["rid"]}
        assert client.vocab_size() == emu.config.vocab_size  # from SGLang's refusal of that id
        assert label_check == {
            "input_ids": [0],
            "sampling_params": {"max_new_tokens": 1, "temperature": 0},
            "return_logprob": True,
            "token_ids_logprob": [0],
            "logprob_start_len": -1,
            "rid": label_check["rid"],
        }
    finally:
        await client.close()
        await emu.stop()


async def test_a_backend_without_label_logprobs_at_start_up_stops_it() -> None:
    """SGLang's router over gRPC workers returns no output_token_ids_logprobs: openjev cannot serve."""
    emu = SGLangEmulator(EmulatorConfig(label_logprobs=False))
    await emu.start()
    client = SGLangBackend(emu.url, startup_timeout=5)
    try:
        with pytest.raises(StartupError, match="workers must be HTTP workers"):
            await client.start()
    finally:
        await client.close()
        await emu.stop()


@pytest.mark.parametrize(("dtype", "warning"), [("bf16", None), ("auto", "sglang_kv_cache_auto"),
                                                ("fp8_e4m3", "sglang_kv_cache_quantized")])  # fmt: skip
async def test_the_kv_cache_dtype_is_reported_at_start_up(dtype: str, warning: str | None) -> None:
    emu = SGLangEmulator(EmulatorConfig(kv_cache_dtype=dtype))
    await emu.start()
    client = SGLangBackend(emu.url, startup_timeout=5)
    try:
        with structlog.testing.capture_logs() as logs:
            await client.start()
        assert client.kv_cache_dtype == dtype
        [ready] = [e for e in logs if e["event"] == "sglang_ready"]
        assert ready["kv_cache_dtype"] == dtype
        warnings = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert warnings == ([warning] if warning else [])
    finally:
        await client.close()
        await emu.stop()


async def test_replies_without_label_logprobs_fail_their_requests_and_only_a_run_of_them_fails_health(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.label_logprobs = False
    for sent in range(1, INCOMPATIBLE_AFTER + 2):
        if sent == INCOMPATIBLE_AFTER:
            assert (await backend.health()).ok  # one reply short of the evidence: still healthy
        with pytest.raises(BackendError, match="workers must be HTTP workers"):
            await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
        assert len(emulator.generate_bodies()) == sent  # every request is still sent
    health = await backend.health()
    assert not health.ok and health.detail.startswith(NO_LABEL_LOGPROBS)
    assert "replies in a row had none" in health.detail
    emulator.config.label_logprobs = True
    assert (await backend.score(uuid.uuid4().hex, PROMPT, LABELS)).logprobs  # answers again: recovered
    assert (await backend.health()).ok


async def test_health_looks_again_and_recovers_without_traffic(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.label_logprobs = False
    for _ in range(INCOMPATIBLE_AFTER):
        with pytest.raises(BackendError):
            await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
    sent = len(emulator.generate_bodies())
    assert not (await backend.health()).ok
    assert len(emulator.generate_bodies()) == sent + 1  # /health asked for a label again: still none
    emulator.config.label_logprobs = True
    assert (await backend.health()).ok


async def test_a_missing_single_label_is_a_call_error_not_a_backend_failure(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.omit_label_ids = [LABELS[0]]
    with pytest.raises(BackendError, match=f"label token id {LABELS[0]}"):
        await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
    emulator.config.omit_label_ids = []
    assert (await backend.score(uuid.uuid4().hex, PROMPT, LABELS)).logprobs
    assert (await backend.health()).ok
