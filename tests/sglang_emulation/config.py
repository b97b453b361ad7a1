"""The emulator's behaviour knobs (every one can change while it runs) and what it records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_VOCAB_SIZE = 151_936  # Qwen3's embedding rows: token ids are valid in [0, this).

# `api/v1/api_types.py` at v0.5.23: sampling_params rejects unknown keys.
SAMPLING_PARAM_KEYS = (
    "max_new_tokens",
    "stop",
    "stop_token_ids",
    "stop_regex",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_new_tokens",
    "n",
    "json_schema",
    "regex",
    "ebnf",
    "structural_tag",
    "ignore_eos",
    "skip_special_tokens",
    "spaces_between_special_tokens",
    "no_stop_trim",
    "stream_interval",
    "logit_bias",
    "sampling_seed",
    "custom_params",
    "beam_width",
    "watermark",
    "choice",
)

# Routes that need `Authorization: Bearer <--api-key>` when a key is set (`srt/utils/auth.py`); /health is exempt.
AUTH_PREFIXES = (
    "/generate",
    "/model_info",
    "/get_model_info",
    "/server_info",
    "/get_server_info",
    "/v1/",
    "/abort_request",
    "/flush_cache",
)


@dataclass
class EmulatorConfig:
    """Behaviour knobs; every field can be changed while the emulator runs."""

    api_key: str | None = None
    slow: float = 0.0  # seconds every /generate takes before answering (an abort ends it early).
    slow_scoring_only: bool = False  # apply `slow` only to calls that ask for token_ids_logprob.
    fail: int | None = None  # answer every /generate with this HTTP status.
    close: bool = False  # close the connection instead of answering /generate.
    malformed: bool = False  # answer /generate with 200 and a body that is not JSON.
    cached_tokens: bool = True  # report meta_info.cached_tokens (False: as the Rust frontend may).
    unhealthy: bool = False  # /health answers 503.
    unhealthy_until: float = 0.0  # time.monotonic() before which /health answers 503 (loading).
    omit_label_ids: list[int] = field(default_factory=list)  # ids left out of output_token_ids_logprobs.
    vocab_size: int = DEFAULT_VOCAB_SIZE
    context_length: int = 32_768
    model_path: str = "emulated/model"
    served_model_name: str | None = None
    frontend: str = "python"
    server_info: bool = True  # False: /server_info and /get_server_info answer 404 (as an older gateway might).
    abort_route: bool = True  # False: /abort_request answers 404, like SGLang's router (sgl-model-gateway).
    reverse_label_order: bool = False  # list output_token_ids_logprobs entries in reverse order.
    label_logprobs: bool = True  # False: no output_token_ids_logprobs at all (the router's gRPC path).
    health_delay: float = 0.0  # seconds /health takes (SGLang's own probe waits for a generation).
    kv_cache_dtype: str = "bf16"  # what /server_info reports (SGLang's resolved --kv-cache-dtype).
    version: str = "0.5.23"  # what /server_info reports as SGLang's version.
    # LoRA adapters served, name -> path, as `--lora-paths NAME=PATH` (`lora_paths_from_flags`).
    lora_paths: dict[str, str] = field(default_factory=dict)
    # `--enable-lora`: None turns it on when `lora_paths` names any (`srt/arg_groups/lora_hook.py`).
    enable_lora: bool | None = None

    @property
    def lora_enabled(self) -> bool:
        return self.enable_lora if self.enable_lora is not None else bool(self.lora_paths)


def lora_paths_from_flags(values: Sequence[str]) -> dict[str, str]:
    """`--lora-paths` values as SGLang 0.5.23 reads them: `NAME=PATH`, or a lone `PATH` that is its own name."""
    paths: dict[str, str] = {}
    for value in values:
        name, has_path, path = value.strip().partition("=")
        paths[name] = path if has_path else name
    return paths


@dataclass(frozen=True)
class RecordedRequest:
    """One request the emulator received (control routes under /_emulator are not recorded)."""

    method: str
    path: str
    body: Any  # decoded JSON, or None
    authorization: str | None
    at: float  # time.monotonic()
