"""Giving back the model file's pages the engine has stopped reading.

OpenVINO maps the model's weights file (`model.bin`) and, at the first call, repacks each matrix into
memory of its own; from then on it reads the mapped file only for the embedding rows of the tokens a
call brings. The pages the repacking read stay mapped, so the worker's resident memory counts the
whole file (1.5 GiB of 3.7 GiB on the default model) although almost none of it is read again.
`release()` unmaps those pages from the process (`madvise(MADV_DONTNEED)` on its read-only, shared
file mappings): the kernel keeps them in its page cache, shared and reclaimable, and the few a later
call reads are mapped back on access, so what a call computes does not change.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import cast

from openjev.logs import get_logger

log = get_logger("openjev.openvino")
MADV_DONTNEED = 4  # Linux


class FilePages:
    """The process's mappings of one file, whose resident pages `release()` gives back (Linux; a no-op
    elsewhere, or when the C library cannot be reached)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path.resolve())
        self._madvise = _madvise()

    def ranges(self) -> list[tuple[int, int]]:
        """The address ranges mapping the file now (`/proc/self/maps`), read-only ones only."""
        found = []
        try:
            lines = Path("/proc/self/maps").read_text().splitlines()
        except OSError:
            return []
        for line in lines:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5] == self.path and "w" not in fields[1]:
                start, end = (int(address, 16) for address in fields[0].split("-"))
                found.append((start, end))
        return found

    def release(self) -> int:
        """Give back the file's resident pages; return the bytes of mapping covered (0 when unsupported)."""
        if self._madvise is None:
            return 0
        covered = 0
        for start, end in self.ranges():
            if self._madvise(start, end - start, MADV_DONTNEED) == 0:
                covered += end - start
            else:
                log.warning("madvise_failed", path=self.path, errno=ctypes.get_errno())
                return covered
        return covered


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return cast(Callable[[int, int, int], int], madvise)
