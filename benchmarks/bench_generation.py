"""Side-by-side benchmark: openjev's 12-question request against one JSON-schema-constrained generation.

Run: `uv run python benchmarks/bench_generation.py [--requests N] [--model NAME] [--threads N]`
(default model: `smollm2-135m`; `--model qwen2.5-coder-1.5b-decisions` measures the default model of the server).

In one run, on the same model file and the same number of threads:

- **openjev**: the 12-question request of `bench_embedded.py` through the real server (a subprocess,
  `openjev serve` on the embedded backend), one request at a time, each about a different ticket
  number so no request finds another's state in the cache; once without bias removal
  (`x_debias: none`: one call per question after the warm-up) and once with the server's default.
- **naive**: what a user would try first: the same state and questions in one chat completion whose
  answer is constrained to a JSON schema (one property per question: `"yes"`/`"no"` for a yes/no
  question, the option names for a choice, the level names for a score), through llama.cpp's
  JSON-schema support (`response_format`), with llama.cpp loaded in this process by xllamacpp with
  openjev's engine parameters, no prompt cache and temperature 0.
- **prefill rate**: a single prompt of as many tokens as openjev computed in the same round, no
  cache, timed by llama.cpp itself. The *compute limit* is openjev's computed tokens divided by that rate:
  the time the prefill alone needs on this machine, which no scheduling of the calls can beat.

The three are interleaved (one of each per round), so a change of load on a shared machine affects
them alike. Printed: p50/p90 latency, decisions per second (answers / time spent), tokens prefilled
and generated per request, the ratio naive p50 / openjev p50 and openjev p50 / compute limit.
openjev's computed tokens are `usage.input_tokens - x-openjev-cached-tokens` (what llama.cpp
evaluated; the warm-up counted in full) and its generated tokens `usage.output_tokens` (one per call).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_embedded import SPEC_EXAMPLE, TWELVE_QUESTIONS, post, start_server, unique, wait_ready
from local_engine import LocalEngine, add_model_arguments, verified_model_path

from openjev.listen import free_port

NAIVE_SYSTEM = "You read the data the user gives you and answer every question about it in JSON."
MAX_ANSWER_TOKENS = 512
REQUEST_TIMEOUT = 1800  # seconds: a busy machine must slow the figures down, not fail them


@dataclass
class Measure:
    seconds: float
    decisions: int
    prefilled: int
    generated: int


def answer_schema(questions: dict[str, Any]) -> dict[str, Any]:
    """One required property per question, constrained to that question's possible answers."""
    properties: dict[str, Any] = {}
    for name, question in questions.items():
        if question["type"] == "noul":
            properties[name] = {"type": "string", "enum": ["yes", "no"]}
        else:
            properties[name] = {"type": "string", "enum": list(question["criteria"])}
    return {"type": "object", "properties": properties, "required": list(questions), "additionalProperties": False}


def naive_prompt(state: str, questions: dict[str, Any]) -> str:
    """The state and the questions as a user would write them, with every option and its description."""
    lines = [f"Data:\n{state}", "", "Questions:"]
    for name, question in questions.items():
        text = question.get("instructions") or "Is it true?"
        if question["type"] == "noul":
            lines.append(f'- "{name}": {text} Answer "yes" or "no".')
        elif question["type"] == "choice":
            options = "; ".join(
                f'"{option}"' + (f" ({description})" if description else "")
                for option, description in question["criteria"].items()
            )
            lines.append(f'- "{name}": {text} One of: {options}.')
        else:
            levels = ", ".join(f'"{level}"' for level in question["criteria"])
            lines.append(f'- "{name}": {text} From lowest to highest: {levels}.')
    lines.append("")
    lines.append("Reply with a JSON object that has one key per question.")
    return "\n".join(lines)


def naive_request(engine: LocalEngine, state: str, questions: dict[str, Any]) -> Measure:
    body = {
        "messages": [
            {"role": "system", "content": NAIVE_SYSTEM},
            {"role": "user", "content": naive_prompt(state, questions)},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answers", "schema": answer_schema(questions)},
        },
        "temperature": 0.0,
        "max_tokens": MAX_ANSWER_TOKENS,
        "cache_prompt": False,
        "seed": 0,
    }
    started = time.perf_counter()
    reply = engine.post("/v1/chat/completions", body)
    seconds = time.perf_counter() - started
    content = reply["choices"][0]["message"]["content"]
    answers = json.loads(content)
    valid = sum(1 for name in questions if answers.get(name) in answer_schema(questions)["properties"][name]["enum"])
    if valid != len(questions):
        raise RuntimeError(f"the constrained generation answered {valid} of {len(questions)} questions: {content}")
    usage = reply["usage"]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return Measure(
        seconds=seconds,
        decisions=valid,
        prefilled=int(usage["prompt_tokens"]) - int(cached),
        generated=int(usage["completion_tokens"]),
    )


