"""What openjev checks on an SGLang it did not launch (`--connect`): the backend key is enforced, the
KV cache dtype is reported, and a backend whose replies carry no label log-probabilities fails."""

from __future__ import annotations

import uuid

import pytest
import structlog

from openjev.adapters.sglang.backend import SGLangBackend
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
        assert emu.generate_bodies() == [{"input_ids": []}]  # the keyless check, refused with 401
        assert (await client.score(uuid.uuid4().hex, PROMPT, LABELS)).logprobs
    finally:
        await client.close()
        await emu.stop()


async def test_no_key_no_check(backend: SGLangBackend, emulator: SGLangEmulator) -> None:
    assert emulator.generate_bodies() == []


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


async def test_replies_without_label_logprobs_fail_the_backend_at_the_first_one(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    """SGLang's router over gRPC workers returns no output_token_ids_logprobs: openjev cannot serve."""
    emulator.config.label_logprobs = False
    assert (await backend.health()).ok
    with pytest.raises(BackendError, match="workers must be HTTP workers"):
        await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
    calls = len(emulator.generate_bodies())
    with pytest.raises(BackendError, match="workers must be HTTP workers"):
        await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
    assert len(emulator.generate_bodies()) == calls  # failed at once: the backend is known unfit
    health = await backend.health()
    assert not health.ok and "output_token_ids_logprobs" in health.detail


async def test_a_missing_single_label_is_a_call_error_not_a_backend_failure(
    backend: SGLangBackend, emulator: SGLangEmulator
) -> None:
    emulator.config.omit_label_ids = [LABELS[0]]
    with pytest.raises(BackendError, match=f"label token id {LABELS[0]}"):
        await backend.score(uuid.uuid4().hex, PROMPT, LABELS)
    emulator.config.omit_label_ids = []
    assert (await backend.score(uuid.uuid4().hex, PROMPT, LABELS)).logprobs
    assert (await backend.health()).ok
