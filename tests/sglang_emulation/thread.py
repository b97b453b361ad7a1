"""The emulator on its own event loop in a daemon thread, for synchronous tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from tests.sglang_emulation.config import EmulatorConfig
from tests.sglang_emulation.server import SGLangEmulator

T = TypeVar("T")


class EmulatorThread:
    """`with EmulatorThread() as emu:` gives `emu.url`, `emu.emulator.config`, `emu.emulator.requests`.

    Config fields are plain attributes: setting them from the test thread is safe.
    """

    def __init__(self, config: EmulatorConfig | None = None, port: int = 0) -> None:
        self.emulator = SGLangEmulator(config)
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-emulator", daemon=True)
        self.url = ""

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self.emulator.start(port=self._port), self._loop)
        self.url = future.result(timeout=10)
        return self

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine (e.g. `emulator.wait_in_flight(3)`) in the emulator's loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine in the emulator's loop and wait for its result."""
        return self.submit(coroutine).result(timeout=timeout)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.emulator.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
