"""llama.cpp loaded in the benchmark's own process with openjev's engine parameters (xllamacpp).

The benchmarks use it to call llama.cpp directly, beside (not through) the openjev server: its HTTP
routes on a private loopback port for JSON replies, and the in-process streaming call for scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xllamacpp  # type: ignore[import-untyped]

from openjev.adapters.embedded.llama_engine import EngineConfig, available_cpus, engine_params
from openjev.adapters.embedded.merged import engine_file
from openjev.adapters.embedded.model import resolve_model_path


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """`--model` (a packaged model's name, SmolLM2 by default) and `--threads`."""
    parser.add_argument("--model", default="smollm2-135m", help="packaged model name (default smollm2-135m)")
    parser.add_argument("--threads", type=int, default=available_cpus(), help="llama.cpp threads (default: CPUs)")


def verified_model_path(model: str) -> Path:
    """The model file the server would load for `model`, assembled and sha256-checked if packaged."""
    cache = Path.home() / ".cache" / "openjev"
    model_path, packaged = resolve_model_path(model, cache)
    return engine_file(packaged, model_path, cache, workers=available_cpus())[0]  # a fine-tune: merged


class LocalEngine:
    """One xllamacpp `Server`: openjev's parameters, `slots` slots, optionally a directory for slot files."""

    def __init__(self, model_path: Path, threads: int, *, slots: int = 1, slot_files: Path | None = None) -> None:
        self._key = secrets.token_urlsafe(16)
        config = EngineConfig(model_path=model_path, threads=threads, parallel_slots=slots, slot_context=4096)
        params = engine_params(config, self._key)
        if slot_files is not None:
            params.slot_save_path = f"{slot_files}{os.sep}"  # llama.cpp appends the file name as is
        self._server: Any = xllamacpp.Server(params)
        self._address = str(self._server.listening_address)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON request to one of llama.cpp's HTTP routes, with this engine's private key."""
        request = urllib.request.Request(
            self._address + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=1800) as response:
            reply: dict[str, Any] = json.loads(response.read())
            return reply

    def complete(self, body: dict[str, Any], on_chunk: Callable[[bytes], bool]) -> None:
        """A streamed completion in the calling thread (llama.cpp releases the GIL), as the backend runs it."""
        self._server.handle_completions(json.dumps(body).encode(), on_chunk)

    def close(self) -> None:
        self._server = None
