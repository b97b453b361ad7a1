"""The OpenVINO backend (on its stand-in engine) passes the contract every backend passes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.openvino.backend import OpenVINOBackend
from tests.backend_conformance.contract import BackendContract, ContractPrompt, chatml_prompt
from tests.openvino.fake_engine import VOCAB, FakeEngine


@pytest.fixture
async def backend() -> AsyncIterator[OpenVINOBackend]:
    adapter = OpenVINOBackend(FakeEngine, model="model.gguf", threads=1, context=4096)
    await adapter.start()
    yield adapter
    await adapter.close()


@pytest.fixture
def prompt() -> ContractPrompt:
    return chatml_prompt(missing_label_id=VOCAB + 5)


class TestOpenVINOBackend(BackendContract):
    pass
