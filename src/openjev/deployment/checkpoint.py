"""The production checkpoint in the Modal Volume: fetched once per pinned commit, then served offline.

`prefetch` runs on a CPU container (`modal run modal_app.py::prefetch`): it downloads the checkpoint
at its commit into the Hugging Face cache on the Volume, compares its tokenizer and chat template
with the base model's at the base's pinned commit (`tokenizer_parity`), and writes a record. A GPU
container starts only when that record says the snapshot is complete and the two agree
(`require_checkpoint`); SGLang and the tokenizer then load the snapshot folder by path, with the
Hub switched off, so no boot depends on the Hub, on `main`, or on another container's download.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

COMMIT = re.compile(r"[0-9a-f]{40}")
# What `prefetch` would have to do again: the message a GPU container fails its start with.
PREFETCH_HINT = "run `uv run --no-default-groups --group deploy modal run modal_app.py::prefetch` (docs/modal.md)"


class CheckpointError(RuntimeError):
    """The Volume cannot serve this checkpoint yet, or its tokenizer differs from the base model's."""


@dataclass(frozen=True)
class Checkpoint:
    """The served repository and the base model its tokenizer must match, each at a commit."""

    model: str
    revision: str
    base_model: str
    base_revision: str

    def __post_init__(self) -> None:
        for name, value in (("revision", self.revision), ("base revision", self.base_revision)):
            if not COMMIT.fullmatch(value):
                raise CheckpointError(
                    f"the {name} must be a full 40-character commit id (a branch or tag moves), got {value!r}"
                )

    def snapshot_dir(self, hub_cache: Path) -> Path:
        """Where huggingface_hub keeps this commit's files (`models--OWNER--NAME/snapshots/COMMIT`)."""
        return hub_cache / f"models--{self.model.replace('/', '--')}" / "snapshots" / self.revision

    def record_path(self, records: Path) -> Path:
        return records / f"{self.model.replace('/', '--')}@{self.revision}.json"


class CheckpointRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What `prefetch` found, kept next to the snapshot in the Volume."""

    model: str
    revision: str
    base_model: str
    base_revision: str
    snapshot: str
    files: int
    bytes: int
    tokenizer_matches: bool
    differences: list[str]
    checked_at: str


Download = Callable[[str, str], Path]  # (repository, commit) -> local folder


def prefetch(
    checkpoint: Checkpoint,
    *,
    hub_cache: Path,
    records: Path,
    download_snapshot: Download,
    download_tokenizer: Download,
    force: bool = False,
) -> CheckpointRecord:
    """Fetch and check the checkpoint once; a later call returns the record it wrote (unless `force`).

    Raises CheckpointError when the tokenizers differ, after recording it, so GPU containers refuse too.
    """
    from openjev.adapters.hf_codec import HFCodec
    from openjev.deployment.tokenizer_parity import differences

    path = checkpoint.record_path(records)
    if path.is_file() and not force:
        record = read_record(path)
        if record.tokenizer_matches:
            return record
    snapshot = download_snapshot(checkpoint.model, checkpoint.revision)
    expected = checkpoint.snapshot_dir(hub_cache)
    if snapshot.resolve() != expected.resolve():
        raise CheckpointError(f"{checkpoint.model} at {checkpoint.revision} landed in {snapshot}, not {expected}")
    base = download_tokenizer(checkpoint.base_model, checkpoint.base_revision)
    found = differences(HFCodec.load(str(snapshot)), HFCodec.load(str(base)))
    files = [p for p in snapshot.rglob("*") if p.is_file()]
    record = CheckpointRecord(
        model=checkpoint.model,
        revision=checkpoint.revision,
        base_model=checkpoint.base_model,
        base_revision=checkpoint.base_revision,
        snapshot=str(snapshot),
        files=len(files),
        bytes=sum(p.stat().st_size for p in files),
        tokenizer_matches=not found,
        differences=found,
        checked_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _write_atomically(path, msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n")
    if found:
        raise CheckpointError(_mismatch(record))
    return record


def require_checkpoint(checkpoint: Checkpoint, *, hub_cache: Path, records: Path) -> Path:
    """The snapshot folder to serve, or CheckpointError saying why a GPU container must not start."""
    path = checkpoint.record_path(records)
    if not path.is_file():
        raise CheckpointError(
            f"the Volume has no checked copy of {checkpoint.model} at {checkpoint.revision}: {PREFETCH_HINT}"
        )
    record = read_record(path)
    if (record.base_model, record.base_revision) != (checkpoint.base_model, checkpoint.base_revision):
        raise CheckpointError(
            f"{path} compared the tokenizer with {record.base_model} at {record.base_revision}, not with "
            f"{checkpoint.base_model} at {checkpoint.base_revision}: {PREFETCH_HINT} with --force"
        )
    if not record.tokenizer_matches:
        raise CheckpointError(_mismatch(record))
    snapshot = checkpoint.snapshot_dir(hub_cache)
    if not (snapshot / "config.json").is_file() or not (snapshot / "tokenizer.json").is_file():
        raise CheckpointError(f"{snapshot} is incomplete although {path} exists: {PREFETCH_HINT} with --force")
    return snapshot


def read_record(path: Path) -> CheckpointRecord:
    try:
        return msgspec.json.decode(path.read_bytes(), type=CheckpointRecord)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CheckpointError(f"cannot read {path} ({exc}): {PREFETCH_HINT} with --force") from None


def hub_snapshot(hub_cache: Path) -> Download:
    """Download a whole repository at a commit into `hub_cache` (huggingface_hub's layout)."""

    def download(repo: str, revision: str) -> Path:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, revision=revision, cache_dir=hub_cache))

    return download


def hub_tokenizer(hub_cache: Path) -> Download:
    """Download only a repository's tokenizer files at a commit (the base model's weights are not needed)."""

    def download(repo: str, revision: str) -> Path:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError

        from openjev.adapters.hf_codec import CONFIG_FILE, TEMPLATE_FILE, TOKENIZER_FILE

        folder = Path(hf_hub_download(repo, TOKENIZER_FILE, revision=revision, cache_dir=hub_cache)).parent
        hf_hub_download(repo, CONFIG_FILE, revision=revision, cache_dir=hub_cache)
        try:
            hf_hub_download(repo, TEMPLATE_FILE, revision=revision, cache_dir=hub_cache)
        except EntryNotFoundError:
            pass  # the template may live in tokenizer_config.json instead
        return folder

    return download


def _mismatch(record: CheckpointRecord) -> str:
    listed = "; ".join(record.differences[:5]) + (" ..." if len(record.differences) > 5 else "")
    return (
        f"the tokenizer or chat template of {record.model} at {record.revision} gives other token ids than "
        f"{record.base_model} at {record.base_revision}: {listed}. Deploy a revision whose tokenizer and "
        "template match the base model's (OPENJEV_REVISION, docs/modal.md)"
    )


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
