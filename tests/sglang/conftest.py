"""Fixtures for the SGLang adapter tests: the emulator in this event loop, and a client started on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.sglang.backend import SGLangBackend
from tests.sglang_emulator import EmulatorConfig, SGLangEmulator


@pytest.fixture
async def emulator() -> AsyncIterator[SGLangEmulator]:
    emu = SGLangEmulator(EmulatorConfig())
    await emu.start()
    yield emu
    await emu.stop()


@pytest.fixture
async def backend(emulator: SGLangEmulator) -> AsyncIterator[SGLangBackend]:
    client = SGLangBackend(emulator.url, startup_timeout=5.0)
    await client.start()
    emulator.reset()  # the start-up requests (the label check's /generate among them) are not the test's
    yield client
    await client.close()
