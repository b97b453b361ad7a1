"""Writing a file whole or not at all, with nothing heavy imported (`openjev generate` runs without numpy)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """`data` at `path`, whole or not at all (a temporary file beside it, renamed over it)."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as out:
        try:
            out.write(data)
        except BaseException:
            os.unlink(out.name)
            raise
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out.name, 0o666 & ~umask)  # as an ordinary new file, not the temporary file's 0600
    os.replace(out.name, path)
