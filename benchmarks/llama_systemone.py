"""llama.cpp's own /v1/systemone on openjev's weights, for `bench_vs_vllm.py`'s third column.

llama.cpp's server (xllamacpp's, the build openjev's llama.cpp engine runs) answers System One
requests itself for a GGUF that says it is a decision model: `<arch>.decision.type` and a
`tokenizer.chat_template.systemone` template. `ensure_decision_gguf` writes, once, outside the
repository, a copy of the GGUF openjev serves with that metadata added (type `openjev`: letter labels
the template writes, yes before no), the weights untouched; `serve` runs llama.cpp's server on it
with its own defaults, its threads and context set, until SIGTERM.

Run: `uv run python benchmarks/llama_systemone.py serve MODEL.gguf --port P [--threads N]`.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from vllm_setup import BENCH_CACHE, served_gguf

from openjev.adapters.embedded.decision_prompt import SYSTEMONE_TEMPLATE
from openjev.adapters.embedded.gguf_file import read_gguf_metadata, with_records

# ChatML, as the Qwen2.5 models are prompted: the state, the question, one lettered line per option,
# then the assistant's turn opens on the answer letter.
TEMPLATE = """<|im_start|>system
Answer the question about the data with the letter of one option.<|im_end|>
<|im_start|>user
{% if state is string %}{{ state }}{% else %}{{ state | tojson }}{% endif %}

Question: {{ instructions }}
{% for option in options %}{{ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[loop.index0] }}) \
{{ option.key }}{% if option.description is not none %}: {{ option.description }}{% endif %}
{% endfor %}<|im_end|>
<|im_start|>assistant
"""
CONTEXT = 4096  # as vLLM's --max-model-len in the benchmark


def ensure_decision_gguf() -> Path:
    """The served GGUF with decision metadata added (written once, then reused)."""
    source, stem = served_gguf()
    target = BENCH_CACHE / f"{stem}.systemone.gguf"
    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    arch = read_gguf_metadata(source, arrays=False)["general.architecture"]
    BENCH_CACHE.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    print(f"setup: writing {target} ({source.name} with a decision type and template)", flush=True)
    extra = {f"{arch}.decision.type": "openjev", SYSTEMONE_TEMPLATE: TEMPLATE}
    os.replace(with_records(source, partial, extra), target)
    return target


def serve(model: Path, port: int, threads: int) -> None:
    import xllamacpp  # type: ignore[import-untyped]

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = CONTEXT
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.ui = False
    server = xllamacpp.Server(params)
    print(f"llama.cpp's server listening on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    del server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve MODEL on 127.0.0.1:PORT until SIGTERM")
    run.add_argument("model", type=Path)
    run.add_argument("--port", type=int, required=True)
    run.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # before the server's threads start
    serve(args.model, args.port, args.threads)


if __name__ == "__main__":
    main()
