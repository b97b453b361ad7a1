"""The checkpoint's place in the Volume and the record a GPU container starts from (no tokenizer needed)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from huggingface_hub.file_download import repo_folder_name

from openjev.deployment.checkpoint import Checkpoint, CheckpointError, CheckpointRecord, require_checkpoint

CHECKPOINT = Checkpoint("nvidia/Qwen3.6-35B-A3B-NVFP4", "1" * 40, "Qwen/Qwen3.6-35B-A3B", "2" * 40)


def write_record(records: Path, **changes: object) -> Path:
    fields: dict[str, object] = {
        "model": CHECKPOINT.model,
        "revision": CHECKPOINT.revision,
        "base_model": CHECKPOINT.base_model,
        "base_revision": CHECKPOINT.base_revision,
        "snapshot": "/somewhere",
        "files": 3,
        "bytes": 100,
        "tokenizer_matches": True,
        "differences": [],
        "checked_at": "2026-11-01T00:00:00+00:00",
        **changes,
    }
    path = CHECKPOINT.record_path(records)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(msgspec.json.encode(CheckpointRecord(**fields)))  # type: ignore[arg-type]
    return path


def make_snapshot(hub: Path) -> Path:
    snapshot = CHECKPOINT.snapshot_dir(hub)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot / "tokenizer.json").write_text("{}")
    return snapshot


def test_the_snapshot_folder_is_huggingface_hubs_layout(tmp_path: Path) -> None:
    folder = repo_folder_name(repo_id=CHECKPOINT.model, repo_type="model")
    assert CHECKPOINT.snapshot_dir(tmp_path) == tmp_path / folder / "snapshots" / CHECKPOINT.revision


@pytest.mark.parametrize("revision", ["main", "491c2f1", "V" * 40, "refs/pr/1"])
def test_only_a_full_commit_id_pins_anything(revision: str) -> None:
    with pytest.raises(CheckpointError, match="full 40-character commit id"):
        Checkpoint(CHECKPOINT.model, revision, CHECKPOINT.base_model, CHECKPOINT.base_revision)


def test_a_start_without_a_record_names_the_prefetch_command(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "hub")  # files alone (an interrupted download) are not enough
    with pytest.raises(CheckpointError, match=r"no checked copy .* modal run modal_app\.py::prefetch"):
        require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=tmp_path / "records")


def test_a_recorded_mismatch_stops_every_start(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "hub")
    write_record(tmp_path / "records", tokenizer_matches=False, differences=["labels: 255 ids ..."])
    with pytest.raises(CheckpointError, match=r"gives other token ids than Qwen/Qwen3\.6-35B-A3B .*labels: 255 ids"):
        require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=tmp_path / "records")


def test_a_record_against_another_base_revision_is_not_trusted(tmp_path: Path) -> None:
    make_snapshot(tmp_path / "hub")
    write_record(tmp_path / "records", base_revision="3" * 40)
    with pytest.raises(CheckpointError, match=r"compared the tokenizer with .* at 3333"):
        require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=tmp_path / "records")


def test_a_good_record_serves_the_snapshot_and_a_missing_one_is_named(tmp_path: Path) -> None:
    records = tmp_path / "records"
    write_record(records)
    with pytest.raises(CheckpointError, match="is incomplete although"):
        require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=records)
    snapshot = make_snapshot(tmp_path / "hub")
    assert require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=records) == snapshot
    CHECKPOINT.record_path(records).write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot read"):
        require_checkpoint(CHECKPOINT, hub_cache=tmp_path / "hub", records=records)
