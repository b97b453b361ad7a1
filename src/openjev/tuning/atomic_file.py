"""Writing a file whole or not at all, with nothing heavy imported (`openjev generate` runs without numpy)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """`data` at `path`, whole or not at all (a temporary file beside it, renamed over it)."""
    os.replace(_written_beside(path, data), path)


def create_atomically(path: Path, data: bytes) -> None:
    """`data` at `path`, a new file, whole or not at all; `FileExistsError` if `path` exists, even when
    another process creates it meanwhile (the temporary file is hard-linked, which never replaces)."""
    temporary = _written_beside(path, data)
    try:
        os.link(temporary, path)
    finally:
        os.unlink(temporary)


def _written_beside(path: Path, data: bytes) -> str:
    """A temporary file in `path`'s folder holding `data`, with an ordinary new file's permissions."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as out:
        try:
            out.write(data)
        except BaseException:
            os.unlink(out.name)
            raise
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out.name, 0o666 & ~umask)  # as an ordinary new file, not the temporary file's 0600
    return out.name
