"""The SGLang adapter passes the backend contract, against the SGLang emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.sglang.backend import SGLangBackend
from tests.backend_conformance.contract import BackendContract, ContractPrompt, chatml_prompt
from tests.sglang_emulator import EmulatorConfig, SGLangEmulator


@pytest.fixture
async def backend() -> AsyncIterator[SGLangBackend]:
    emulator = SGLangEmulator(EmulatorConfig(slow=0.01))
    await emulator.start()
    client = SGLangBackend(emulator.url, startup_timeout=5.0)
    await client.start()
    yield client
    await client.close()
    await emulator.stop()


@pytest.fixture
def prompt() -> ContractPrompt:
    # SGLang refuses out-of-vocabulary ids (400).
    return chatml_prompt(missing_label_id=EmulatorConfig().vocab_size + 5)


class TestSGLangBackend(BackendContract):
    pass
