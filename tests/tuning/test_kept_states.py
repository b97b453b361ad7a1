"""The states read below the adapted layers are kept on disk as they are read: a run stopped while reading
reads only the rest when resumed, and states read otherwise (another reader, other items) are read again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest
import torch

from openjev.quality.dataset import DatasetError
from openjev.tuning.decoder import KV
from openjev.tuning.examples import Reading, TrainingItem
from openjev.tuning.frozen import FrozenSet, HeadReader, freeze, shared_head
from openjev.tuning.kept_states import KeptStates, ReaderKey
from openjev.tuning.lower import TorchLayers
from openjev.tuning.session import check_disk
from tests.tuning.test_frozen import SHAPE, items, random_decoder

pytestmark = pytest.mark.needs_torch

KEY = ReaderKey(engine="torch", first_adapted=2, dtype="float32", base_sha256="ab" * 32, int8_activations=False)


class CountingLayers(TorchLayers):
    """The decoder's lower blocks, counting the reads, and stopping (as Ctrl-C does) at read `stop_at`."""

    def __init__(self, stop_at: int | None = None) -> None:
        super().__init__(random_decoder(2))
        self.reads = 0
        self.stop_at = stop_at

    def read(self, token_ids: Sequence[int], past: list[KV] | None) -> tuple[torch.Tensor, list[KV]]:
        self.reads += 1
        if self.reads == self.stop_at:
            raise KeyboardInterrupt
        return super().read(token_ids, past)


def frozen_with(layers: CountingLayers, train: list[TrainingItem], folder: Path, key: ReaderKey = KEY) -> FrozenSet:
    reader = HeadReader(layers, shared_head(train), SHAPE.width, torch.float32)
    return freeze(train, reader, "items", lambda _: None, KeptStates(folder, key), "train")


def same(one: FrozenSet, two: FrozenSet) -> bool:
    return all(
        torch.equal(one.states(i, r), two.states(i, r))
        for i, item in enumerate(one.items)
        for r in range(len(item.readings))
    )


def test_a_run_stopped_while_reading_reads_only_the_rest(tmp_path: Path) -> None:
    train = items()
    whole = freeze(train, HeadReader(CountingLayers(), shared_head(train), SHAPE.width, torch.float32), "items", print)
    with pytest.raises(KeyboardInterrupt):
        frozen_with(CountingLayers(stop_at=1 + 3 + 2), train, tmp_path)  # the head, item 0 (3 reads), then stop
    resumed_layers = CountingLayers()
    resumed = frozen_with(resumed_layers, train, tmp_path)
    assert resumed_layers.reads == 1 + 3 + 3  # the head again, items 1 and 2: item 0 was kept
    assert same(resumed, whole)
    again = CountingLayers()
    assert same(frozen_with(again, train, tmp_path), whole) and again.reads == 1  # everything kept: the head alone


def test_states_read_otherwise_are_read_again(tmp_path: Path) -> None:
    train = items()
    frozen_with(CountingLayers(), train, tmp_path)
    other_engine = KeptStates(tmp_path, msgspec.structs.replace(KEY, engine="openvino"))
    assert other_engine.discarded == 1 and other_engine.load("train", train) == []

    frozen_with(CountingLayers(), train, tmp_path)
    changed = [train[0], TrainingItem("i1", 0, train[1].prefix, (Reading((7,), (30, 31), (0, 1)),)), train[2]]
    layers = CountingLayers()
    assert same(frozen_with(layers, changed, tmp_path), frozen_with(CountingLayers(), changed, tmp_path / "fresh"))
    assert layers.reads == 1 + 3 + 2 + 3  # the chunk holding the changed item was read again whole


def test_a_damaged_chunk_is_read_again(tmp_path: Path) -> None:
    train = items()
    frozen_with(CountingLayers(), train, tmp_path)
    (chunk,) = tmp_path.glob("train-*.pt")
    chunk.write_bytes(chunk.read_bytes()[:100])
    layers = CountingLayers()
    frozen_with(layers, train, tmp_path)
    assert layers.reads == 1 + 3 * 3


def test_a_run_whose_states_would_not_fit_on_the_disk_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    free = 2 * 2**30
    monkeypatch.setattr("shutil.disk_usage", lambda _: type("Usage", (), {"free": free})())
    check_disk(tmp_path / "out", 2**30)
    with pytest.raises(DatasetError, match=r"keeps about 3.2 GiB there .* 2.0 GiB free: free some space"):
        check_disk(tmp_path / "out", 3 * 2**30)
