"""The llama.cpp engine process: how it is configured, loaded, called and shut down.

xllamacpp runs llama.cpp's own C++ server engine inside this process (`LlamaEngine`); the backend
drives it through the small blocking `Engine` protocol, which tests replace with a simulation.

Batch invariance. The KV cache is F32 and flash attention is off (see `engine_params`): with
SmolLM2 (Q4_1), a branch evaluated on a cached prefix then gives the same probabilities as a cold
evaluation of the same prompt, which llama.cpp's defaults do not. It is not enough for the Qwen
Q4_K_M models, whose matrix kernels also depend on where a token sits in its batch: deterministic
mode (`deterministic`, the default) adds the planned cache reuse of cache_plan.py, one call at a
time and no host-memory prompt cache; the default model then gives the cold result bit for bit
(tests/integration/test_reproducible_answers.py).

The engine also starts llama.cpp's HTTP server (xllamacpp always does). It listens on 127.0.0.1 on
a random port and requires a random per-process API key, so nothing else can use it; openjev only
calls its /props, /health and /tokenize routes.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import gguf
import xllamacpp  # type: ignore[import-untyped]

from openjev.adapters.embedded.gguf_file import read_gguf_metadata
from openjev.domain.errors import BackendUnavailable, StartupError
from openjev.logs import get_logger

log = get_logger("openjev.embedded")

BATCH_TOKENS = 512  # llama.cpp prompt batch: the granularity at which an abort takes effect
PROMPT_CACHE_MIB = 256  # llama.cpp's host-memory cache of evicted slot prompts (its default is 8 GiB)
HTTP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class EngineConfig:
    """How to start llama.cpp: the GGUF, CPU threads, parallel slots and the context of each slot."""

    model_path: Path
    threads: int
    parallel_slots: int = 4
    slot_context: int = 4096
    verbose: bool = False
    batch_tokens: int = BATCH_TOKENS
    prompt_cache_mib: int = PROMPT_CACHE_MIB
    exact: bool = True  # F32 KV cache, no flash attention: batch-invariant results, 2x KV memory
    # One call at a time, planned reuse of the cache, no host-memory prompt cache: bit-identical
    # answers whatever else runs (backend.py, cache_plan.py).
    deterministic: bool = True

    @classmethod
    def create(
        cls,
        model_path: Path,
        *,
        threads: int | None,
        parallel_slots: int,
        slot_context: int,
        verbose: bool = False,
        deterministic: bool = True,
    ) -> EngineConfig:
        return cls(
            model_path=model_path,
            threads=threads or available_cpus(),
            parallel_slots=parallel_slots,
            slot_context=slot_context,
            verbose=verbose,
            deterministic=deterministic,
        )


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask in a container), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Engine(Protocol):
    """The blocking engine the backend drives: llama.cpp (`LlamaEngine`) or a test double."""

    slots: int
    slot_context: int  # per slot, as the engine really allocated it
    vocab_size: int

    def complete(self, body: bytes, on_chunk: Callable[[bytes], bool]) -> None:
        """Run one streamed completion; `on_chunk` gets each JSON chunk and returns True to stop."""

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]: ...

    def check_health(self) -> None:
        """Raise when the engine does not answer."""

    def shutdown(self) -> None:
        """Free the engine (joins its threads: call it off the event loop)."""


class LlamaEngine:
    """xllamacpp's `Server`: llama.cpp's server engine loaded in this process."""

    def __init__(self, server: Any, api_key: str, *, slots: int, slot_context: int, vocab_size: int) -> None:
        self._server: Any = server
        self._api_key = api_key
        self._address = str(server.listening_address)
        self.slots = slots
        self.slot_context = slot_context
        self.vocab_size = vocab_size

    @classmethod
    def load(cls, config: EngineConfig) -> LlamaEngine:
        """Load the GGUF (seconds). Raises StartupError with what to check when llama.cpp refuses."""
        path = config.model_path
        if not path.is_file():
            raise StartupError(f"the embedded model file {path} does not exist (OPENJEV_MODEL)")
        vocab = read_gguf_metadata(path, arrays=False).get(gguf.Keys.Tokenizer.LIST)
        api_key = secrets.token_urlsafe(32)
        started = time.perf_counter()
        try:
            server = xllamacpp.Server(engine_params(config, api_key))
        except Exception as exc:  # noqa: BLE001 - llama.cpp's refusals have no common type; the message says what to check
            raise StartupError(
                f"llama.cpp could not load {path} with {config.parallel_slots} slots of {config.slot_context} "
                f"tokens: {exc} (is it a GGUF chat model this llama.cpp build supports, with enough memory for "
                "that context? OPENJEV_LOG_LEVEL=debug shows llama.cpp's own log)"
            ) from None
        engine = cls(server, api_key, slots=0, slot_context=0, vocab_size=vocab if isinstance(vocab, int) else 0)
        del server
        try:
            props = engine._http_json("GET", "/props")
            engine.slot_context = int((props.get("default_generation_settings") or {}).get("n_ctx") or 0)
            engine.slots = int(props.get("total_slots") or 0)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            engine.shutdown()
            raise StartupError(f"the llama.cpp engine started but its /props route failed: {exc}") from None
        if engine.slots != config.parallel_slots or engine.slot_context <= 0:
            engine.shutdown()
            raise StartupError(
                f"llama.cpp started {engine.slots} slots of {engine.slot_context} tokens "
                f"instead of {config.parallel_slots} slots"
            )
        log.info(
            "embedded_engine_loaded",
            model=path.name,
            seconds=round(time.perf_counter() - started, 1),
            slots=engine.slots,
            slot_context=engine.slot_context,
            threads=config.threads,
        )
        return engine

    def complete(self, body: bytes, on_chunk: Callable[[bytes], bool]) -> None:
        server = self._server
        if server is None:
            raise BackendUnavailable("the embedded llama.cpp engine was shut down")
        server.handle_completions(body, on_chunk)  # releases the GIL while llama.cpp works

    def tokenize(self, text: str, *, parse_special: bool = True) -> list[int]:
        body = {"content": text, "add_special": False, "parse_special": parse_special}
        return [int(t) for t in self._http_json("POST", "/tokenize", body)["tokens"]]

    def check_health(self) -> None:
        self._http_json("GET", "/health")

    def shutdown(self) -> None:
        self._server = None  # the last reference: llama.cpp's destructor stops and joins its threads here

    def _http_json(self, method: str, path: str, body: Any = None) -> Any:
        """llama.cpp's HTTP routes on its private localhost port, with this process's random key."""
        if self._server is None:
            raise BackendUnavailable("the embedded llama.cpp engine was shut down")
        request = urllib.request.Request(
            self._address + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            return json.loads(response.read())


def engine_params(config: EngineConfig, api_key: str) -> Any:
    """llama.cpp server parameters: one slot per parallel call, each with the full slot context."""
    params = xllamacpp.CommonParams()
    params.model.path = str(config.model_path)
    params.n_parallel = config.parallel_slots
    params.kv_unified = False
    params.n_ctx = config.parallel_slots * config.slot_context
    params.n_batch = config.batch_tokens
    params.n_ubatch = config.batch_tokens
    params.cpuparams.n_threads = config.threads
    params.cpuparams_batch.n_threads = config.threads
    # Exact mode: with flash attention or an F16 KV cache, llama.cpp's result depends on how the prompt
    # was batched (a cached prefix plus a suffix vs one cold batch differ by up to ~2e-2 in probability
    # on SmolLM2). Plain attention over an F32 cache makes the cached and the cold evaluation identical,
    # so an answer never depends on what ran before it; it costs twice the KV memory (SmolLM2: 46 KB per
    # token of context, 755 MB for 4 slots of 4096 tokens) and some prefill speed.
    if config.exact:
        params.flash_attn_type = xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.cache_type_k = xllamacpp.ggml_type.GGML_TYPE_F32
        params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.cache_prompt = True
    # The host-memory cache restores an evicted prompt's state wherever it matches best, a reuse the
    # deterministic plan cannot choose: off in deterministic mode.
    params.cache_ram_mib = 0 if config.deterministic else config.prompt_cache_mib
    params.ctx_shift = False  # a prompt longer than a slot is an error, never silently truncated
    params.verbosity = 3 if config.verbose else 1  # 1: errors only
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.api_keys = [api_key]
    params.ui = False
    return params
