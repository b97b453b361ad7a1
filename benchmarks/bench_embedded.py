"""Benchmark of `openjev serve` on the embedded backend (the default model on llama.cpp, CPU).

Run: `uv run python benchmarks/bench_embedded.py [--requests N] [--budget SECONDS]`
(`OPENJEV_MODEL=smollm2-135m` in the environment measures the small model instead.)

Starts the real server as a subprocess (the environment's `openjev` entry point, so the PID is the
server's own and its memory can be read), waits for GET /health to answer 200, then measures for
the example of docs/spec.md (3 questions) and for a 12-question request, at concurrency 1 and 4,
with the server's default bias removal and, for the example, without it (`x_debias: none`), so the
cost of debiasing is printed beside the plain path:

- latency median and p90 (client side, whole request);
- decisions per second (questions answered / wall time);
- tokens prefilled per request against the minimum. From the response: `usage.input_tokens` is the
  warm-up plus every branch, `x-openjev-prefix-tokens` the shared prefix P and
  `x-openjev-cached-tokens` the branch cache hits, so with N questions the minimum is
  `input_tokens - N*P` (the prefix once, every suffix once) and what the engine prefilled is at
  most `input_tokens - cached` (the warm-up counted as fully prefilled). Each request carries its
  own ticket number, so no request finds another's state in the cache.
- peak memory of the server (VmHWM from /proc/PID/status of each of its processes: Granian serves the
  app, and so runs the engine, in a worker process).

Every scenario stops starting requests when its share of the time budget is spent, so the whole
run stays bounded (default budget 150 s, plus start-up).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.listen import free_port

SPEC_EXAMPLE: dict[str, Any] = EXAMPLE_REQUEST

TWELVE_QUESTIONS: dict[str, Any] = {
    "model": "jev-latest",
    "state": (
        "Customer email: Hello, I ordered the Pro plan last week (order 88213) and my card was charged "
        "twice, once on Monday and again on Tuesday. Since the upgrade the desktop app also crashes when I "
        "open the reports tab, which blocks my team's month-end close on Friday. I have been a customer for "
        "six years and I am considering cancelling. Please fix this quickly."
    ),
    "questions": {
        "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"},
        "bug": {"type": "noul", "instructions": "Does the customer report a software defect?"},
        "churn": {"type": "noul", "instructions": "Is the customer at risk of cancelling?"},
        "angry": {"type": "noul", "instructions": "Is the tone hostile or abusive?"},
        "loyal": {"type": "noul", "instructions": "Is this a long-standing customer?"},
        "deadline": {"type": "noul", "instructions": "Does the customer mention a deadline?"},
        "department": {
            "type": "choice",
            "instructions": "Which team should own the ticket?",
            "criteria": {"billing": "Payments and refunds", "technical": "Software bugs", "sales": "New purchases"},
        },
        "channel": {
            "type": "choice",
            "instructions": "How should we reply?",
            "criteria": {"email": None, "phone call": None, "chat": None, "no reply": None},
        },
        "product": {
            "type": "choice",
            "instructions": "Which product is concerned?",
            "criteria": {"free plan": None, "pro plan": None, "enterprise plan": None},
        },
        "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Soon", "Urgent", "Now"]},
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
    },
}


@dataclass
class Sample:
    seconds: float
    questions: int
    calls: int
    input_tokens: int
    prefix_tokens: int
    cached_tokens: int | None


def start_server(port: int, log: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    executable = shutil.which("openjev", path=str(Path(sys.executable).parent)) or shutil.which("openjev")
    if executable is None:
        sys.exit("the `openjev` entry point is not installed in this environment: run `uv sync`")
    env = {**os.environ, "OPENJEV_LOG_LEVEL": "warning", "OPENJEV_BACKEND": "embedded", **(extra_env or {})}
    with log.open("wb") as out:
        return subprocess.Popen(
            [executable, "serve", "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=env
        )


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            sys.exit(f"the server exited with status {process.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return time.perf_counter() - started
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    sys.exit(f"the server was not ready after {timeout:.0f} s")


def unique(request: dict[str, Any], n: int) -> dict[str, Any]:
    """The same request about a different ticket number, so no request reuses another's state."""
    state = request["state"]
    if isinstance(state, str):
        return {**request, "state": f"Ticket {n}. {state}"}
    first = {**state[-1], "content": f"Ticket {n}. {state[-1]['content']}"}
    return {**request, "state": [*state[:-1], first]}


def post(port: int, body: dict[str, Any], *, timeout: float = 900.0) -> Sample:
    payload = json.dumps(body).encode()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    started = time.perf_counter()
    connection.request("POST", "/v1/systemone", payload, {"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    seconds = time.perf_counter() - started
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {data[:300]!r}")
    reply = json.loads(data)
    cached = response.getheader("x-openjev-cached-tokens")
    return Sample(
        seconds=seconds,
        questions=len(reply["answers"]),
        calls=int(reply["usage"]["output_tokens"]),
        input_tokens=int(reply["usage"]["input_tokens"]),
        prefix_tokens=int(response.getheader("x-openjev-prefix-tokens") or 0),
        cached_tokens=int(cached) if cached is not None else None,
    )


def run_scenario(
    port: int, request: dict[str, Any], concurrency: int, count: int, budget: float, seed: int
) -> tuple[list[Sample], float]:
    deadline = time.perf_counter() + budget
    samples: list[Sample] = []

    def worker(offset: int) -> None:
        n = offset
        while n < count and time.perf_counter() < deadline:
            samples.append(post(port, unique(request, seed + n)))
            n += concurrency

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker, i) for i in range(concurrency)]:
            future.result()
    return samples, time.perf_counter() - started