def prefill_rate(engine: LocalEngine, tokens: int, seed: int) -> float:
    """Tokens per second of one cold prefill of `tokens` tokens of varied text, timed by llama.cpp."""
    words = [f"ticket {seed}-{i} reports item {i * 7919 % 1000} at desk {i % 97};" for i in range(tokens)]
    ids = engine.post("/tokenize", {"content": " ".join(words), "add_special": False})["tokens"][:tokens]
    reply = engine.post("/completion", {"prompt": ids, "n_predict": 1, "cache_prompt": False, "samplers": ["top_k"]})
    timings = reply["timings"]
    if int(timings["prompt_n"]) != tokens:
        raise RuntimeError(f"llama.cpp prefilled {timings['prompt_n']} tokens instead of {tokens}")
    return float(timings["prompt_per_second"])


def openjev_request(port: int, n: int, debias: str | None) -> Measure:
    """The 12-question request about ticket `n`; `debias` None leaves the server's default."""
    body = unique(TWELVE_QUESTIONS, n)
    if debias is not None:
        body = {**body, "x_debias": debias}
    sample = post(port, body, timeout=REQUEST_TIMEOUT)
    if sample.cached_tokens is None:
        raise RuntimeError("the server did not report its cached tokens (x-openjev-cached-tokens)")
    return Measure(
        seconds=sample.seconds,
        decisions=sample.questions,
        prefilled=sample.input_tokens - sample.cached_tokens,
        generated=sample.calls,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, runs: list[Measure]) -> list[str]:
    seconds = [m.seconds for m in runs]
    return [
        name,
        str(len(runs)),
        f"{statistics.median(seconds):.2f}",
        f"{percentile(seconds, 0.9):.2f}",
        f"{sum(m.decisions for m in runs) / sum(seconds):.2f}",
        f"{statistics.mean(m.prefilled for m in runs):.0f}",
        f"{statistics.mean(m.generated for m in runs):.0f}",
    ]


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for cells in rows:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=8, help="measured rounds (default 8)")
    add_model_arguments(parser)
    args = parser.parse_args()
    model_path = verified_model_path(args.model)
    os.environ["OPENJEV_MODEL"] = args.model
    os.environ["OPENJEV_THREADS"] = str(args.threads)
    os.environ["OPENJEV_REQUEST_TIMEOUT"] = str(REQUEST_TIMEOUT)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))  # so the server is stopped too
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="openjev-bench-")) / "server.log"
    process = start_server(port, log)
    engine = LocalEngine(model_path, args.threads)
    questions: dict[str, Any] = TWELVE_QUESTIONS["questions"]
    plain: list[Measure] = []
    ours: list[Measure] = []
    naive: list[Measure] = []
    rates: list[float] = []
    try:
        ready = wait_ready(port, process, timeout=300)
        print(f"server ready in {ready:.1f} s; {args.model}, {args.threads} threads, {os.cpu_count()} CPUs")
        post(port, unique(SPEC_EXAMPLE, 100_000), timeout=REQUEST_TIMEOUT)  # lazy initialisation, not measured
        naive_request(engine, "Ticket 0.", {"refund": questions["refund"]})
        for n in range(args.requests):
            plain.append(openjev_request(port, n, "none"))
            ours.append(openjev_request(port, n + args.requests, None))
            naive.append(naive_request(engine, unique(TWELVE_QUESTIONS, n)["state"], questions))
            rates.append(prefill_rate(engine, plain[-1].prefilled, seed=n))
            print(
                f"  round {n + 1}: openjev {plain[-1].seconds:.2f} s (default bias removal {ours[-1].seconds:.2f} s), "
                f"naive {naive[-1].seconds:.2f} s",
                flush=True,
            )
    finally:
        engine.close()
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    print()
    print_table(
        ["path", "n", "p50 s", "p90 s", "dec/s", "prefilled tok", "generated tok"],
        [
            row("openjev, no bias removal", plain),
            row("openjev, default bias removal", ours),
            row("naive JSON schema", naive),
        ],
    )
    naive_p50 = statistics.median(m.seconds for m in naive)
    rate = statistics.median(rates)
    print(
        f"\nprefill rate: {rate:.0f} tok/s (median of {len(rates)} cold prefills, each as long as the round's "
        "openjev computed without bias removal)"
    )
    for name, runs in (("no bias removal", plain), ("default bias removal", ours)):
        p50 = statistics.median(m.seconds for m in runs)
        computed = statistics.mean(m.prefilled for m in runs)
        limit = computed / rate
        print(
            f"openjev, {name}: naive p50 / openjev p50 x{naive_p50 / p50:.2f} (target >= 2); "
            f"{computed:.0f} tokens computed, compute limit {limit:.2f} s, "
            f"openjev p50 / compute limit x{p50 / limit:.2f} (target <= 1.25)"
        )


if __name__ == "__main__":
    main()
