"""A `/generate` body checked and split into items the way SGLang 0.5.23 does, with its 400 messages.

`srt/managers/io_struct.py` (`GenerateReqInput.normalize_batch_and_arguments`) and
`srt/managers/tokenizer_manager.py` under https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/:
single or batched `input_ids`, `sampling_params` with unknown keys rejected (400 `{"error": ...}`),
`token_ids_logprob` flat or nested with out-of-vocabulary ids rejected, `rid` (batch + str rid ->
`rid_i`, a rid still in flight -> 400), `lora_path` (a LoRA adapter the emulator serves, else SGLang's
400). The two refusals a run of the real engine showed keep its
exact words ("input_ids cannot be empty.", "token_ids_logprob contains out-of-vocabulary token id N;
valid range is [0, V)."). An out-of-vocabulary id in `input_ids` is not refused: the real engine's
embedding lookup fails and the whole server exits (`Crash`).

The emulator has no tokenizer, so `text` prompts are refused (openjev must send ids).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from tests.sglang_emulation.config import SAMPLING_PARAM_KEYS, EmulatorConfig


class BadRequest(Exception):
    """A request SGLang would refuse with 400; `body` is SGLang's error JSON."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.body = body


class Crash(Exception):
    """What takes the real SGLang down: its scheduler raises and the server exits."""


def error(message: str) -> BadRequest:
    return BadRequest({"error": {"message": message}})


def body_is_batch(body: dict[str, Any]) -> bool:
    """SGLang: `input_ids` is a batch when its first element is a list (io_struct `_determine_batch_size`)."""
    ids = body.get("input_ids")
    return isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)


def expand(body: Any, config: EmulatorConfig, in_flight: Collection[str]) -> list[dict[str, Any]]:  # noqa: C901 - SGLang's checks, one by one, in its order
    """Validate a /generate body like SGLang and split it into per-item requests."""
    if not isinstance(body, dict):
        raise BadRequest({"error": "the request body must be a JSON object"})
    if body.get("text") is not None or body.get("input_embeds") is not None:
        raise error("sglang-emulator has no tokenizer: send input_ids")
    input_ids = body.get("input_ids")
    if input_ids is None:
        raise error("Either text, input_ids or input_embeds should be provided.")
    if not isinstance(input_ids, list) or not input_ids:
        raise error("input_ids cannot be empty.")
    batch = body_is_batch(body)
    prompts: list[list[int]] = input_ids if batch else [input_ids]
    n = len(prompts)
    for prompt in prompts:
        if not isinstance(prompt, list):
            raise error("input_ids should be a list of lists for batch processing.")
        if not prompt:
            raise error("input_ids cannot be empty.")
        if not all(isinstance(token, int) and not isinstance(token, bool) for token in prompt):
            raise error("input_ids must be integers")
    sampling = _per_item(body.get("sampling_params"), n, "sampling_params", dict)
    for params in sampling:
        unknown = sorted(set(params or ()) - set(SAMPLING_PARAM_KEYS))
        if unknown:
            expected = ", ".join(SAMPLING_PARAM_KEYS)
            raise BadRequest({"error": f"unknown field `{unknown[0]}`, expected one of {expected}"})
    rids = _rids(body.get("rid"), n, batch)
    for rid in rids:
        if rid in in_flight:
            raise error(f"Duplicate request ID detected: {rid}")
    if len(set(rids)) != len(rids):
        duplicates = sorted({r for r in rids if rids.count(r) > 1})
        raise error(f"Duplicate request IDs detected within the request: {duplicates}")
    adapters = _adapters(body.get("lora_path"), n, config)
    return_logprob = _per_item(body.get("return_logprob"), n, "return_logprob", bool)
    wanted = _wanted(body.get("token_ids_logprob"), n, config.vocab_size)
    limit = max_req_input_len(config)
    for prompt in prompts:
        if len(prompt) >= limit:
            raise error(
                f"Input length ({len(prompt)} tokens) exceeds the maximum allowed length "
                f"({limit} tokens). Use a shorter input or enable --allow-auto-truncate."
            )
    for prompt in prompts:
        if not all(0 <= token < config.vocab_size for token in prompt):
            raise Crash("IndexError: index out of range in self")  # the embedding lookup, in the scheduler
    items = []
    for i, prompt in enumerate(prompts):
        max_new = (sampling[i] or {}).get("max_new_tokens")
        items.append(
            {
                "rid": rids[i],
                "input_ids": prompt,
                "max_new_tokens": 128 if max_new is None else int(max_new),
                "return_logprob": bool(return_logprob[i]),
                "token_ids_logprob": wanted[i],
                "lora_path": adapters[i],
            }
        )
    return items