def process_tree(pid: int) -> list[int]:
    """The server and its descendants (Granian runs the app, and so the engine, in a worker process)."""
    tree, queue = [], [pid]
    while queue:
        current = queue.pop()
        tree.append(current)
        for task in Path(f"/proc/{current}/task").iterdir():
            children = (task / "children").read_text().split()
            queue.extend(int(child) for child in children)
    return tree


def peak_memory(pid: int) -> tuple[float, float]:
    """Largest peak RSS (VmHWM) of one process of the server, and the tree's current total RSS, in MiB."""
    peaks, resident = [], []
    for member in process_tree(pid):
        status = Path(f"/proc/{member}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        peaks.append(int(fields["VmHWM"].split()[0]) / 1024)
        resident.append(int(fields["VmRSS"].split()[0]) / 1024)
    return max(peaks), sum(resident)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=16, help="requests per scenario at most (default 16)")
    parser.add_argument("--budget", type=float, default=150.0, help="seconds for all scenarios (default 150)")
    args = parser.parse_args()
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="openjev-bench-")) / "server.log"
    process = start_server(port, log)
    rows: list[list[str]] = []
    try:
        ready = wait_ready(port, process, timeout=180)
        print(f"server ready in {ready:.1f} s (pid {process.pid}, log {log})")
        post(port, unique(SPEC_EXAMPLE, 10_000))  # first request: lazy initialisation, not measured
        plain = {**SPEC_EXAMPLE, "x_debias": "none"}
        scenarios = [
            ("spec example (3 q), no debias", plain, 1),
            ("spec example (3 q)", SPEC_EXAMPLE, 1),
            ("spec example (3 q)", SPEC_EXAMPLE, 4),
            ("12 questions", TWELVE_QUESTIONS, 1),
            ("12 questions", TWELVE_QUESTIONS, 4),
        ]
        share = args.budget / len(scenarios)
        measured: list[list[Sample]] = []
        for index, (name, request, concurrency) in enumerate(scenarios):
            samples, wall = run_scenario(port, request, concurrency, args.requests, share, seed=1000 * index)
            measured.append(samples)
            latencies = sorted(s.seconds for s in samples)
            p90 = latencies[min(len(latencies) - 1, round(0.9 * (len(latencies) - 1)))]
            minimum = statistics.mean(s.input_tokens - s.questions * s.prefix_tokens for s in samples)
            prefilled = statistics.mean(s.input_tokens - (s.cached_tokens or 0) for s in samples)
            rows.append(
                [
                    name,
                    str(concurrency),
                    str(len(samples)),
                    f"{statistics.median(latencies):.2f}",
                    f"{p90:.2f}",
                    f"{sum(s.questions for s in samples) / wall:.2f}",
                    f"{statistics.mean(s.calls for s in samples):.0f}",
                    f"{statistics.mean(s.input_tokens for s in samples):.0f}",
                    f"{statistics.mean(s.prefix_tokens for s in samples):.0f}",
                    f"{prefilled:.0f}",
                    f"{minimum:.0f}",
                    f"{prefilled / minimum:.2f}",
                ]
            )
            print(f"  done: {name} at concurrency {concurrency} ({len(samples)} requests in {wall:.1f} s)")
        hwm, rss = peak_memory(process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    header = [
        "request",
        "conc",
        "n",
        "p50 s",
        "p90 s",
        "dec/s",
        "calls",
        "input tok",
        "prefix",
        "prefilled",
        "minimum",
        "ratio",
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(
        f"\nserver peak memory: {hwm:.0f} MiB (VmHWM of its largest process); all its processes at the end: "
        f"{rss:.0f} MiB resident; {os.cpu_count()} CPUs"
    )
    print(
        "prefilled = input_tokens - x-openjev-cached-tokens (warm-up counted in full); minimum = prefix once + suffixes"
    )
    plain_run, debiased = measured[0], measured[1]
    p50 = statistics.median(s.seconds for s in debiased), statistics.median(s.seconds for s in plain_run)
    calls = statistics.mean(s.calls for s in debiased), statistics.mean(s.calls for s in plain_run)
    filled = [statistics.mean(s.input_tokens - (s.cached_tokens or 0) for s in run) for run in (debiased, plain_run)]
    print(
        f"cost of the default debiasing on the spec example (default / none): p50 {p50[0]:.2f} / {p50[1]:.2f} s "
        f"(x{p50[0] / p50[1]:.2f}), calls {calls[0]:.0f} / {calls[1]:.0f}, tokens prefilled {filled[0]:.0f} / "
        f"{filled[1]:.0f}"
    )


if __name__ == "__main__":
    main()
