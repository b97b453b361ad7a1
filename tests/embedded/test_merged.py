"""The merged GGUF of a fine-tuned packaged model: built once from the verified base and the pinned
adapter, checked at every start, rebuilt for another adapter, refused when damaged; and the adapter
openjev ships is the pinned file, fits the packaged base, and names itself in the API."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np
import pytest

from openjev.adapters.embedded.built import MANIFEST
from openjev.adapters.embedded.gguf_file import read_layout
from openjev.adapters.embedded.lora import read_adapter
from openjev.adapters.embedded.merged import Manifest, describe_merged, engine_file, engine_path
from openjev.adapters.embedded.model import describe_model, smollm2_path
from openjev.adapters.embedded.packaged_models import (
    PACKAGED_MODELS,
    QWEN_CODER_15B,
    QWEN_CODER_15B_DECISIONS,
    Adapter,
    PackagedModel,
)
from openjev.domain.errors import StartupError
from tests.embedded.test_lora import write_adapter, write_model


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tuned(tmp_path: Path) -> PackagedModel:
    rng = np.random.default_rng(7)
    write_model(tmp_path / "base.gguf", rng)
    factors = (rng.normal(0, 0.5, (4, 64)).astype(np.float32), rng.normal(0, 0.5, (16, 4)).astype(np.float32))
    write_adapter(tmp_path / "adapter.gguf", {"blk.0.ffn_up.weight": factors})
    return PackagedModel(
        name="tiny-tuned",
        public_name="acme/tiny-tuned",
        file_name="base.gguf",
        parts=(),
        sha256=sha256(tmp_path / "base.gguf"),
        size=(tmp_path / "base.gguf").stat().st_size,
        adapter=Adapter(file=str(tmp_path / "adapter.gguf"), sha256=sha256(tmp_path / "adapter.gguf")),
    )


def test_the_merged_file_is_built_once_checked_and_reused(tuned: PackagedModel, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path, digest = engine_file(tuned, tmp_path / "base.gguf", cache, workers=1)
    assert path == engine_path(tuned, tmp_path / "base.gguf", cache)  # known before it is built
    assert tuned.adapter is not None
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([MANIFEST, "tiny-tuned.Q8_0.gguf"])
    assert [p.name for p in cache.iterdir()] == [path.parent.name]  # no staging folder left behind
    manifest = msgspec.json.decode((path.parent / MANIFEST).read_bytes(), type=Manifest)
    assert digest == manifest.sha256 == sha256(path)
    assert (manifest.base_sha256, manifest.adapter_sha256) == (tuned.sha256, tuned.adapter.sha256)
    assert "blk.0.ffn_up.weight" in {t.name for t in read_layout(path).tensors}

    built = path.stat().st_mtime_ns
    assert engine_file(tuned, tmp_path / "base.gguf", cache, workers=1) == (path, digest)
    assert path.stat().st_mtime_ns == built


def test_a_damaged_merged_file_refuses_to_start_and_says_what_to_delete(tuned: PackagedModel, tmp_path: Path) -> None:
    path, _ = engine_file(tuned, tmp_path / "base.gguf", tmp_path / "cache", workers=1)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        StartupError, match=f"not the .* it was built with: it was damaged or changed; delete {path.parent}"
    ):
        engine_file(tuned, tmp_path / "base.gguf", tmp_path / "cache", workers=1)


def test_a_wrong_base_or_adapter_is_refused_before_building(tuned: PackagedModel, tmp_path: Path) -> None:
    assert tuned.adapter is not None
    wrong_adapter = msgspec.structs.replace(tuned, adapter=msgspec.structs.replace(tuned.adapter, sha256="0" * 64))
    with pytest.raises(
        StartupError, match=r"the adapter .*adapter.gguf has sha256 \w+, expected 0{64}: reinstall openjev"
    ):
        engine_file(wrong_adapter, tmp_path / "base.gguf", tmp_path / "cache", workers=1)
    wrong_base = msgspec.structs.replace(tuned, sha256="1" * 64)
    with pytest.raises(StartupError, match=r"expected 1{64}"):
        engine_file(wrong_base, tmp_path / "base.gguf", tmp_path / "cache", workers=1)
    assert not any((tmp_path / "cache").glob("*/" + MANIFEST))


def test_another_adapter_builds_another_file(tuned: PackagedModel, tmp_path: Path) -> None:
    assert tuned.adapter is not None
    first, _ = engine_file(tuned, tmp_path / "base.gguf", tmp_path / "cache", workers=1)
    rng = np.random.default_rng(8)
    factors = (rng.normal(0, 0.5, (4, 64)).astype(np.float32), rng.normal(0, 0.5, (16, 4)).astype(np.float32))
    write_adapter(tmp_path / "other.gguf", {"blk.0.ffn_up.weight": factors})
    other = msgspec.structs.replace(
        tuned, adapter=Adapter(file=str(tmp_path / "other.gguf"), sha256=sha256(tmp_path / "other.gguf"))
    )
    second, _ = engine_file(other, tmp_path / "base.gguf", tmp_path / "cache", workers=1)
    assert second.parent != first.parent and sha256(second) != sha256(first)


def test_a_model_without_adapter_is_its_verified_file_and_a_path_is_taken_as_it_is(tmp_path: Path) -> None:
    base = msgspec.structs.replace(QWEN_CODER_15B, sha256=sha256(smollm2_path()))
    assert engine_file(base, smollm2_path(), tmp_path, workers=1) == (smollm2_path(), base.sha256)
    assert engine_file(None, tmp_path / "any.gguf", tmp_path, workers=1) == (tmp_path / "any.gguf", None)
    assert engine_path(base, smollm2_path(), tmp_path) == smollm2_path()
    assert not any(tmp_path.iterdir())


def test_the_shipped_adapter_is_the_pinned_file_and_fits_the_packaged_base() -> None:
    adapter = QWEN_CODER_15B_DECISIONS.adapter
    assert adapter is not None and PACKAGED_MODELS["qwen2.5-coder-1.5b-decisions"] is QWEN_CODER_15B_DECISIONS
    assert sha256(adapter.path()) == adapter.sha256
    lora = read_adapter(adapter.path())
    parts = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
    assert set(lora.matrices) == {f"blk.{i}.{p}.weight" for i in range(28) for p in parts}
    assert lora.alpha == 32 and {f.rank for f in lora.matrices.values()} == {32}  # two rank-16 runs averaged
    # the base is the default's packaged file, parts and hash alike
    assert (QWEN_CODER_15B_DECISIONS.parts, QWEN_CODER_15B_DECISIONS.sha256) == (
        QWEN_CODER_15B.parts,
        QWEN_CODER_15B.sha256,
    )


def test_a_fine_tuned_model_is_named_for_itself() -> None:
    info = describe_merged(describe_model(smollm2_path(), "acme/tiny-tuned"), QWEN_CODER_15B_DECISIONS)
    assert (info.public_name, info.file_stem, info.short_stem) == ("acme/tiny-tuned",) + (
        "qwen2.5-coder-1.5b-decisions",
    ) * 2
    assert info.quantization == "Q8_0" and "decision adapter merged" in info.description