def _adapters(lora_path: Any, n: int, config: EmulatorConfig) -> list[str | None]:
    """Each item's LoRA adapter, checked the way SGLang 0.5.23 checks them, before the labels are:
    a string applies to every item (`io_struct.py` `_normalize_lora_paths`), and a name it does not
    serve is refused with 400 (`tokenizer_manager.py` `_validate_and_resolve_lora`, its words)."""
    if lora_path is None or isinstance(lora_path, str):
        names: list[str | None] = [lora_path or None] * n
    elif isinstance(lora_path, list) and all(name is None or isinstance(name, str) for name in lora_path):
        if len(lora_path) != n:
            raise error(f"lora_path list length ({len(lora_path)}) must match batch size ({n})")
        names = [name or None for name in lora_path]
    else:
        raise error("lora_path should be a list or a string.")
    asked = [name for name in names if name is not None]
    if asked and not config.lora_enabled:
        raise error(
            f"LoRA adapter '{asked[0]}' was requested, but LoRA is not enabled. Please launch the server with "
            "--enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint."
        )
    for name in sorted(set(asked)):
        if name not in config.lora_paths:
            loaded = dict.fromkeys(config.lora_paths).keys()
            raise error(f"Got LoRA adapter that has never been loaded: {name}\nAll loaded adapters: {loaded}.")
    return names


def max_req_input_len(config: EmulatorConfig) -> int:
    # v0.5.23 `srt/managers/tp_worker.py`: max_req_len = min(context_len - 1, kv_capacity - 1); input = that - 5.
    return config.context_length - 1 - 5


def _wanted(token_ids: Any, n: int, vocab_size: int) -> list[list[int] | None]:
    if token_ids is None or token_ids == []:
        return [None] * n
    if all(isinstance(t, int) for t in token_ids):
        wanted: list[list[int] | None] = [list(token_ids) for _ in range(n)]  # a flat list is copied to every item.
    elif len(token_ids) == n and all(isinstance(t, list) for t in token_ids):
        wanted = [list(t) or None for t in token_ids]
    else:
        raise error("token_ids_logprob must be a list of ints or one list per batch item")
    for ids in wanted:
        for token in ids or ():
            if not isinstance(token, int) or not 0 <= token < vocab_size:
                raise error(
                    f"token_ids_logprob contains out-of-vocabulary token id {token}; valid range is [0, {vocab_size})."
                )
    return wanted


def _per_item(value: Any, n: int, name: str, kind: type) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise error(f"{name} has {len(value)} items for a batch of {n}")
        return value
    if value is not None and not isinstance(value, kind):
        raise error(f"{name} has the wrong type")
    return [value] * n


def _rids(rid: Any, n: int, batch: bool) -> list[str]:
    if rid is None:
        return [uuid.uuid4().hex for _ in range(n)]
    if isinstance(rid, list):
        if len(rid) != n:
            raise error("The rid should have the same length as the batch")
        return [str(r) for r in rid]
    return [f"{rid}_{i}" for i in range(n)] if batch else [str(rid)]


def split_generate_body(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A /generate body as one plain body per item, the way SGLang normalises a batch
    (`srt/managers/io_struct.py` `GenerateReqInput.normalize_batch_and_arguments` and `__getitem__`):
    a key whose value is a per-item list is split, any other value (a dict `sampling_params`, a
    scalar, a flat `token_ids_logprob`) is repeated. For tests: it does not validate."""
    if not body_is_batch(body):
        return [dict(body)]
    n = len(body["input_ids"])
    per_item = {"input_ids", "rid"}
    wanted = body.get("token_ids_logprob")
    if isinstance(wanted, list) and wanted and isinstance(wanted[0], list):
        per_item.add("token_ids_logprob")
    for key in ("sampling_params", "return_logprob", "logprob_start_len"):
        if isinstance(body.get(key), list):
            per_item.add(key)
    items = []
    for i in range(n):
        item = {}
        for key, value in body.items():
            if key == "rid" and isinstance(value, str):
                item[key] = f"{value}_{i}"
            elif key in per_item and isinstance(value, list):
                item[key] = value[i]
            else:
                item[key] = value
        items.append(item)
    return items
