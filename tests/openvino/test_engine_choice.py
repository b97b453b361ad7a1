"""Which engine the embedded backend runs (OPENJEV_ENGINE and the GGUF's architecture)."""

from __future__ import annotations

import pytest

from openjev.adapters.embedded.build import choose_engine
from openjev.domain.errors import StartupError


def test_auto_takes_openvino_for_the_measured_qwen2_models_and_llama_cpp_for_the_rest() -> None:
    assert choose_engine("auto", "qwen2") == "openvino"
    assert choose_engine("auto", "llama") == "llama.cpp"  # SmolLM2: read by OpenVINO, but not measured
    assert choose_engine("openvino", "llama") == "openvino"
    assert choose_engine("auto", "gemma3") == "llama.cpp"
    assert choose_engine("llama.cpp", "qwen2") == "llama.cpp"


def test_asking_for_openvino_on_an_architecture_it_cannot_read_says_what_to_do() -> None:
    with pytest.raises(StartupError, match=r"OPENJEV_ENGINE=llama\.cpp"):
        choose_engine("openvino", "gemma3")
