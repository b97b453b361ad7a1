"""Prefetch and the start-up check with real tokenizer folders: the Qwen3 tokenizer, and altered copies.

Nothing is downloaded: the two download steps are replaced by copies of the local folder into a
Hugging Face cache layout, the way `snapshot_download` and `hf_hub_download` would lay them out.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from openjev.adapters.hf_codec import HFCodec
from openjev.deployment.checkpoint import (
    Checkpoint,
    CheckpointError,
    CheckpointRecord,
    prefetch,
    read_record,
    require_checkpoint,
)
from openjev.deployment.tokenizer_parity import CASES, differences, prompt_ids
from tests.assets import qwen3_tokenizer_dir

pytestmark = pytest.mark.integration

CHECKPOINT = Checkpoint("nvidia/Qwen3.6-35B-A3B-NVFP4", "1" * 40, "Qwen/Qwen3.6-35B-A3B", "2" * 40)
Alter = Callable[[Path], None]


def same(folder: Path) -> None:
    """A re-save that changes no id: the same tokenizer config written with other JSON formatting."""
    config = folder / "tokenizer_config.json"
    config.write_text(json.dumps(json.loads(config.read_text()), indent=4, sort_keys=True))


def template_newline(folder: Path) -> None:
    """One newline fewer in the empty thinking block the template writes before every answer."""
    config = folder / "tokenizer_config.json"
    data = json.loads(config.read_text())
    assert "'<think>\\n\\n</think>\\n\\n'" in data["chat_template"]
    data["chat_template"] = data["chat_template"].replace("'<think>\\n\\n</think>\\n\\n'", "'<think>\\n</think>\\n\\n'")
    config.write_text(json.dumps(data))


def swapped_letters(folder: Path) -> None:
    """The vocabulary ids of " A" and " B" exchanged: every choice answer would read the wrong label."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab = data["model"]["vocab"]
    vocab["ĠA"], vocab["ĠB"] = vocab["ĠB"], vocab["ĠA"]
    path.write_text(json.dumps(data))


class Hub:
    """A local stand-in for the two downloads, counting them."""

    def __init__(self, cache: Path, alter: Alter) -> None:
        self.cache, self.alter, self.calls = cache, alter, 0

    def snapshot(self, repo: str, revision: str) -> Path:
        self.calls += 1
        folder = self.cache / f"models--{repo.replace('/', '--')}" / "snapshots" / revision
        shutil.copytree(qwen3_tokenizer_dir(), folder, dirs_exist_ok=True)
        (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"]}))
        self.alter(folder)
        return folder

    def tokenizer(self, repo: str, revision: str) -> Path:
        self.calls += 1
        folder = self.cache / f"models--{repo.replace('/', '--')}" / "snapshots" / revision
        shutil.copytree(qwen3_tokenizer_dir(), folder, dirs_exist_ok=True)
        return folder


def run(hub: Hub, records: Path, force: bool = False) -> CheckpointRecord:
    return prefetch(
        CHECKPOINT,
        hub_cache=hub.cache,
        records=records,
        download_snapshot=hub.snapshot,
        download_tokenizer=hub.tokenizer,
        force=force,
    )


def test_a_matching_tokenizer_is_fetched_once_then_served(tmp_path: Path) -> None:
    hub, records = Hub(tmp_path / "hub", same), tmp_path / "records"
    record = run(hub, records)
    saved = read_record(CHECKPOINT.record_path(records))
    assert saved == record and saved.tokenizer_matches and saved.differences == []
    assert saved.files == 3 and saved.bytes > 1_000_000  # tokenizer.json, its config, config.json
    assert hub.calls == 2
    assert run(hub, records) == saved and hub.calls == 2  # once per pinned commit: no download again
    assert require_checkpoint(CHECKPOINT, hub_cache=hub.cache, records=records) == CHECKPOINT.snapshot_dir(hub.cache)
    run(hub, records, force=True)
    assert hub.calls == 4


@pytest.mark.parametrize(
    ("alter", "expected"),
    [(template_newline, "spec_example/refund"), (swapped_letters, "labels")],
)
def test_an_altered_tokenizer_or_template_stops_prefetch_and_every_start(
    tmp_path: Path, alter: Alter, expected: str
) -> None:
    hub, records = Hub(tmp_path / "hub", alter), tmp_path / "records"
    with pytest.raises(CheckpointError, match=r"gives other token ids than Qwen/Qwen3\.6-35B-A3B") as refused:
        run(hub, records)
    assert expected in str(refused.value)
    saved = read_record(CHECKPOINT.record_path(records))
    assert not saved.tokenizer_matches
    assert any(line.startswith(expected + ":") for line in saved.differences), saved.differences
    with pytest.raises(CheckpointError, match="gives other token ids"):
        require_checkpoint(CHECKPOINT, hub_cache=hub.cache, records=records)


@pytest.fixture(scope="module")
def reference() -> HFCodec:
    return HFCodec.load(str(qwen3_tokenizer_dir()))


def test_the_comparison_covers_labels_and_every_question_of_each_case(reference: HFCodec) -> None:
    codec = reference
    named = prompt_ids(codec)
    assert len(named["labels"]) == 255
    for case, body in CASES.items():
        assert len(named[f"{case}/prefix"]) > 10
        assert {f"{case}/{qid}" for qid in body["questions"]} <= set(named)
    assert set(CASES) == {"spec_example", "transcript", "json_state"}
    assert differences(codec, codec) == []


def test_a_difference_is_located_and_shown(tmp_path: Path, reference: HFCodec) -> None:
    altered = tmp_path / "altered"
    shutil.copytree(qwen3_tokenizer_dir(), altered)
    template_newline(altered)
    found = differences(HFCodec.load(str(altered)), reference)
    tails = [line for line in found if line.startswith("spec_example/refund:")]
    assert tails and "first difference at" in tails[0] and "</think>" in tails[0]
    assert not any(line.startswith(("labels:", "spec_example/prefix:")) for line in found)  # only the tails moved
