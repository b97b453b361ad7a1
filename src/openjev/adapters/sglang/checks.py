"""Start-up and first-reply checks on an SGLang that openjev did not configure itself (`--connect`).

- **Backend key enforced.** With OPENJEV_BACKEND_API_KEY set, openjev sends a keyless `POST
  /generate` with an empty prompt: a server that checks keys answers 401/403 before reading it
  (sglang 0.5.23 `srt/utils/auth.py`); one that does not answers 400 (empty `input_ids`) without
  generating anything. SGLang's Rust frontend has no API key at all, so `--api-key` there leaves the
  port open: start-up stops rather than trusting a key that protects nothing.
- **KV cache dtype.** `/server_info` carries SGLang's resolved arguments; its `kv_cache_dtype` is
  logged. `auto` follows the checkpoint, which may declare an FP8 KV cache; an FP8 or FP4 KV cache
  changes label probabilities; either gets a warning.
- **Label log-probabilities.** A `/generate` reply with no `output_token_ids_logprobs` at all means
  the backend cannot serve openjev (SGLang's router over gRPC workers drops them). One such reply
  proves little (a worker behind a router may be the odd one out, or a restart may be under way), so
  it fails its own request only. The evidence that the backend is unfit is a start-up check that
  asks one label's log-probability and gets none (start-up stops), or `INCOMPATIBLE_AFTER` such
  replies in a row while serving (`LabelLogprobWatch`: /health then says so). Requests keep being
  sent, and the first reply that carries label log-probabilities again ends it.
"""

from __future__ import annotations

import aiohttp

from openjev.adapters.sglang.control import read_capped
from openjev.adapters.sglang.http1 import ReplyTooLarge
from openjev.domain.errors import StartupError
from openjev.logs import get_logger

log = get_logger("openjev.sglang")

KEY_CHECK_TIMEOUT = 10.0
INCOMPATIBLE_AFTER = 3  # replies in a row without label log-probabilities before /health says so
_KEYLESS_BODY = b'{"input_ids": []}'  # refused before generation whatever the server

NO_LABEL_LOGPROBS = (
    "SGLang's /generate reply has no output_token_ids_logprobs, so openjev cannot read label "
    "probabilities from this backend. Behind SGLang's router the workers must be HTTP workers: the "
    "router's gRPC path returns no output_token_ids_logprobs (docs/sglang.md). Point openjev at HTTP "
    "workers or at SGLang itself."
)


async def verify_key_enforced(session: aiohttp.ClientSession, url: str) -> None:
    """StartupError when SGLang accepts a request without the backend key; a warning when unsure."""
    try:
        async with session.post(
            f"{url}/generate",
            data=_KEYLESS_BODY,
            headers={"Content-Type": "application/json"},
            timeout=aiohttp.ClientTimeout(total=KEY_CHECK_TIMEOUT),
        ) as response:
            await read_capped(response)
            status = response.status
    except (aiohttp.ClientError, TimeoutError, OSError, ReplyTooLarge) as exc:
        log.warning("sglang_key_unverified", url=url, detail=f"the keyless check got no answer: {exc!r}")
        return
    if status in (401, 403):
        log.info("sglang_key_enforced", url=url)
        return
    if status >= 500:
        log.warning("sglang_key_unverified", url=url, detail=f"the keyless check got {status}")
        return
    raise StartupError(
        f"SGLang at {url} accepts /generate without OPENJEV_BACKEND_API_KEY (a keyless request got {status}, "
        "not 401): its port is open to anyone who reaches it. SGLang's Rust frontend ignores --api-key: "
        "run SGLang with SGLANG_RUST_SERVER=0 and --api-key, or unset OPENJEV_BACKEND_API_KEY if the port "
        "is private by other means."
    )


def report_kv_cache(url: str, dtype: str | None) -> None:
    if dtype is None:
        log.warning("sglang_kv_cache_unknown", url=url, detail="/server_info reports no kv_cache_dtype")
    elif dtype == "auto":
        log.warning(
            "sglang_kv_cache_auto",
            url=url,
            detail="kv_cache_dtype=auto follows the checkpoint, which may declare an FP8 KV cache that "
            "changes label probabilities; run SGLang with --kv-cache-dtype bf16",
        )
    elif dtype.startswith(("fp8", "mxfp8", "nvfp4", "fp4")):
        log.warning(
            "sglang_kv_cache_quantized",
            url=url,
            kv_cache_dtype=dtype,
            detail="a quantized KV cache changes label probabilities: measure before relying on it",
        )


class LabelLogprobWatch:
    """Counts replies without label log-probabilities in a row; `problem` once there is evidence enough."""

    def __init__(self, url: str, threshold: int = INCOMPATIBLE_AFTER) -> None:
        self._url = url
        self._threshold = threshold
        self._in_a_row = 0

    @property
    def problem(self) -> str | None:
        """Why the backend cannot serve openjev, for /health; None while there is no such evidence."""
        if self._in_a_row >= self._threshold:
            return f"{NO_LABEL_LOGPROBS} ({self._in_a_row} replies in a row had none)"
        return None

    def answered(self, with_label_logprobs: bool) -> None:
        if with_label_logprobs:
            if self._in_a_row >= self._threshold:
                log.info("sglang_label_logprobs_back", url=self._url)
            self._in_a_row = 0
            return
        self._in_a_row += 1
        if self._in_a_row == self._threshold:
            log.error(
                "sglang_no_label_logprobs", url=self._url, replies_in_a_row=self._in_a_row, detail=NO_LABEL_LOGPROBS
            )
        else:
            log.warning("sglang_reply_without_label_logprobs", url=self._url, replies_in_a_row=self._in_a_row)
