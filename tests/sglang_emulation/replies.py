"""What SGLang 0.5.23 answers, field for field, as a run of the real engine showed it.

tests/data/sglang_0_5_23_replies.json holds those replies; tests/sglang/test_emulator_shapes.py
checks that these builders give the same shapes (keys in the same order, values of the same types).

- `/generate`: `{"text", "output_ids", "meta_info"}`; a batch body gets a JSON list of them, in request
  order. A call without `return_logprob` gets no log-probability keys at all.
- An aborted call still answers HTTP 200: `finish_reason` `{"type": "abort", "message": "Aborted",
  "status_code": null, "err_type": null}` and the tokens made so far (none here).
- `/health`, `/health_generate` and `/abort_request`: 200 with an empty body.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

ABORTED = {"type": "abort", "message": "Aborted", "status_code": None, "err_type": None}
FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)"
)


def generate_reply(
    item: dict[str, Any],
    *,
    cached: int | None,
    greedy: tuple[int, float],
    labels: list[list[Any]] | None,
    aborted: bool,
    began: float,
) -> dict[str, Any]:
    """One item's reply. `greedy` is the output token and its log-probability; `labels` the
    `[logprob, token_id, null]` entries of `token_ids_logprob` (None: not asked, or left out)."""
    token, token_logprob = greedy
    n_out = 0 if aborted else min(item["max_new_tokens"], 1)
    meta: dict[str, Any] = {
        "id": item["rid"],
        "finish_reason": dict(ABORTED) if aborted else {"type": "length", "length": n_out},
        "prompt_tokens": len(item["input_ids"]),
        "weight_version": "default",
        "num_retractions": 0,
    }
    if item["return_logprob"] and not aborted:
        meta["input_token_logprobs"] = []
        meta["output_token_logprobs"] = [[token_logprob, token, None]]
        meta["output_token_logprobs_length"] = 1
        if labels is not None:
            meta["input_token_ids_logprobs"] = []
            meta["output_token_ids_logprobs"] = [labels]
    meta["reasoning_tokens"] = 0
    meta["completion_tokens"] = n_out
    if cached is not None:
        meta["cached_tokens"] = cached
    meta["weight_versions"] = [{"version": "default", "start": 0, "end": n_out}]
    if cached is not None:
        meta["cached_tokens_details"] = {"device": cached, "host": 0}
    now = time.time()
    meta["dp_rank"] = None
    meta["e2e_latency"] = max(now - began, 0.0)
    meta["response_sent_to_client_ts"] = now
    return {"text": "", "output_ids": [token] * n_out, "meta_info": meta}


def model_info(model_path: str, served_model_name: str) -> dict[str, Any]:
    return {
        "model_path": model_path,
        "served_model_name": served_model_name,
        "tokenizer_path": model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
    }


def server_info(
    *, model_path: str, served_model_name: str, context_length: int, max_req_input_len: int, version: str,
    frontend: str, kv_cache_dtype: str, enable_lora: bool = False, lora_paths: Mapping[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A few of the ~37 KB of keys the real /server_info has (its resolved arguments and limits).

    `lora_paths` are the launch's adapters as 0.5.23 resolves them (`srt/arg_groups/lora_hook.py`):
    `LoRARef`s, an array-like struct `[lora_id, lora_name, lora_path, pinned]` (read in the source,
    not seen in a run); adapters loaded later are listed by /v1/models only.
    """
    return {
        "model_path": model_path,
        "served_model_name": served_model_name,
        "context_length": context_length,
        "kv_cache_dtype": kv_cache_dtype,
        "attention_backend": "torch_native",
        "disable_radix_cache": False,
        "mamba_radix_cache_strategy": "no_buffer",
        "page_size": 1,
        "max_total_num_tokens": 1_000_000,
        "max_req_input_len": max_req_input_len,
        "version": version,
        "frontend": frontend,
        "enable_lora": enable_lora,
        "lora_paths": [[lora_id(name, path), name, path, False] for name, path in (lora_paths or {}).items()],
    }


def lora_id(name: str, path: str) -> str:
    """`LoRARef.deterministic_id` (`srt/lora/lora_registry.py`): the id of an adapter given at launch."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{name}\0{path}").hex


def models(
    model_path: str, served_model_name: str, context_length: int, adapters: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """/v1/models: the model's card, then one per LoRA adapter (`available_models` in
    `srt/entrypoints/http_server.py`: the adapter's name, its path as `root`, the model as `parent`)."""
    card = {
        "id": served_model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "sglang",
        "root": model_path,
        "parent": None,
        "max_model_len": context_length,
    }
    lora_cards = [
        {**card, "id": name, "root": path, "parent": served_model_name, "max_model_len": None}
        for name, path in (adapters or {}).items()
    ]
    return {"object": "list", "data": [card, *lora_cards]}
