"""Liveness under load: how fast GET /health/live answers while each known stall case is in progress.

Run: `uv run python benchmarks/bench_liveness.py [--seconds S]` (after `scripts/fetch-test-assets`).

Starts the real server (`python -m openjev.cli serve`, the fake backend with the real Qwen3
tokenizer from the test assets, so tokenizing costs what it costs in production) on a free
loopback port. For the /health flood it starts the in-repo SGLang emulator, whose /health takes
1 s like real SGLang's (a one-token generation), and a second server on the SGLang backend
pointed at it. Then, for each case, a probe thread opens a fresh connection and sends
`GET /health/live` every 20 ms while the load runs, and the script prints the probe latencies
(count, p50, max) and whether the worst stayed under 100 ms:

- zstd frames: 4 concurrent bodies of ~1.8 MB of empty zstd frames (refused as too many frames);
- gzip members: 4 concurrent bodies of 100,000 empty gzip members (refused likewise);
- huge state: 4 concurrent 2 MB states (refused from their byte counts, before tokenizing);
- large state: 4 concurrent ~120 kB states that fit (tokenized and answered);
- trickling uploads: 300 connections each sending one body byte every 0.5 s (answered 408);
- /health flood: 300 concurrent GET /health on the SGLang-backed server (coalesced).

Every load stops after `--seconds` (default 6) and every process started here is stopped at the
end. It prints figures; it asserts nothing (the regression tests live in tests/).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backports import zstd

from openjev.listen import free_port

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER = ROOT / ".cache" / "test-assets" / "qwen3"
EMULATOR = ROOT / "tests" / "sglang_emulator.py"
HOST = "127.0.0.1"
BUDGET_MS = 100.0
PROBE_EVERY_S = 0.02
QUESTIONS = {
    "refund": {"type": "noul", "instructions": "Does the user request a refund?"},
    "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["Routine", "Urgent", "Emergency"]},
}
TEXT = "The quick brown fox jumps over the lazy dog. "


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENJEV_", "TYPESAFE_"))}
    return {**env, "OPENJEV_LOG_LEVEL": "warning", **extra}


@contextmanager
def serve(env: dict[str, str]) -> Iterator[int]:
    """`openjev serve` on a free port with `env`, until it answers /health with 200."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "openjev.cli", "serve", "--port", str(port)],
        env=clean_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while request(port, "GET", "/health")[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not become ready (exit code {process.poll()})")
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


@contextmanager
def emulator(health_delay: float) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(EMULATOR), "--port", "0"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[-1]
        port = int(url.rsplit(":", 1)[1])
        status, _ = request(port, "POST", "/_emulator/config", json.dumps({"health_delay": health_delay}).encode())
        assert status == 200, status
        yield url
    finally:
        process.terminate()
        process.wait(15)


def request(port: int, method: str, path: str, body: bytes | None = None, **headers: str) -> tuple[int, float]:
    """(status, seconds) of one request on a fresh connection; status 0 when it could not be made."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    except OSError:
        return 0, time.perf_counter() - started
    finally:
        connection.close()


class Probe:
    """GET /health/live every 20 ms on a fresh connection, recording each latency (a failure counts as inf)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            status, seconds = request(self.port, "GET", "/health/live")
            self.latencies.append(seconds if status == 200 else float("inf"))
            self._stop.wait(PROBE_EVERY_S)


def concurrently(count: int, work: Callable[[], Any]) -> list[Any]:
    results: list[Any] = [None] * count

    def run(i: int) -> None:
        results[i] = work()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def posts(port: int, body: bytes, count: int = 4, **headers: str) -> Callable[[], str]:
    def load() -> str:
        replies = concurrently(count, lambda: request(port, "POST", "/v1/systemone", body, **headers))
        return ", ".join(f"{status} in {seconds:.2f} s" for status, seconds in replies)

    return load


def trickle(port: int, seconds: float, connections: int = 300) -> Callable[[], str]:
    async def one() -> str:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError as exc:
            return f"connect failed: {exc.__class__.__name__}"
        head = f"POST /v1/systemone HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        writer.write((head + "Content-Length: 100000\r\n\r\n").encode())
        ended = time.monotonic() + seconds
        try:
            while time.monotonic() < ended:
                writer.write(b" ")
                await writer.drain()
                try:
                    line = await asyncio.wait_for(reader.readline(), 0.5)
                except TimeoutError:
                    continue
                return line.decode(errors="replace").split(" ")[1] if line else "closed"
            return "still open"
        except OSError:
            return "closed"
        finally:
            writer.close()

    async def all_of_them() -> str:
        outcomes = await asyncio.gather(*(one() for _ in range(connections)))
        return ", ".join(f"{outcomes.count(o)}× {o}" for o in sorted(set(outcomes)))

    return lambda: asyncio.run(all_of_them())


def flood(port: int, count: int = 300) -> Callable[[], str]:
    async def one() -> str:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(f"GET /health HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
            line = await asyncio.wait_for(reader.readline(), 30)
            writer.close()
            return line.decode().split(" ")[1] if line else "closed"
        except (OSError, TimeoutError) as exc:
            return exc.__class__.__name__

    async def all_of_them() -> str:
        started = time.perf_counter()
        outcomes: list[str] = await asyncio.gather(*(one() for _ in range(count)))
        took = time.perf_counter() - started
        return ", ".join(f"{outcomes.count(o)}× {o}" for o in sorted(set(outcomes))) + f" in {took:.2f} s"

    return lambda: asyncio.run(all_of_them())


def measure(name: str, port: int, load: Callable[[], str]) -> None:
    with Probe(port) as probe:
        time.sleep(0.1)
        outcome = load()
        time.sleep(0.1)
    latencies = [s * 1000 for s in probe.latencies]
    worst = max(latencies)
    verdict = "yes" if worst < BUDGET_MS else "NO"
    print(
        f"{name:<20} probes {len(latencies):>4}  p50 {statistics.median(latencies):7.1f} ms  "
        f"max {worst:7.1f} ms  < {BUDGET_MS:.0f} ms: {verdict:<3}  | load: {outcome}",
        flush=True,
    )


def system_one(state: str) -> bytes:
    return json.dumps({"model": "jev-latest", "state": state, "questions": QUESTIONS}).encode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="how long the trickling connections last")
    args = parser.parse_args()
    if not (TOKENIZER / "tokenizer.json").is_file():
        raise SystemExit("the Qwen3 tokenizer is missing: run scripts/fetch-test-assets")
    frames = zstd.compress(b"") * 200_000
    members = gzip.compress(b"") * 100_000
    huge = (TEXT * 45_000)[:2_000_000]
    large = (TEXT * 3_000)[:120_000]
    print(f"/health/live latency (fresh connection every {PROBE_EVERY_S * 1000:.0f} ms) while each case runs:")
    with serve({"OPENJEV_BACKEND": "fake", "OPENJEV_TOKENIZER": str(TOKENIZER)}) as port:
        measure("idle", port, lambda: (time.sleep(1.0), "nothing")[1])
        measure("zstd frames ×4", port, posts(port, frames, **{"Content-Encoding": "zstd"}))
        measure("gzip members ×4", port, posts(port, members, **{"Content-Encoding": "gzip"}))
        measure("huge state ×4", port, posts(port, system_one(huge)))
        measure("large state ×4", port, posts(port, system_one(large)))
        measure("trickling ×300", port, trickle(port, args.seconds))
    with (
        emulator(health_delay=1.0) as url,
        serve({"OPENJEV_SGLANG_URL": url, "OPENJEV_TOKENIZER": str(TOKENIZER)}) as port,
    ):
        measure("/health flood ×300", port, flood(port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
