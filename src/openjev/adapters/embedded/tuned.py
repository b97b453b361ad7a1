"""A tuned adapter's folder, as `openjev tune` writes it and the embedded backend serves it (OPENJEV_ADAPTER).

The folder holds `adapter.gguf`, a LoRA adapter in llama.cpp's GGUF layout (the one openjev merges,
and llama.cpp loads as it is), `manifest.json` (the sha256 of the adapter, of the model file it was
trained on and of the training data, the settings and the measured figures) and `report.json`
(each evaluation item's answer after training). The server refuses a folder whose adapter does not
match its manifest, or that was trained on another model file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import msgspec

from openjev.adapters.embedded.built import sha256_of
from openjev.domain.errors import StartupError

ADAPTER = "adapter.gguf"
MANIFEST = "manifest.json"
REPORT = "report.json"
FORMAT = 1
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"  # it becomes part of the model id and of a cache path
AdapterName = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN)]


def adapter_name(text: str) -> str:
    """`text` as an adapter name: characters other than letters, digits, `.`, `_` and `-` become `-`."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", text).lstrip("._-")[:64]
    return name or "adapter"


class Figures(msgspec.Struct, frozen=True):
    """Accuracy on the evaluation items (the server's answer: its option orders combined), the share
    of them answered the same in the order sent and its reverse alone, and the mean loss (nats)."""

    accuracy: float
    unchanged_when_reversed: float | None
    loss: float
    items: int


class TrainingRecord(msgspec.Struct, frozen=True, kw_only=True):
    rank: int
    alpha: float
    layers: int
    learning_rate: float
    steps: int
    steps_planned: int
    seed: int
    dtype: str
    train_items: int
    eval_items: int
    eval_source: str  # the --eval file, or how the held-out slice was drawn
    seconds: float
    stopped_by: str  # "steps", "time" or "interrupted"


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    format: int = FORMAT
    name: AdapterName  # what the server calls the adapted model: "<base model>+<name>"
    base_model: str  # the OPENJEV_MODEL it was trained on
    base_file: str
    base_sha256: str  # the GGUF file the server loads for that model
    adapter_sha256: str
    data_sha256: str
    training: TrainingRecord
    before: Figures
    after: Figures
    created: str  # ISO 8601, UTC
    openjev_version: str


class AdapterFolder(msgspec.Struct, frozen=True):
    folder: Path
    manifest: Manifest

    @property
    def adapter(self) -> Path:
        return self.folder / ADAPTER


def read_folder(folder: Path) -> AdapterFolder:
    """A tuned adapter's folder, its adapter file checked against the manifest; StartupError saying what is wrong."""
    if not folder.is_dir():
        raise StartupError(f"OPENJEV_ADAPTER={folder}: no such folder (it is the --out folder of `openjev tune`)")
    try:
        manifest = msgspec.json.decode((folder / MANIFEST).read_bytes(), type=Manifest)
    except OSError:
        raise StartupError(
            f"OPENJEV_ADAPTER={folder} has no {MANIFEST}: it is not a finished `openjev tune` output "
            "(an interrupted run continues with `openjev tune … --resume`)"
        ) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise StartupError(f"{folder / MANIFEST} is not a manifest openjev wrote: {exc}") from None
    if manifest.format != FORMAT:
        raise StartupError(f"{folder / MANIFEST} has format {manifest.format}; this openjev reads format {FORMAT}")
    actual = sha256_of(folder / ADAPTER)
    if actual != manifest.adapter_sha256:
        raise StartupError(
            f"{folder / ADAPTER} has sha256 {actual}, but its manifest says {manifest.adapter_sha256}: "
            "the file was changed or damaged; train it again"
        )
    return AdapterFolder(folder, manifest)
