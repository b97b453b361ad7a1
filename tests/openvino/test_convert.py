"""The OpenVINO model kept in the cache is checked against its manifest at every start."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from openjev.adapters.embedded.built import MANIFEST, sha256_of
from openjev.adapters.openvino.convert import MODEL_BIN, MODEL_XML, Manifest, verify
from openjev.domain.errors import StartupError


def built(folder: Path) -> Path:
    folder.mkdir()
    (folder / MODEL_XML).write_text("<net/>")
    (folder / MODEL_BIN).write_bytes(bytes(range(256)) * 64)
    files = {name: sha256_of(folder / name) for name in (MODEL_XML, MODEL_BIN)}
    manifest = Manifest(source="m.gguf", source_sha256="0" * 64, openvino="2026.4.1", files=files)
    (folder / MANIFEST).write_bytes(msgspec.json.encode(manifest))
    return folder


def test_an_intact_model_passes_and_a_changed_byte_is_refused_with_what_to_do(tmp_path: Path) -> None:
    folder = built(tmp_path / "model.openvino")
    assert verify(folder).source == "m.gguf"
    with (folder / MODEL_BIN).open("r+b") as handle:
        handle.seek(1000)
        handle.write(b"\xff")
    with pytest.raises(StartupError, match=r"damaged or changed; delete .* and start again"):
        verify(folder)


def test_a_missing_manifest_is_refused(tmp_path: Path) -> None:
    folder = built(tmp_path / "model.openvino")
    (folder / MANIFEST).unlink()
    with pytest.raises(StartupError, match="no readable manifest"):
        verify(folder)
