from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.fake.backend import FAKE_VOCAB_SIZE, FakeBackend
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.domain.labels import verify_labels
from openjev.domain.ports import ChatMessage
from openjev.domain.prompt import layout
from tests.contract.contract import BackendContract, ContractPrompt


@pytest.fixture
async def backend() -> AsyncIterator[FakeBackend]:
    fake = FakeBackend(latency=0.01)
    await fake.start()
    yield fake
    await fake.close()


@pytest.fixture
def prompt() -> ContractPrompt:
    codec = ChatMLByteCodec()
    split = layout(codec, [ChatMessage(role="user", content="The sky is blue today.")])
    labels = verify_labels(codec, 4)
    return ContractPrompt(
        prefix_ids=tuple(codec.encode(split.prefix_text)),
        suffix_ids=tuple(codec.encode("Is the sky green?" + split.tail_text)),
        label_ids=labels.token_ids[:4],
        missing_label_id=FAKE_VOCAB_SIZE + 5,
    )


class TestFakeBackend(BackendContract):
    pass
