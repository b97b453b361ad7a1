"""The SGLang command line openjev launches: the one place that knows SGLang's flag names.

Pinned to sglang 0.5.23 (`openjev[sglang]`); the flags were checked against that release's own
argparse parser, whose fields live in `srt/arg_groups/fields/` (files are cited relative to
https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/). Flags renamed inside 0.5.x
are resolved by version, so an SGLang found in another environment (`--sglang-python`) still gets
names it accepts.

Decisions:

- Entry point: `python -m sglang.launch_server`. In 0.5.23 it runs exactly what
  `sglang serve --model-type llm` runs (`sglang/cli/serve.py` `_run_llm` calls
  `launch_server.run_server`) and prints one UserWarning recommending `sglang serve`. The module
  form works with any interpreter path (the `sglang` console script need not sit beside it) and
  skips `sglang serve`'s model-type auto-detection, which asks the Hugging Face hub for a
  `model_index.json`.
- No `--skip-tokenizer-init`. openjev sends token ids, so SGLang's tokenizer is only needed for
  detokenising one output token, but with that flag the scheduler keeps no processor, and the Rust
  frontend then refuses multimodal architectures such as Qwen3.6's
  (`srt/rust_server/server.py` `_resolve_multimodal` needs `processor.image_processor`).
  `--language-model-only` would avoid that, but 0.5.23 rejects it for Qwen3.5/3.6 architectures.
- `--mamba-radix-cache-strategy extra_buffer` only for hybrid (Mamba / linear-attention)
  architectures: it is the only strategy that checkpoints the recurrent state at radix-tree
  branching points, which is what lets the branches reuse the shared prefix (`srt/arg_groups/overrides.py`). 0.5.23
  refuses it for other architectures ("needs mamba state", `model_hook.py`), so other models keep
  SGLang's `auto`.
- The Rust frontend is `SGLANG_RUST_SERVER=1` in the environment, not a flag (`srt/environ.py`). The
  Python frontend is the default: 0.5.23's Rust one refuses a multimodal-family model unless its
  image processor passes a strict check (which the NVIDIA checkpoint has not been seen to pass), and
  it ignores `--api-key`, so a backend key with the Rust frontend is refused here.
- `--kv-cache-dtype` is always passed (`OPENJEV_KV_CACHE_DTYPE`, default bf16): with `auto`, a
  checkpoint whose `hf_quant_config.json` declares FP8 KV quantisation gets an FP8 KV cache
  (`srt/mem_cache/kv_cache_dtype.py` at v0.5.23), which changes the label probabilities.
- `OPENJEV_DETERMINISTIC=true` adds `--enable-deterministic-inference` (batch-invariant kernels:
  a prompt's answer does not depend on what is batched with it) with `--attention-backend triton`
  and `--linear-attn-prefill-backend triton`. 0.5.23 keeps the radix cache in deterministic mode
  only on the `ascend`, `fa3`, `fa4` and `triton` attention backends and otherwise disables it
  (`srt/arg_groups/choices.py` `RADIX_SUPPORTED_DETERMINISTIC_ATTENTION_BACKEND`,
  `srt/arg_groups/attention_hook.py` `handle_deterministic_inference`); left unset on a Blackwell GPU
  it falls back to `flashinfer` (`srt/arg_groups/overrides.py` `_deterministic_attention_backend`),
  which would recompute every request's prefix. `fa3` is Hopper-only; `triton` is the portable one
  of the rest. For Qwen3.6's linear-attention layers, FlashInfer's GDN prefill is refused with the
  flag (`srt/layers/attention/linear/gdn_backend.py` `_validate_gdn_linear_attn_backends`), and
  openjev never decodes, so only the prefill backend is set. Off by default: its cost on a B200 is
  not measured yet.
- `OPENJEV_ADAPTER=NAME=PATH` adds `--enable-lora --lora-paths NAME=PATH`: one LoRA adapter, loaded
  at launch, whose rank and target modules SGLang reads from the adapter itself
  (`srt/arg_groups/lora_hook.py`; `--max-lora-rank` and `--lora-target-modules` are needed only
  for adapters loaded later). `--max-loras-per-batch` keeps its default (8): openjev sends one adapter.
- `SGLANG_WARMUP_TIMEOUT` is openjev's start-up budget (`OPENJEV_STARTUP_TIMEOUT`). After loading,
  SGLang sends itself one warm-up request and kills itself when it takes longer than that variable
  (an EnvFloat, default -1, meaning 600 s: `srt/environ.py`, `_execute_server_warmup` in
  `srt/entrypoints/http_server.py`); on a first boot that request also waits for kernel
  compilation. With the budget as its timeout, only openjev's own wait for `/health` bounds the start.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openjev.adapters.sglang.lora import adapter_setting
from openjev.domain.errors import SettingsError
from openjev.settings import SGLANG_DEFAULT_MODEL, SGLANG_DEFAULT_PUBLIC_NAME, Settings

PINNED_VERSION = "0.5.23"
# 0.5.23's Rust frontend has no API-key setting: the Python key check is installed only on the Python
# server (`srt/entrypoints/http_server.py` `add_api_key_middleware` at v0.5.23), so `--api-key` would
# leave SGLang's port open.
RUST_FRONTEND_IGNORES_KEY = (
    "OPENJEV_BACKEND_API_KEY: SGLang's Rust frontend (OPENJEV_FRONTEND=rust) ignores --api-key, so the key "
    "would protect nothing; use OPENJEV_FRONTEND=python with a backend key, or drop the key"
)
# What 0.5.23 prints before exiting when SGLANG_RUST_SERVER=1 meets a multimodal-family model it has no
# Rust image pipeline for (`srt/rust_server/server.py` `_resolve_multimodal` at v0.5.23).
RUST_FRONTEND_REFUSAL = "SGLANG_RUST_SERVER=1: no Rust MM pipeline"
ENTRY_MODULE = "sglang.launch_server"
# Batch-invariant kernels on backends that keep the radix cache in that mode (see the module docstring).
DETERMINISTIC_FLAGS = (
    "--enable-deterministic-inference",
    "--attention-backend", "triton",
    "--linear-attn-prefill-backend", "triton",
)  # fmt: skip
WARMUP_TIMEOUT_VARIABLE = "SGLANG_WARMUP_TIMEOUT"
SGLANG_HOST = "127.0.0.1"  # SGLang listens on loopback only: its routes are never exposed (docs/spec.md#backends).


@dataclass(frozen=True)
class FlagNames:
    """Flag spellings that changed inside 0.5.x."""

    mamba_strategy: str
    cuda_graph_max_bs_decode: str


# Renamed in June 2026 (#28151 and #23906); releases up to 0.5.14 only know the old spellings,
# upstream main at about 0.5.15 accepts both, 0.5.23 rejects the old ones (`srt/arg_groups/fields/`).
CURRENT_NAMES = FlagNames(
    mamba_strategy="--mamba-radix-cache-strategy", cuda_graph_max_bs_decode="--cuda-graph-max-bs-decode"
)
LEGACY_NAMES = FlagNames(mamba_strategy="--mamba-scheduler-strategy", cuda_graph_max_bs_decode="--cuda-graph-max-bs")
RENAMED_IN = (0, 5, 15)


def parse_version(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version string: "0.5.13.post1" -> (0, 5, 13)."""
    numbers: list[int] = []
    for part in version.split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        numbers.append(int(match.group()))
        if match.end() != len(part):
            break
    return tuple(numbers)


