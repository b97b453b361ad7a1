"""What openjev sends to SGLang's `/generate` and how it reads the reply: pure functions, no I/O.

Every call is a single-token greedy `/generate` on token ids (never text), asking for the exact
label ids with `token_ids_logprob`. Greedy (`temperature: 0`) matters: SGLang returns raw,
untempered log-probabilities only when the request is greedy, otherwise it returns the
temperature-scaled ones (`srt/layers/sampler.py`). The labels are read from
`meta_info.output_token_ids_logprobs[0]` by token id, and a label SGLang did not return is an
error, never a zero.

A request's branches go in ONE batched `/generate` (`score_body`): `input_ids` a list of lists, one
`sampling_params` object, `return_logprob` and `logprob_start_len` as scalars, `token_ids_logprob`
one list per item, and `rid` a list with one rid per call. What SGLang 0.5.23 does with it:
- `srt/managers/io_struct.py` (`GenerateReqInput.normalize_batch_and_arguments`): a first element
  that is a list makes `input_ids` a batch; a dict `sampling_params` and scalar `return_logprob` /
  `logprob_start_len` are repeated for every item; a nested `token_ids_logprob` is taken per item
  (a flat one would be copied to all); a list `rid` must have the batch's length and no duplicate.
- `srt/managers/tokenizer_manager.py` (`_handle_batch_request`): with `n` = 1 and token ids only
  (no text, no attention data parallelism) every item is checked and the whole batch reaches the
  scheduler as one message (`_send_batch_request`); there is no shared-prefix pre-fill on this
  path (that is the `n` > 1 path), which is why the prefix is still warmed first. Each item keeps
  its own rid state, so `/abort_request` with one item's rid stops that item (`abort_request` only
  forwards a rid it knows). Items are awaited together (`_collect_batch_responses`): an item
  aborted by `/abort_request` comes back in the list with `finish_reason.type == "abort"`, while
  an item refused with a status fails the whole HTTP request with it.
- `srt/entrypoints/http_server.py` (`serve_generate_request`): the non-streamed reply is the JSON
  list of the items' outputs, in the order of the request, each `meta_info` carrying the item's
  rid as `id` and its `prompt_tokens`; `srt/entrypoints/api_contract.py` and `api/v1/api_types.py`
  (`GenerateRequest`: `StringOrList`, `TokenIdsOrList`, `BoolOrList`, `Int64OrList`) accept these shapes.
A single call keeps the plain (non-batch) body.

A reply is checked against its request (`check_replies`): each item's `meta_info.id`, when the
frontend sends one, must be the rid asked for, and its `prompt_tokens` the prompt's length, so a
reply meant for another request is an error, not an answer.

SGLang's shapes and behaviours this module relies on are cited as files of the pinned release,
relative to https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/ (docs/sglang.md says more).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from openjev.domain.errors import BackendError, BackendUnavailable, OpenJevError
from openjev.domain.ports import CallUsage, ScoreCall
from openjev.domain.scoring_math import is_logprob

# The largest /generate reply openjev accepts is derived from the limits in force (`max_reply_bytes`).
# An item of a real SGLang 0.5.23 reply is about 600 bytes of meta_info (id, finish_reason, token
# counts, latency, the output token's own log-probability) plus about 40 bytes per label entry
# (`[logprob, token_id, null]`); these allow 4 KiB and 512 bytes (a token's text included, JSON-escaped).
REPLY_ITEM_BYTES = 4096
REPLY_LABEL_BYTES = 512
MIN_REPLY_BYTES = 1024 * 1024  # what an error reply or a one-call batch may take at least

_HEX32 = re.compile(r"[0-9a-f]{32}")
# Greedy: SGLang then returns raw log_softmax values, not temperature-scaled ones (`srt/layers/sampler.py`).
ONE_GREEDY_TOKEN = {"max_new_tokens": 1, "temperature": 0}


def max_reply_bytes(max_branches: int, max_options: int) -> int:
    """The cap on one /generate reply: a batch of `max_branches` items with `max_options` labels each, generously."""
    return max(MIN_REPLY_BYTES, max_branches * (REPLY_ITEM_BYTES + max_options * REPLY_LABEL_BYTES))


def rid_for(call_id: str) -> str:
    """The SGLang request id for a call id, such that no rid is a prefix of another.

    SGLang's scheduler aborts every request whose rid *starts with* the aborted rid
    (`srt/managers/scheduler.py`: `req.rid.startswith(recv_req.rid)`), so aborting one call must not
    match another.
    32-hex-digit ids (what the use case passes, `openjev.ids.random_id`) are fixed-length and so
    prefix-free already: they are used as they are. Any other id is framed with its length, which
    keeps the set prefix-free.
    """
    if _HEX32.fullmatch(call_id):
        return call_id
    return f"openjev-{len(call_id)}-{call_id}"


class Entry(msgspec.Struct, array_like=True, forbid_unknown_fields=False):
    """One `[logprob, token_id, text]` element (`LogprobEntry` in `api/v1/api_types.py`)."""

    logprob: float | None
    token_id: int


class MetaInfo(msgspec.Struct):
    prompt_tokens: int
    id: str | None = None
    cached_tokens: int | None = None
    finish_reason: dict[str, Any] | None = None
    output_token_ids_logprobs: list[list[Entry] | None] | None = None

    @property
    def has_label_logprobs(self) -> bool:
        positions = self.output_token_ids_logprobs
        return positions is not None and len(positions) > 0 and positions[0] is not None


class _GenerateResponse(msgspec.Struct):
    meta_info: MetaInfo


_decode_generate = msgspec.json.Decoder(_GenerateResponse)
_decode_batch = msgspec.json.Decoder(list[_GenerateResponse])


class Generate(msgspec.Struct, frozen=True):
    """A /generate body and what its reply must match: one rid and one prompt length per item."""

    body: dict[str, Any]
    batch: int | None  # items of a batch body; None for a plain one
    rids: tuple[str, ...]
    prompt_lengths: tuple[int, ...]


def warm_body(call_id: str, token_ids: Sequence[int], adapter: str | None = None) -> Generate:
    rid = rid_for(call_id)
    body = {"input_ids": _ids(token_ids), "sampling_params": ONE_GREEDY_TOKEN, "rid": rid}
    return Generate(_with_adapter(body, adapter), None, (rid,), (len(token_ids),))


def score_body(calls: Sequence[ScoreCall], adapter: str | None = None) -> Generate:
    """Every call in one body: a batch for two or more, the plain body for one.

    `adapter`: the LoRA adapter SGLang answers with (`lora_path`; one string for every item of a batch).
    """
    batch = None if len(calls) == 1 else len(calls)

    def per_call(values: list[Any]) -> Any:
        """A batch carries one value per call; a plain body carries the one call's value."""
        return values if batch else values[0]

    rids = [rid_for(c.call_id) for c in calls]
    body = {
        "input_ids": per_call([_ids(c.token_ids) for c in calls]),
        # Scalars and the one sampling_params object apply to every item of a batch.
        "sampling_params": ONE_GREEDY_TOKEN,
        "return_logprob": True,
        "token_ids_logprob": per_call([_ids(c.label_ids) for c in calls]),
        "logprob_start_len": -1,  # output position only: no prompt logprobs, full cache reuse.
        "rid": per_call(rids),
    }
    return Generate(_with_adapter(body, adapter), batch, tuple(rids), tuple(len(c.token_ids) for c in calls))


