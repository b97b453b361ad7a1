"""What the integration tests share: the model cache (the packaged GGUF and the engine's model built from it).

Building the OpenVINO model takes about a minute once per machine, so every test that starts the
default model uses the cache `openjev serve` uses (OPENJEV_CACHE_DIR, else ~/.cache/openjev), as a
user's second start would. Tests that need a fresh or damaged cache make their own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from openjev.settings import load_settings


@pytest.fixture(scope="session")
def model_cache() -> Path:
    return load_settings({}).embedded.resolved_cache_dir()