def flag_names(version: str | None) -> FlagNames:
    if version is None:
        return CURRENT_NAMES
    parsed = parse_version(version)
    return CURRENT_NAMES if not parsed or parsed >= RENAMED_IN else LEGACY_NAMES


def _default_profile(names: FlagNames) -> list[str]:
    return []


def _b200_nvfp4_profile(names: FlagNames) -> list[str]:
    return [
        # Longest-prefix-match queue order (0.5.23's default is fcfs): under load, the branches of a
        # request run right after their warm-up, while its prefix is still hot in the radix cache.
        "--schedule-policy", "lpm",
        # openjev never decodes: max_new_tokens=1 takes its token from the prefill pass. Capturing
        # decode CUDA graphs for large batches only lengthens every cold start (captured at each boot).
        names.cuda_graph_max_bs_decode, "16",
        # Prometheus /metrics (loopback only, exempt from the API key): cache hit rate, queue depth.
        "--enable-metrics",
    ]  # fmt: skip


PROFILES: Mapping[str, Callable[[FlagNames], list[str]]] = {
    "default": _default_profile,
    "b200-nvfp4": _b200_nvfp4_profile,
}
PROFILE_HELP = {
    "default": "no extra flags: SGLang's own defaults for the GPU it finds",
    "b200-nvfp4": "one B200 serving nvidia/Qwen3.6-35B-A3B-NVFP4: lpm queue, small decode graphs, metrics",
}