def _with_adapter(body: dict[str, Any], adapter: str | None) -> dict[str, Any]:
    """The body naming SGLang's LoRA adapter (`lora_path`, `srt/managers/io_struct.py`), when one is served."""
    if adapter is not None:
        body["lora_path"] = adapter
    return body


def read_reply(raw: bytes, sent: Generate) -> list[MetaInfo]:
    """The meta_info of each item of a 200 reply to `sent`, checked against it."""
    metas = _metas(raw, sent.batch)
    check_replies(metas, sent)
    return metas


def _metas(raw: bytes, batch: int | None) -> list[MetaInfo]:
    """The meta_info of each item; a malformed reply or an aborted item is an error."""
    try:
        if batch is None:
            metas = [_decode_generate.decode(raw).meta_info]
        else:
            metas = [item.meta_info for item in _decode_batch.decode(raw)]
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        aborted = _abort_reason(raw)  # an aborted item may lack what a finished one has
        if aborted is not None:
            raise aborted from None
        raise BackendError(f"SGLang /generate returned a malformed reply ({exc}): {snippet(raw)}") from None
    if batch is not None and len(metas) != batch:
        raise BackendError(f"SGLang /generate returned {len(metas)} results for a batch of {batch}: {snippet(raw)}")
    for meta in metas:
        if meta.finish_reason is not None and meta.finish_reason.get("type") == "abort":
            raise _aborted(meta.finish_reason)
    return metas


