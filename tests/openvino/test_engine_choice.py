"""Which engine the embedded backend runs (OPENJEV_ENGINE and the GGUF's architecture)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
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


def test_building_the_runtime_does_not_import_openvino(tmp_path: Path) -> None:
    """`openjev serve` builds its runtime before Granian forks its worker: OpenVINO set up before a
    fork hung the worker's `compile_model`, so only the worker may import it (when it loads)."""
    model = tmp_path / "Tiny-Qwen.Q8_0.gguf"
    writer = gguf.GGUFWriter(model, "qwen2")
    writer.add_string("general.name", "Tiny Qwen")
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    script = (
        "import sys\n"
        "from openjev.adapters.embedded.build import build_runtime\n"
        "from openjev.settings import load_settings\n"
        f"runtime = build_runtime(load_settings({{'OPENJEV_MODEL': {str(model)!r}}}))\n"
        "print(type(runtime.backend).__name__, 'openvino' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.split() == ["OpenVINOBackend", "False"]
