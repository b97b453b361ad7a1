"""The pages of a mapped file are given back to the kernel, and read back unchanged on access."""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

import pytest

from openjev.adapters.openvino.file_pages import FilePages
from tests.openvino.mapped import resident

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc are Linux's")


def test_a_mapped_file_s_pages_are_released_and_read_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    data = bytes(range(256)) * (16 * 4096)  # 16 MiB
    path.write_bytes(data)
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert mapped[:] == data  # every page read
        assert resident(path) >= len(data) * 0.9
        assert FilePages(path).release() >= len(data)
        assert resident(path) <= len(data) * 0.1
        assert mapped[:] == data


def test_a_file_not_mapped_is_left_alone(tmp_path: Path) -> None:
    assert FilePages(tmp_path / "absent.bin").release() == 0
