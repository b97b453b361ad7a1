"""The GGUF an engine loads for a packaged model: the verified packaged file, or that file with the
model's adapter merged, built once in the cache and checked at every start; and on top of either (or
of any GGUF), a user's adapter from `openjev tune` (OPENJEV_ADAPTER), merged the same way.

A fine-tuned packaged model ships as its base's packages plus a small LoRA adapter inside openjev.
Merging rewrites every weight matrix as Q8_0 with the adapter's update added (`requantize.py`),
about 30 s on two cores, once; both engines then load that one file, so they read the same
weights (OpenVINO's own build finds nothing left to rewrite). The result lives in
`<cache>/<name>.<key>/`, where the key covers the base's and the adapter's sha256, with a manifest
of the merged file's sha256, recorded when it was built and checked at every start.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import msgspec

from openjev.adapters.embedded.built import MANIFEST, check_built, read_manifest, sha256_of
from openjev.adapters.embedded.model import ModelInfo
from openjev.adapters.embedded.packaged_models import Adapter, PackagedModel, verify
from openjev.adapters.embedded.requantize import requantize
from openjev.adapters.embedded.tuned import AdapterFolder
from openjev.domain.errors import StartupError
from openjev.logs import get_logger

log = get_logger("openjev.embedded")


class Manifest(msgspec.Struct, frozen=True):
    base_sha256: str
    adapter_sha256: str
    sha256: str  # of the merged file, as built


def engine_file(model: PackagedModel | None, path: Path, cache_dir: Path, *, workers: int) -> tuple[Path, str | None]:
    """The checked GGUF to load for the model at `path`, and its sha256 when known without hashing again.

    Not packaged: `path` as it is. Packaged: `path` once its sha256 is the published one. Packaged
    with an adapter: the merged file, built first if the cache has none.
    """
    if model is None:
        return path, None
    if model.adapter is None:
        verify(model, path)
        return path, model.sha256
    return ensure_merged(model, model.adapter, path, cache_dir, workers=workers)


def engine_path(model: PackagedModel | None, path: Path, cache_dir: Path) -> Path:
    """Where `engine_file` will find the GGUF to load, without building or checking it (instantly)."""
    if model is None or model.adapter is None:
        return path
    return merged_file(model, model.adapter, cache_dir)


def merged_file(model: PackagedModel, adapter: Adapter, cache_dir: Path) -> Path:
    key = hashlib.sha256(f"{model.sha256}:{adapter.sha256}:q8_0".encode()).hexdigest()[:16]
    return cache_dir / f"{model.name}.{key}" / f"{model.name}.Q8_0.gguf"


def ensure_merged(
    model: PackagedModel, adapter: Adapter, base: Path, cache_dir: Path, *, workers: int
) -> tuple[Path, str]:
    """The merged GGUF and its sha256, re-hashed against the manifest (a second, once built)."""
    merged = merged_file(model, adapter, cache_dir)
    if not (merged.parent / MANIFEST).is_file():
        verify(model, base)
        source = adapter.path()
        actual = sha256_of(source)
        if actual != adapter.sha256:
            raise StartupError(
                f"the adapter {source} has sha256 {actual}, expected {adapter.sha256}: reinstall openjev"
            )
        _build(model.name, base, Manifest(model.sha256, adapter.sha256, ""), source, merged, workers)
    return _checked(merged)


def served_file(
    packaged: PackagedModel | None, path: Path, cache_dir: Path, tuned: AdapterFolder | None, *, workers: int
) -> tuple[Path, str | None]:
    """`engine_file`'s GGUF, with the tuned adapter merged on top when one is served (OPENJEV_ADAPTER).

    The adapter must have been trained on that very file: its manifest's sha256 must be the file's.
    """
    base, known = engine_file(packaged, path, cache_dir, workers=workers)
    if tuned is None:
        return base, known
    base_sha256 = known or sha256_of(base)
    manifest = tuned.manifest
    if base_sha256 != manifest.base_sha256:
        raise StartupError(
            f"the adapter in {tuned.folder} was trained on {manifest.base_model} ({manifest.base_file}, sha256 "
            f"{manifest.base_sha256[:12]}…), not on the model served here ({base.name}, sha256 {base_sha256[:12]}…): "
            f"serve it with OPENJEV_MODEL={manifest.base_model}, or train it again on this model"
        )
    merged = tuned_file(base, base_sha256, tuned, cache_dir)
    if not (merged.parent / MANIFEST).is_file():
        _build(manifest.name, base, Manifest(base_sha256, manifest.adapter_sha256, ""), tuned.adapter, merged, workers)
    return _checked(merged)


def served_path(packaged: PackagedModel | None, path: Path, cache_dir: Path, tuned: AdapterFolder | None) -> Path:
    """Where `served_file` will find its GGUF, without building or checking it (instantly)."""
    base = engine_path(packaged, path, cache_dir)
    if tuned is None:
        return base
    return tuned_file(base, tuned.manifest.base_sha256, tuned, cache_dir)


def tuned_file(base: Path, base_sha256: str, tuned: AdapterFolder, cache_dir: Path) -> Path:
    key = hashlib.sha256(f"{base_sha256}:{tuned.manifest.adapter_sha256}:q8_0".encode()).hexdigest()[:16]
    stem = base.name.removesuffix(".gguf").split(".")[0]
    return cache_dir / f"{stem}+{tuned.manifest.name}.{key}" / f"{stem}+{tuned.manifest.name}.Q8_0.gguf"


def _checked(merged: Path) -> tuple[Path, str]:
    manifest = read_manifest(merged.parent, Manifest, "merged model")
    return merged, check_built(merged, manifest.sha256)


def describe_merged(info: ModelInfo, model: PackagedModel) -> ModelInfo:
    """What the API says about a fine-tuned packaged model: its own name, and what it was built from."""
    return msgspec.structs.replace(
        info,
        file_stem=model.name,
        short_stem=model.name,
        quantization="Q8_0",
        description=(
            f"{info.short_stem} with openjev's decision adapter merged (Q8_0 GGUF, {info.architecture}) "
            "on the embedded llama.cpp engine (CPU)."
        ),
    )


def _build(name: str, base: Path, record: Manifest, adapter: Path, merged: Path, workers: int) -> None:
    """Merge `adapter` into `base` as `merged`, with a manifest: `record` with the merged file's sha256."""
    started = time.perf_counter()
    folder = merged.parent
    log.info("merged_model_building", base=base.name, adapter=adapter.name, into=str(folder))
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        requantize(base, work / merged.name, workers=workers, adapter=adapter)
        manifest = msgspec.structs.replace(record, sha256=sha256_of(work / merged.name))
        (work / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(work, folder)
    except OSError as exc:
        raise StartupError(
            f"cannot build the {name} model in {folder.parent}: {exc.strerror or exc}; "
            "set OPENJEV_CACHE_DIR to a writable directory with 2 GB free"
        ) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("merged_model_built", seconds=round(time.perf_counter() - started, 1))
