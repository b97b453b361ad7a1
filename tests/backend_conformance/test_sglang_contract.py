"""The SGLang adapter passes the backend contract, against the SGLang emulator and behind SGLang's real router."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from openjev.adapters.sglang.backend import SGLangBackend
from tests.backend_conformance.contract import BackendContract, ContractPrompt, chatml_prompt
from tests.sglang.router import Router, router_process
from tests.sglang_emulator import EmulatorConfig, EmulatorThread, SGLangEmulator


@pytest.fixture
def prompt() -> ContractPrompt:
    # SGLang refuses out-of-vocabulary label ids (400).
    return chatml_prompt(missing_label_id=EmulatorConfig().vocab_size + 5)


class TestSGLangBackend(BackendContract):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[SGLangBackend]:
        emulator = SGLangEmulator(EmulatorConfig(slow=0.01))
        await emulator.start()
        client = SGLangBackend(emulator.url, startup_timeout=5.0)
        await client.start()
        yield client
        await client.close()
        await emulator.stop()


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    """sglang-router 0.3.2 (cache-aware) over two emulated workers."""
    config = EmulatorConfig(slow=0.01)
    log = tmp_path_factory.mktemp("router") / "router.log"
    with (
        EmulatorThread(config) as one,
        EmulatorThread(config) as two,
        router_process([one.url, two.url], log) as running,
    ):
        yield running


class TestSGLangBehindTheRouter(BackendContract):
    @pytest.fixture
    async def backend(self, router: Router) -> AsyncIterator[SGLangBackend]:
        client = SGLangBackend(router.url, context_length=4096, startup_timeout=10.0)
        await client.start()
        assert client.peer == "router"
        yield client
        await client.close()