# Architectures for which 0.5.23 accepts extra_buffer (`srt/arg_groups/overrides.py`
# `_MAMBA_EXTRA_BUFFER_ARCHS`, the ones a single GPU plausibly serves).
EXTRA_BUFFER_ARCHITECTURES = frozenset({
    "Qwen3NextForCausalLM",
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "KimiLinearForCausalLM",
    "FalconH1ForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "NemotronHForCausalLM",
})  # fmt: skip
# For a hub id (no config.json to read before SGLang downloads it): the families above by name.
# ("Qwen3.6-35B-A3B" is hybrid, "Qwen3-8B" is not.)
_HYBRID_NAME = re.compile(r"qwen3[._][568](?!\d)|qwen3[-_]next|kimi-linear|falcon-h1|nemotron-h", re.IGNORECASE)


def is_hybrid_model(model: str) -> bool:
    """Whether `model` (a local checkpoint or a hub id) is a hybrid Mamba / linear-attention model."""
    config = Path(model) / "config.json"
    if config.is_file():
        try:
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        architectures = data.get("architectures") if isinstance(data, dict) else None
        if isinstance(architectures, list) and architectures:
            return architectures[0] in EXTRA_BUFFER_ARCHITECTURES
    return bool(_HYBRID_NAME.search(model))


@dataclass(frozen=True)
class SGLangCommand:
    """What to run: argv, and the variables to set on top of the inherited environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: frozenset[str] = frozenset()

    def redacted(self) -> str:
        """The command as a shell line, with secrets (the API key) masked, for logs."""
        shown = ["***" if arg in self.secrets else arg for arg in self.argv]
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (prefix + " " if prefix else "") + shlex.join(shown)


def profile_flags(profile: str | None, names: FlagNames = CURRENT_NAMES) -> list[str]:
    name = profile or "default"
    builder = PROFILES.get(name)
    if builder is None:
        known = ", ".join(sorted(PROFILES))
        raise SettingsError(f"OPENJEV_PROFILE: unknown profile {name!r} (known: {known})")
    return builder(names)


def sglang_command(settings: Settings, *, python: str, version: str | None = PINNED_VERSION) -> SGLangCommand:
    """The SGLang server command for these settings, for the SGLang `version` found (None: pinned)."""
    names = flag_names(version)
    model = settings.model or SGLANG_DEFAULT_MODEL
    argv = [python, "-m", ENTRY_MODULE, "--model-path", model]
    revision = settings.sglang_revision()
    if revision and not Path(model).is_dir():  # a local folder (a snapshot) is read as it is, never from the Hub
        argv += ["--revision", revision]
    argv += ["--served-model-name", settings.served_model_name or SGLANG_DEFAULT_PUBLIC_NAME]
    argv += ["--host", SGLANG_HOST, "--port", str(settings.sglang.sglang_port)]
    secrets: frozenset[str] = frozenset()
    if settings.sglang.backend_api_key and settings.sglang.frontend == "rust":
        raise SettingsError(RUST_FRONTEND_IGNORES_KEY)
    if settings.sglang.backend_api_key:
        argv += ["--api-key", settings.sglang.backend_api_key]
        secrets = frozenset({settings.sglang.backend_api_key})
    if settings.context_length:
        argv += ["--context-length", str(settings.context_length)]
    argv += ["--kv-cache-dtype", settings.sglang.kv_cache_dtype]
    if is_hybrid_model(model):
        argv += [names.mamba_strategy, "extra_buffer"]
    if settings.deterministic:
        argv += DETERMINISTIC_FLAGS
    if settings.adapter is not None:  # NAME=PATH (lora.py); SGLang infers the rank and target modules from it
        adapter = adapter_setting(settings.adapter, launching=True)
        argv += ["--enable-lora", "--lora-paths", f"{adapter.name}={adapter.path}"]
    argv += ["--log-level", settings.log_level]
    argv += profile_flags(settings.sglang.profile, names)
    env = {
        "SGLANG_RUST_SERVER": "1" if settings.sglang.frontend == "rust" else "0",
        WARMUP_TIMEOUT_VARIABLE: str(float(settings.sglang.startup_timeout)),
    }
    return SGLangCommand(argv=tuple(argv), env=env, secrets=secrets)
