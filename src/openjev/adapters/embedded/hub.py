"""GGUF models by name from the Hugging Face Hub, for the embedded backend (docs/operations.md).

`OPENJEV_MODEL` takes the forms llama.cpp and Ollama users already type:

    hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M     llama.cpp's `-hf owner/repo:quant`, with an `hf:` prefix
    hf.co/Qwen/Qwen2.5-1.5B-Instruct-GGUF:q4_k_m  Ollama's `hf.co/owner/repo:quant`
    hf:owner/repo/path/model-q8_0.gguf            one exact file of the repository

The quantization is matched without regard to case; without one, `Q4_K_M` is taken when the
repository has it, else its first GGUF file, as llama.cpp does. Vision projector files (`mmproj`)
are never picked. A model split into `-00001-of-0000N.gguf` parts downloads every part.

Files go through `huggingface_hub` into its own cache (`HF_HOME`, `HF_HUB_CACHE`), once; a
transfer cut by the network resumes where it stopped (HTTP Range), and a download that fails
leaves nothing half-written in the cache. `HF_TOKEN` reaches gated and private repositories,
`HF_HUB_OFFLINE=1` uses the cache only, `HF_ENDPOINT` names a mirror. On a terminal the library
draws its progress bar; otherwise progress goes to the JSON log. Every failure is a StartupError
that names the reference and says what to do.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from openjev.domain.errors import StartupError
from openjev.logs import get_logger

log = get_logger("openjev.hub")
PREFIXES = ("hf:", "hf.co/", "huggingface.co/", "https://huggingface.co/")
DEFAULT_QUANT = "Q4_K_M"
GGUF_MAGIC = b"GGUF"
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
_PROGRESS_STEP = 0.1  # log a progress line every tenth of the file …
_PROGRESS_SECONDS = 15.0  # … or this often, whichever comes first


class HubReference(msgspec.Struct, frozen=True):
    text: str  # as the user wrote it
    repo_id: str
    quant: str | None = None
    file: str | None = None


def parse_reference(setting: str) -> HubReference | None:
    """The Hub reference in `setting`, None when it is not one; StartupError when it is malformed."""
    rest = next((setting[len(p) :] for p in PREFIXES if setting.lower().startswith(p)), None)
    if rest is None:
        return None
    path, _, quant = rest.partition(":")
    parts = [p for p in path.strip("/").split("/")]
    if len(parts) < 2 or not all(parts) or (quant == "" and rest.endswith(":")):
        raise StartupError(
            f"OPENJEV_MODEL={setting!r}: expected hf:OWNER/REPO[:QUANT] or hf:OWNER/REPO/FILE.gguf, "
            "e.g. hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:Q4_K_M"
        )
    file = "/".join(parts[2:]) or None
    if file is not None and (quant or not file.lower().endswith(".gguf")):
        raise StartupError(f"OPENJEV_MODEL={setting!r}: name either a quantization or a .gguf file, not both")
    return HubReference(text=setting, repo_id="/".join(parts[:2]), quant=quant or None, file=file)


def choose_files(ref: HubReference, files: Sequence[str]) -> list[str]:
    """The repository files to download for `ref`: one GGUF, or every part of a split one (first part first)."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf") and "mmproj" not in f.lower())
    if not ggufs:
        raise StartupError(f"OPENJEV_MODEL={ref.text!r}: {ref.repo_id} has no GGUF file; pick a GGUF repository")
    if ref.file is not None:
        if ref.file not in files:
            raise StartupError(f"OPENJEV_MODEL={ref.text!r}: {ref.repo_id} has no file {ref.file}; it has {ggufs}")
        chosen = ref.file
    else:
        matches = [f for f in ggufs if _has_quant(f, ref.quant or DEFAULT_QUANT)]
        if not matches and ref.quant is not None:
            raise StartupError(
                f"OPENJEV_MODEL={ref.text!r}: no {ref.quant} file in {ref.repo_id}; its GGUF files are {ggufs}"
            )
        chosen = (matches or ggufs)[0]
    split = _SPLIT.search(chosen)
    if split is None:
        return [chosen]
    stem, count = chosen[: split.start()], int(split.group(2))
    return [f"{stem}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


def _has_quant(file: str, quant: str) -> bool:
    name = _SPLIT.sub(".gguf", file.rsplit("/", 1)[-1])
    return re.search(rf"(?:^|[-._]){re.escape(quant)}(?:[-._]|$)", name[: -len(".gguf")], re.IGNORECASE) is not None


def resolve_hub_model(ref: HubReference, revision: str | None = None) -> Path:
    """The local path of `ref`'s GGUF (its first part), downloaded once into the Hub cache."""
    try:
        # The submodules by name: huggingface_hub loads them lazily, and only an import makes them
        # attributes of the package (a test that imports one itself would hide their absence).
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ImportError:  # pragma: no cover - a dependency of the embedded group and of tokenizers
        raise StartupError(f"OPENJEV_MODEL={ref.text!r} needs huggingface_hub: `uv sync` or pip install it") from None
    try:
        files = _list_files(huggingface_hub, ref, revision)
        chosen = choose_files(ref, files)
        paths = [_download(huggingface_hub, ref, name, revision) for name in chosen]
    except StartupError:
        raise
    except Exception as exc:  # noqa: BLE001 - every Hub, network and disk failure becomes one clear message
        raise StartupError(_explain(ref, exc, huggingface_hub.constants, huggingface_hub.errors)) from None
    check_gguf(paths[0], ref)
    return paths[0]


def _list_files(hub: Any, ref: HubReference, revision: str | None) -> list[str]:
    """The repository's files: from the Hub, or from the cached snapshot when offline or unreachable."""
    if not hub.constants.is_offline_mode():
        try:
            return list(hub.HfApi().list_repo_files(ref.repo_id, revision=revision))
        except (hub.errors.RepositoryNotFoundError, hub.errors.RevisionNotFoundError):
            raise
        except Exception as exc:
            cached = _cached_files(hub, ref, revision)
            if cached is None:
                raise exc from None
            log.warning("hub_unreachable_using_cache", model=ref.text, error=type(exc).__name__)
            return cached
    cached = _cached_files(hub, ref, revision)
    if cached is None:
        raise hub.errors.LocalEntryNotFoundError(f"{ref.repo_id} is not in the cache")
    return cached


def _cached_files(hub: Any, ref: HubReference, revision: str | None) -> list[str] | None:
    try:
        folder = Path(hub.snapshot_download(ref.repo_id, revision=revision, local_files_only=True))
    except Exception:  # noqa: BLE001 - nothing cached
        return None
    return [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]


def _download(hub: Any, ref: HubReference, name: str, revision: str | None) -> Path:
    started = time.monotonic()
    log.info("model_download_check", model=ref.text, repo=ref.repo_id, file=name)
    terminal = sys.stderr.isatty()
    path = Path(
        hub.hf_hub_download(ref.repo_id, name, revision=revision, tqdm_class=None if terminal else _LogProgress)
    )
    log.info(
        "model_ready", model=ref.text, file=name, path=str(path), bytes=path.stat().st_size,
        seconds=round(time.monotonic() - started, 3),
    )  # fmt: skip
    return path


def check_gguf(path: Path, ref: HubReference) -> None:
    """Refuse a file that is not GGUF before llama.cpp sees it."""
    with path.open("rb") as file:
        head = file.read(4)
    if head != GGUF_MAGIC:
        raise StartupError(
            f"OPENJEV_MODEL={ref.text!r}: {path} is not a GGUF file (it starts with {head!r}, not b'GGUF'); "
            "name a .gguf file of a GGUF repository"
        )


def _explain(ref: HubReference, exc: Exception, constants: Any, errors: Any) -> str:
    where = f"{ref.repo_id}" + (f" ({ref.file})" if ref.file else "")
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, errors.GatedRepoError):
        hint = "the repository is gated: accept its terms on the Hub and set HF_TOKEN to a token with access"
    elif isinstance(exc, errors.RepositoryNotFoundError):
        hint = "no such repository on the Hub (or it is private: set HF_TOKEN); check the owner/name"
    elif isinstance(exc, errors.RevisionNotFoundError):
        hint = "no such revision: check OPENJEV_REVISION"
    elif isinstance(exc, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) or constants.is_offline_mode():
        hint = (
            "the file is not in the local Hub cache and the Hub cannot be used (offline mode, or no network): "
            f"download it once where {constants.ENDPOINT} is reachable with the same HF_HOME, or set OPENJEV_MODEL "
            "to a local .gguf path"
        )
    else:
        hint = (
            f"cannot download from {constants.ENDPOINT}: check the network (or HF_ENDPOINT for a mirror) and HF_TOKEN, "
            "then start again; or set OPENJEV_MODEL to a local .gguf path"
        )
    return f"OPENJEV_MODEL={ref.text!r}: cannot get {where} from the Hugging Face Hub: {hint} ({reason})"


class _LogProgress:
    """A tqdm stand-in for `hf_hub_download` when stderr is not a terminal: JSON log lines instead of a bar."""

    def __init__(self, *_: Any, total: int | None = None, initial: int = 0, desc: str | None = None, **__: Any):
        self.total = total
        self.n = initial
        self.desc = desc
        self._logged_share = 0.0
        self._logged_at = time.monotonic()
        log.info("model_download_started", file=desc, bytes=total, resumed_at=initial or None)

    def __enter__(self) -> _LogProgress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def update(self, n: int | float = 1) -> None:
        self.n += int(n)
        share = self.n / self.total if self.total else 0.0
        now = time.monotonic()
        if share - self._logged_share >= _PROGRESS_STEP or now - self._logged_at >= _PROGRESS_SECONDS:
            self._logged_share, self._logged_at = share, now
            log.info(
                "model_download_progress", file=self.desc, done=self.n, bytes=self.total, percent=round(share * 100)
            )

    def close(self) -> None:
        pass
