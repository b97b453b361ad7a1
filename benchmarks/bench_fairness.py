"""One client must not starve the others: the README example beside a large request, on the default model.

Three measurements against one `openjev serve` (started here on a free port, or `--url`):

1. solo: the README example (a new state each time), `--rounds` times: its p50;
2. beside a large request: another client sends, back to back, a ~3,000-token state with 8
   questions while the README example is asked `--rounds` times: every answer's status and the
   p50, as a ratio to the solo p50 (the goal: every one answered, at most 4x);
3. after a large request's client goes away: a large request is sent and its connection closed
   after `--abandon-after` seconds; the README example sent right then is answered within its solo
   latency + 5 s (the goal), which needs the engine to stop the abandoned work promptly.

    uv run python benchmarks/bench_fairness.py [--url URL] [--rounds 5]

Run it on an idle machine: it prints figures, it asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openjev.http.openapi_docs import EXAMPLE_REQUEST
from tests.smoke.servers import openjev_server, wait_ready

LARGE_QUESTIONS = {
    f"q{i}": {"type": "noul", "instructions": text}
    for i, text in enumerate(
        [
            "Does the log show an out-of-memory kill?",
            "Did the deployment roll back?",
            "Is a database migration involved?",
            "Did any health check fail?",
            "Is the failure caused by a configuration change?",
            "Were customers affected?",
            "Is a rollback recommended?",
            "Should the on-call engineer be paged?",
        ]
    )
}


def large_state(seed: int, tokens: int = 3000) -> str:
    """A deployment log of about `tokens` tokens (about 37 a line with the Qwen tokenizer)."""
    rng = random.Random(seed)
    services = ["api", "worker", "db", "cache", "gateway", "scheduler"]
    lines = [
        f"2026-12-03T10:{i // 60:02d}:{i % 60:02d}Z {rng.choice(services)} "
        f"{rng.choice(['INFO', 'WARN', 'ERROR'])} request {rng.randrange(10**6)} took {rng.randrange(5, 900)} ms"
        for i in range(tokens * 250 // 9175)
    ]
    return "\n".join(lines)


def small_body(seed: int) -> bytes:
    rng = random.Random(seed)
    text = (
        f"Hello, this is customer {rng.randrange(10**6)}. I was charged twice for order {rng.randrange(10**5)} "
        f"on {rng.choice(['Monday', 'Tuesday', 'Friday'])}. Please refund the duplicate charge of "
        f"${rng.randrange(10, 500)}.99."
    )
    return json.dumps({**EXAMPLE_REQUEST, "state": [{"role": "user", "content": text}]}).encode()


def large_body(seed: int) -> bytes:
    return json.dumps({"model": "jev-latest", "state": large_state(seed), "questions": LARGE_QUESTIONS}).encode()


def ask(url: str, body: bytes) -> tuple[int, float]:
    started = time.perf_counter()
    request = urllib.request.Request(url + "/v1/systemone", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=900) as reply:
            reply.read()
            status = reply.status
    except urllib.error.HTTPError as error:
        status = error.code
    return status, time.perf_counter() - started


def abandon(url: str, body: bytes, after: float) -> None:
    """Send `body` and close the connection after `after` seconds, as a client that gave up."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=after + 5)
    connection.request("POST", "/v1/systemone", body=body, headers={"Content-Type": "application/json"})
    time.sleep(after)
    connection.close()


def measure(url: str, rounds: int, abandon_after: float) -> dict[str, Any]:
    solo = [ask(url, small_body(1000 + i)) for i in range(rounds)]
    stop = threading.Event()
    large: list[tuple[int, float]] = []

    def large_client() -> None:
        seed = 0
        while not stop.is_set():
            large.append(ask(url, large_body(seed)))
            seed += 1

    thread = threading.Thread(target=large_client, daemon=True)
    thread.start()
    time.sleep(2.0)  # the large request is under way
    beside = [ask(url, small_body(2000 + i)) for i in range(rounds)]
    stop.set()
    thread.join()
    after: list[tuple[int, float]] = []
    for i in range(max(1, rounds // 2)):
        abandon(url, large_body(100 + i), abandon_after)
        after.append(ask(url, small_body(3000 + i)))
    solo_p50 = statistics.median(t for _, t in solo)
    return {
        "solo_p50_s": round(solo_p50, 3),
        "beside_statuses": [s for s, _ in beside],
        "beside_p50_s": round(statistics.median(t for _, t in beside), 3),
        "beside_max_s": round(max(t for _, t in beside), 3),
        "beside_ratio": round(statistics.median(t for _, t in beside) / solo_p50, 2),
        "large_requests": [(s, round(t, 1)) for s, t in large],
        "after_abandon_s": [round(t, 3) for _, t in after],
        "after_abandon_goal_s": round(solo_p50 + 5.0, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="an already running server; otherwise `openjev serve` is started here")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--abandon-after", type=float, default=3.0)
    args = parser.parse_args()
    if args.url:
        result = measure(args.url, args.rounds, args.abandon_after)
    else:
        with openjev_server(env={"OPENJEV_REQUEST_TIMEOUT": "900"}) as url:
            wait_ready(url, timeout=900)
            ask(url, small_body(0))  # warm-up, unmeasured
            result = measure(url, args.rounds, args.abandon_after)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
