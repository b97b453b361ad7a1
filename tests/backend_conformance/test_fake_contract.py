from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.fake.backend import FAKE_VOCAB_SIZE, FakeBackend
from tests.backend_conformance.contract import BackendContract, ContractPrompt, chatml_prompt


@pytest.fixture
async def backend() -> AsyncIterator[FakeBackend]:
    fake = FakeBackend(latency=0.01)
    await fake.start()
    yield fake
    await fake.close()


@pytest.fixture
def prompt() -> ContractPrompt:
    return chatml_prompt(missing_label_id=FAKE_VOCAB_SIZE + 5)


class TestFakeBackend(BackendContract):
    exact_label_mass = False  # the fake's label mass is made up, not a share of one distribution
