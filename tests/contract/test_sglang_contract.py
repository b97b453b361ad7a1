"""The SGLang adapter passes the backend contract, against the SGLang emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.adapters.sglang.client import SGLangBackend
from openjev.domain.labels import verify_labels
from openjev.domain.ports import ChatMessage
from openjev.domain.prompt import layout
from tests.contract.contract import BackendContract, ContractPrompt
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
    codec = ChatMLByteCodec()
    split = layout(codec, [ChatMessage(role="user", content="The sky is blue today.")])
    labels = verify_labels(codec, 4)
    return ContractPrompt(
        prefix_ids=tuple(codec.encode(split.prefix_text)),
        suffix_ids=tuple(codec.encode("Is the sky green?" + split.tail_text)),
        label_ids=labels.token_ids[:4],
        missing_label_id=EmulatorConfig().vocab_size + 5,  # SGLang refuses out-of-vocabulary ids (400)
    )


class TestSGLangBackend(BackendContract):
    pass
