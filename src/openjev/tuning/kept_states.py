"""The states read below the adapted layers, kept on disk in `.partial/states/` as they are read.

Reading the unchanged layers is the slow part of a run on a large model (hours for a few hundred long
items on a small CPU), and the states do not change while training does. So they are written to the
run's `.partial/` folder every half minute of reading and when reading stops: a run stopped while
reading (Ctrl-C, a closed terminal, a machine that went down) reads only what is left on `--resume`,
and a run stopped while training reads nothing again. A chunk is used only for items whose tokens are
the ones it was read for, by the reader it was read with (engine, layer, dtype, model); anything else
is read again.
"""

from __future__ import annotations

import hashlib
import io
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import torch

from openjev.tuning.atomic_file import write_atomically
from openjev.tuning.examples import TrainingItem
from openjev.tuning.frozen import FrozenItem

FOLDER = "states"  # in the run's `.partial/`
READER = "reader.json"


class ReaderKey(msgspec.Struct, frozen=True):
    """What the kept states were read with: states read otherwise differ, if only in their last bits."""

    engine: str  # "openvino" or "torch"
    first_adapted: int
    dtype: str
    base_sha256: str
    int8_activations: bool


def item_digest(item: TrainingItem) -> str:
    """The sha256 of the tokens an item's states are read from (its prefix and each reading's suffix)."""
    tokens = [list(item.prefix), *(list(reading.suffix) for reading in item.readings)]
    return hashlib.sha256(msgspec.json.encode(tokens)).hexdigest()


class KeptStates:
    """Chunks `<set>-<first item>.pt` of one set's items, in `folder`, for the reader `key`."""

    def __init__(self, folder: Path, key: ReaderKey) -> None:
        self.folder = folder
        self.discarded = 0  # chunks dropped at the start because another reader made them
        marker = folder / READER
        if folder.is_dir() and _key_in(marker) != key:
            self.discarded = len(list(folder.glob("*.pt")))
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(marker, msgspec.json.encode(key))

    def any(self) -> bool:
        return any(self.folder.glob("*.pt"))

    def load(self, name: str, items: Sequence[TrainingItem]) -> list[FrozenItem]:
        """The kept states of `items`' first items, in order. The chunks from the first one that does not
        fit `items` as they are now (or cannot be read) on are deleted: those items are read again."""
        chunks = sorted(self.folder.glob(f"{name}-*.pt"), key=_first_item)
        frozen: list[FrozenItem] = []
        for index, chunk in enumerate(chunks):
            kept = _read(chunk) if _first_item(chunk) == len(frozen) else None
            if kept is None or not _fits(kept["digests"], items[len(frozen) :]):
                for stale in chunks[index:]:
                    stale.unlink()
                break
            frozen += map(FrozenItem, kept["tails"], map(tuple, kept["suffixes"]))
        return frozen

    def keep(self, name: str, start: int, items: Sequence[TrainingItem], frozen: Sequence[FrozenItem]) -> None:
        """Write the states of `items` (the set's items from `start` on) as one chunk."""
        if not frozen:
            return
        chunk = {
            "digests": [item_digest(item) for item in items],
            "tails": [f.tail for f in frozen],
            "suffixes": [list(f.suffixes) for f in frozen],
        }
        data = io.BytesIO()
        torch.save(chunk, data)
        write_atomically(self.folder / f"{name}-{start}.pt", data.getvalue())


def _key_in(marker: Path) -> ReaderKey | None:
    try:
        return msgspec.json.decode(marker.read_bytes(), type=ReaderKey)
    except (OSError, msgspec.DecodeError):
        return None


def _fits(digests: list[str], items: Sequence[TrainingItem]) -> bool:
    return 0 < len(digests) <= len(items) and all(d == item_digest(i) for d, i in zip(digests, items, strict=False))


def _first_item(chunk: Path) -> int:
    return int(chunk.stem.rsplit("-", 1)[1])


def _read(chunk: Path) -> dict[str, Any] | None:
    """A chunk's content, or None when it cannot be read (cut short by a machine that went down)."""
    try:
        kept: dict[str, Any] = torch.load(chunk, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError):
        return None
    return kept
