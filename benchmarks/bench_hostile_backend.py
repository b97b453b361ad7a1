"""Memory and liveness of the real server while its SGLang backend sends a hostile /generate reply.

Run: `uv run python benchmarks/bench_hostile_backend.py [--seconds S] [--modes M ...]`
(after `scripts/fetch-test-assets`: the server tokenizes with the Qwen3 tokenizer of the test assets).

For each mode of the hostile stand-in (`tests/sglang/hostile_backend.py`: a 10^12 Content-Length,
an endless chunked body, an endless body framed by the close, a non-ASCII digit in Content-Length)
it starts the stand-in and `openjev serve --connect` on it (request deadline `--seconds`, default
15), sends POST /v1/systemone requests one after another for `--seconds` (one client: a request
that runs to the deadline is the only one), and meanwhile samples the resident memory of the
server's process tree every 0.25 s and sends GET /health/live every 20 ms on a fresh connection. It
prints the requests' statuses and times, the largest memory growth over the start, and the
liveness latencies (p50, max). A server whose memory grows past `--max-growth-mb` (default 8000) is stopped there, to
spare the machine. It asserts nothing (tests/sglang/test_hostile_backend.py holds the regression tests).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_liveness import HOST, TOKENIZER, Probe, request

from openjev.listen import free_port

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "sglang" / "hostile_backend.py"
MODES = ("huge-length", "endless-chunked", "unframed", "non-ascii-length")
QUESTIONS = {"refund": {"type": "noul", "instructions": "Does the user request a refund?"}}


def tree_rss_bytes(root: int) -> int:
    """Resident memory of `root` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


@contextmanager
def process(args: list[str], env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
    )
    try:
        yield child
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
            try:
                child.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


def measure(mode: str, seconds: float, max_growth: int) -> dict[str, object]:
    hostile_args = [sys.executable, str(HOSTILE), "--mode", mode]
    with process(hostile_args) as hostile:
        assert hostile.stdout is not None
        url = hostile.stdout.readline().split()[-1]
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
        env |= {"OPENJEV_TOKENIZER": str(TOKENIZER), "OPENJEV_REQUEST_TIMEOUT": str(seconds),
                "OPENJEV_LOG_LEVEL": "error"}  # fmt: skip
        serve = [sys.executable, "-m", "openjev.cli", "serve", "--connect", url, "--port", str(port)]
        with process(serve, env) as server:
            deadline = time.monotonic() + 120
            while request(port, "GET", "/health")[0] != 200:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{mode}: the server did not become ready (exit code {server.poll()})")
                time.sleep(0.2)
            time.sleep(1.0)
            base = tree_rss_bytes(server.pid)
            answer: dict[str, object] = {}
            answers: list[tuple[int, float]] = []
            body = json.dumps({"model": "jev-latest", "state": "I was charged twice.", "questions": QUESTIONS})
            ends = time.monotonic() + seconds

            def ask() -> None:
                while time.monotonic() < ends and "stopped" not in answer:
                    answers.append(request(port, "POST", "/v1/systemone", body.encode()))

            asking = threading.Thread(target=ask, daemon=True)
            peak = 0
            with Probe(port) as probe:
                asking.start()
                while asking.is_alive():
                    peak = max(peak, tree_rss_bytes(server.pid) - base)
                    if peak > max_growth:
                        os.killpg(server.pid, signal.SIGKILL)
                        answer["stopped"] = f"killed at +{peak / 1e6:.0f} MB"
                        break
                    asking.join(0.25)
            latencies = [x for x in probe.latencies if x != float("inf")]
    statuses = sorted({status for status, _ in answers})
    return {
        "mode": mode,
        "requests": len(answers),
        "statuses": statuses,
        "slowest_s": round(max((t for _, t in answers), default=0.0), 2),
        "peak_growth_mb": round(peak / 1e6),
        "live_p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "live_max_ms": round(max(latencies) * 1000, 1) if latencies else None,
        "live_failed": len(probe.latencies) - len(latencies),
        **({"stopped": answer["stopped"]} if "stopped" in answer else {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="the server's request deadline")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--max-growth-mb", type=int, default=8000)
    args = parser.parse_args()
    if not (TOKENIZER / "tokenizer.json").is_file():
        raise SystemExit("the Qwen3 tokenizer is missing: run scripts/fetch-test-assets first")
    print(f"host {HOST}, request deadline {args.seconds:g} s")
    for mode in args.modes:
        print(json.dumps(measure(mode, args.seconds, args.max_growth_mb * 1_000_000)), flush=True)


if __name__ == "__main__":
    main()
