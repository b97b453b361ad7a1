"""Files openjev builds once into its cache (the merged fine-tune, the OpenVINO model) and checks at
every start: a folder whose manifest records the sha256 of what was built, re-hashed before use."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TypeVar

import msgspec

from openjev.domain.errors import StartupError

MANIFEST = "manifest.json"
_CHUNK = 8 * 1024 * 1024
M = TypeVar("M", bound=msgspec.Struct)


def read_manifest(folder: Path, kind: type[M], what: str) -> M:
    """`folder`'s manifest; StartupError naming the folder to delete when it is missing or unreadable."""
    try:
        return msgspec.json.decode((folder / MANIFEST).read_bytes(), type=kind)
    except (OSError, msgspec.DecodeError) as exc:
        raise StartupError(f"the {what} in {folder} has no readable manifest ({exc}): delete the folder") from None


def check_built(path: Path, expected: str) -> str:
    """Re-hash a built file; StartupError naming its folder to delete when it is not what was built."""
    actual = sha256_of(path)
    if actual != expected:
        raise StartupError(
            f"{path} has sha256 {actual}, not the {expected} it was built with: it was damaged or "
            f"changed; delete {path.parent} and start again to rebuild it"
        )
    return actual


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(_CHUNK):
                digest.update(block)
    except OSError as exc:
        raise StartupError(f"cannot read {path}: {exc.strerror or exc}") from None
    return digest.hexdigest()
