"""The packaged SmolLM2's metadata and codec, read once for the tests of this folder that read a real GGUF."""

from __future__ import annotations

from typing import Any

import pytest

from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.gguf_file import read_gguf_metadata
from openjev.adapters.embedded.model import smollm2_path


@pytest.fixture(scope="module")
def metadata() -> dict[str, Any]:
    return read_gguf_metadata(smollm2_path())


@pytest.fixture(scope="module")
def codec(metadata: dict[str, Any]) -> GGUFCodec:
    return GGUFCodec.from_metadata(metadata)
