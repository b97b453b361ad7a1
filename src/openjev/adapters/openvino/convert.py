"""The OpenVINO model of a GGUF: built once from the verified file, kept in the cache, checked at every start.

Steps, in a child process so that their memory is returned to the system before the server loads
anything: the GGUF's k-quant matrices are rewritten as Q8_0 (`requantize.py`, in worker processes),
and OpenVINO GenAI's GGUF reader turns that file into an OpenVINO model, saved as it is built (its
`enable_save_ov_model`). GenAI offers that reader only inside `LLMPipeline`, which would then build
a tokenizer from the GGUF and compile the model for generation (twenty seconds openjev has no use
for): the build hands it an empty tokenizer and a device that does not exist, so the pipeline stops
right after the save with an error naming that device, the one error the build expects. The engine
cuts the language-model head to the last position when it loads the model (`graph.py`).

The result lives in `<cache>/<gguf stem>.<key>.openvino/` with a manifest holding the sha256 of
each file; the key covers the source GGUF's sha256 and the OpenVINO version, so a new model or a
new OpenVINO builds a new one. Every start re-hashes the files against the manifest, as the
packaged GGUF is re-hashed, so a damaged or altered model refuses to load.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from openjev.adapters.embedded.built import MANIFEST, check_built, read_manifest, sha256_of
from openjev.domain.errors import StartupError
from openjev.logs import get_logger

log = get_logger("openjev.openvino")
MODEL_XML = "model.xml"
MODEL_BIN = "model.bin"
_NO_DEVICE = "openjev-save-only"  # stops GenAI's pipeline once it has saved the model (see above)


class Manifest(msgspec.Struct, frozen=True):
    source: str  # the GGUF's file name
    source_sha256: str
    openvino: str
    files: dict[str, str]  # file name -> sha256


def openvino_version() -> str:
    return importlib.metadata.version("openvino")


def model_dir(gguf_path: Path, source_sha256: str, cache_dir: Path) -> Path:
    key = hashlib.sha256(f"{source_sha256}:{openvino_version()}:q8_0".encode()).hexdigest()[:16]
    return cache_dir / f"{gguf_path.stem}.{key}.openvino"


def ensure_model(gguf_path: Path, source_sha256: str, cache_dir: Path, *, workers: int = 1) -> Path:
    """The checked IR (`model.xml`) for the GGUF, built first if the cache has none (half a minute, once,
    on `workers` processes)."""
    target = model_dir(gguf_path, source_sha256, cache_dir)
    if (target / MANIFEST).is_file():
        verify(target)
    else:
        _build(gguf_path, source_sha256, target, workers)
    return target / MODEL_XML


def verify(folder: Path) -> Manifest:
    """Re-hash the IR against its manifest; StartupError naming the folder to delete when they differ."""
    manifest = read_manifest(folder, Manifest, "OpenVINO model")
    for name, expected in manifest.files.items():
        check_built(folder / name, expected)
    return manifest


def _build(gguf_path: Path, source_sha256: str, target: Path, workers: int) -> None:
    started = time.perf_counter()
    log.info("openvino_model_building", source=gguf_path.name, into=str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        command = [sys.executable, "-m", "openjev.adapters.openvino.convert", str(gguf_path), str(work), str(workers)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not (work / MODEL_XML).is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise StartupError(
                f"OpenVINO could not convert {gguf_path.name} (exit {done.returncode}): {' / '.join(tail)}; "
                "OPENJEV_ENGINE=llama.cpp serves it with llama.cpp instead"
            )
        files = {name: sha256_of(work / name) for name in (MODEL_XML, MODEL_BIN)}
        manifest = Manifest(
            source=gguf_path.name, source_sha256=source_sha256, openvino=openvino_version(), files=files
        )
        (work / MANIFEST).write_bytes(msgspec.json.encode(manifest))
        if target.exists():
            shutil.rmtree(target)
        os.replace(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("openvino_model_built", seconds=round(time.perf_counter() - started, 1))


def convert(gguf_path: Path, out: Path, workers: int) -> None:
    """The child process's work: the Q8_0 GGUF, then OpenVINO GenAI's model of it saved in `out`."""
    import openvino_genai  # type: ignore[import-untyped]  # the child alone imports it

    from openjev.adapters.embedded.requantize import requantize

    staging = out / "staging"
    (staging / "no-tokenizer").mkdir(parents=True)
    requantized = staging / "model.gguf"
    requantize(gguf_path, requantized, workers=workers)
    try:  # saves staging/openvino_model.{xml,bin}, then fails to compile for `_NO_DEVICE`
        openvino_genai.LLMPipeline(
            str(requantized),
            openvino_genai.Tokenizer(str(staging / "no-tokenizer")),
            _NO_DEVICE,
            enable_save_ov_model=True,
            ATTENTION_BACKEND="SDPA",
        )
    except RuntimeError as exc:
        if _NO_DEVICE not in str(exc):  # any other error (a failed save among them) is the build's
            raise
    for name, built in ((MODEL_XML, "openvino_model.xml"), (MODEL_BIN, "openvino_model.bin")):
        os.replace(staging / built, out / name)
    shutil.rmtree(staging)


if __name__ == "__main__":
    convert(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
