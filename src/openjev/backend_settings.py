"""Each backend's own settings: one section of `Settings` per backend (`settings.embedded`, `.sglang`, `.fake`).

A field `x` of a section is read from `OPENJEV_X`, exactly as a top-level field is: the variables'
names do not say which section holds them (docs/settings.md lists them all). What several backends
read (the model, its revision and tokenizer, the context length, deterministic mode) stays at the
top level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

Positive = Annotated[int, msgspec.Meta(gt=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]

SGLANG_DEFAULT_MODEL = "nvidia/Qwen3.6-35B-A3B-NVFP4"
# The commit of SGLANG_DEFAULT_MODEL served when OPENJEV_REVISION is unset, so every container
# loads the same weights and template whatever is pushed to the repository's `main` later.
# Move it with OPENJEV_REVISION (docs/settings.md, docs/modal.md).
SGLANG_DEFAULT_REVISION = "491c2f1ea524c639598bf8fa787a93fed5a6fbce"
SGLANG_DEFAULT_PUBLIC_NAME = "Qwen/Qwen3.6-35B-A3B"
KVCacheDtype = Literal["bf16", "bfloat16", "auto", "fp8_e4m3", "fp8_e5m2", "mxfp8", "nvfp4", "fp4_mx_block16"]


class EmbeddedSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The embedded backend, on OpenVINO or llama.cpp (defaults sized for a 2-core machine)."""

    # The engine: OpenVINO for the Qwen2 models it was measured on, llama.cpp for the rest (`auto`).
    engine: Literal["auto", "openvino", "llama.cpp"] = "auto"
    cache_dir: str | None = None  # where packaged models are assembled; default $XDG_CACHE_HOME/openjev.
    threads: Positive | None = None  # default: the number of CPUs.
    parallel_slots: Positive = 4
    slot_context: Positive = 4096
    # OpenVINO only: the matrix products quantize their activations to int8 (the trade and its
    # figures: adapters/openvino/engine.py and docs/performance.md).
    int8_activations: bool = True

    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir).expanduser() if self.cache_dir else Path.home() / ".cache" / "openjev"


class SGLangSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The SGLang backend: one to connect to, or how to launch one."""

    sglang_url: str | None = None  # connect to this SGLang (or router) instead of launching one.
    # What OPENJEV_SGLANG_URL is: found out at start-up (`auto`), or forced when that guesses wrong.
    sglang_peer: Literal["auto", "worker", "router"] = "auto"
    sglang_python: str | None = None  # python executable of an environment where SGLang is installed.
    sglang_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 30000
    backend_api_key: str | None = None
    profile: str | None = None  # a named SGLang launch profile (see docs/settings.md).
    # SGLang's HTTP frontend. Python until a GPU run shows that 0.5.23's Rust frontend starts the
    # production model (multimodal-family checkpoints need its strict image-processor check).
    frontend: Literal["rust", "python"] = "python"
    # SGLang's `--kv-cache-dtype`, always passed: "auto" lets a checkpoint that declares FP8 KV
    # quantisation turn the KV cache to FP8, which moves the label probabilities.
    kv_cache_dtype: KVCacheDtype = "bf16"
    startup_timeout: PositiveFloat = 1800.0


class FakeSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The fake backend (tests and demos)."""

    fake_latency: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    fake_fail_after: int | None = None  # fail every call after this many (failure injection).
    fake_swap_labels: bool = False  # answer as if the label mapping were reversed (smoke tests).