def _aborted(reason: dict[str, Any]) -> BackendError:
    """An aborted call: HTTP 200 with `finish_reason` `{"type": "abort", "message": "Aborted",
    "status_code": null, "err_type": null}` (SGLang 0.5.23, observed), whether openjev, an admin or
    SGLang itself aborted it."""
    message = reason.get("message") or "no reason given"
    status = reason.get("status_code")
    return BackendError(f"SGLang aborted the call: {message}" + (f" (status {status})" if status else ""))


def _abort_reason(raw: bytes) -> BackendError | None:
    """The abort error when any item of a reply that did not decode is an aborted one."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    for item in body if isinstance(body, list) else [body]:
        meta = item.get("meta_info") if isinstance(item, dict) else None
        reason = meta.get("finish_reason") if isinstance(meta, dict) else None
        if isinstance(reason, dict) and reason.get("type") == "abort":
            return _aborted(reason)
    return None


def check_replies(metas: Sequence[MetaInfo], sent: Generate) -> None:
    """BackendError when an item answers another request: its rid (when given) or its prompt length differ."""
    for index, (meta, rid, length) in enumerate(zip(metas, sent.rids, sent.prompt_lengths, strict=True)):
        where = f"item {index} of the reply" if sent.batch else "the reply"
        if meta.id is not None and meta.id != rid:
            raise BackendError(f"SGLang /generate: {where} is for request {meta.id[:80]!r}, not {rid!r}")
        if meta.prompt_tokens != length:
            raise BackendError(
                f"SGLang /generate: {where} counts {meta.prompt_tokens} prompt tokens, the request sent {length}"
            )


def usage(meta: MetaInfo) -> CallUsage:
    # cached_tokens is absent from some frontends: report None (unknown), never an invented 0.
    return CallUsage(prompt_tokens=meta.prompt_tokens, cached_tokens=meta.cached_tokens)


def label_logprobs(meta: MetaInfo, label_ids: Sequence[int]) -> tuple[float, ...]:
    positions = meta.output_token_ids_logprobs
    if not positions or positions[0] is None:
        raise BackendError(
            "SGLang returned no output_token_ids_logprobs: the backend (or a router in front of it) "
            "dropped return_logprob/token_ids_logprob"
        )
    by_id: dict[int, float | None] = {entry.token_id: entry.logprob for entry in positions[0]}
    values: list[float] = []
    for label in label_ids:
        if label not in by_id:
            raise BackendError(f"SGLang did not return the log-probability of label token id {label}")
        value = by_id[label]
        if value is None or not is_logprob(value):
            raise BackendError(f"SGLang returned an invalid log-probability {value!r} for label token id {label}")
        values.append(value)
    return tuple(values)


def label_mass(logprobs: Sequence[float]) -> float:
    """The labels' share of the whole next-token distribution: exact, since a greedy call's label
    log-probabilities are SGLang's raw full-vocabulary `log_softmax` values."""
    return min(1.0, math.fsum(math.exp(value) for value in logprobs))


def status_error(status: int, raw: bytes, route: str) -> OpenJevError:
    message = error_message(raw)
    if status in (401, 403):
        return BackendError(
            f"SGLang refused {route} with {status} ({message}): set OPENJEV_BACKEND_API_KEY to the --api-key "
            "SGLang runs with"
        )
    if status in (429, 503):
        return BackendUnavailable(f"SGLang is unavailable ({status} on {route}): {message}")
    if status == 400:
        return BackendError(f"SGLang rejected the call (400 on {route}): {message}")
    return BackendError(f"SGLang answered {status} on {route}: {message}")


def error_message(raw: bytes) -> str:
    """SGLang's error text: `{"error": "..."}`, `{"error": {"message": ...}}`, `{"detail": ...}` or raw."""
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return snippet(raw)
    if isinstance(body, dict):
        for key in ("error", "detail", "message"):
            value = body.get(key)
            if isinstance(value, dict) and isinstance(value.get("message"), str):
                return str(value["message"])
            if isinstance(value, str):
                return value
    return snippet(raw)


def snippet(raw: bytes, limit: int = 300) -> str:
    text = raw[: limit * 4].decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"


def _ids(ids: Sequence[int]) -> Sequence[int]:
    """Token ids as the JSON encoder takes them (lists and tuples as they are, without a copy)."""
    return ids if isinstance(ids, list | tuple) else list(ids)
