"""What the API process adds per request: `openjev serve` against a zero-latency SGLang, next to a bare client.

Run: `uv run python benchmarks/bench_api_overhead.py [--seconds S] [--concurrency 1 8]`
(needs the Qwen3 tokenizer of scripts/fetch-test-assets).

Starts the in-repo SGLang emulator (`tests/sglang_emulator.py`, a subprocess, no latency: it answers
as soon as it has hashed the ids) and the real `openjev serve --connect` against it, with the Qwen3
tokenizer and an API key (so the key guard runs). Then, for each concurrency, three paths, every
request with a fresh state (a ticket number in the user turn):

- `openjev`: the three-question example request (`EXAMPLE_REQUEST`) posted to /v1/systemone;
- `decisions`: the same decision on OpenAI's wire (`DECISIONS_EXAMPLE`) posted to /v1/decisions: it
  makes exactly the same `/generate` calls, so the two differ only by their contract's translation;
- `bare`: an aiohttp client making the same two `/generate` calls directly to the emulator (the
  warm-up on the prefix, then the three branches in one batched call), with the bodies openjev
  sends: built here with openjev's own prompt plan and checked against what the emulator recorded
  from openjev;
- `bare-4`: the reference of the original measurement, four separate `/generate` calls (the
  warm-up, then the three branches at once, each on its own), the per-branch bodies openjev sent
  before it batched them.

Each path runs for a fixed time (`--seconds`), in slices that alternate between the paths
(`--slice`), so that all see the same background load on a shared machine. It prints p50/p90
latency and requests per second for each, openjev's ratios to each bare path against the targets
(p50 ≤ 1.5× and throughput ≥ 0.67× the bare client's) for both routes, and the CPU time per request
of each process: the load generator (this process), the API (the server and its Granian worker, from
/proc) and the emulator.
Every process shares the machine's cores, the load generator included, so the figures are for this
machine and this run; on a machine busy with other work, compare the CPU columns rather than the
latencies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import uvloop

from openjev.adapters.hf_codec import HFCodec
from openjev.bootstrap import limits_from
from openjev.contracts import systemone
from openjev.contracts.decisions.openapi import DECISIONS_EXAMPLE
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.labels import LabelSet, verify_labels
from openjev.domain.prompt import build_plan
from openjev.listen import free_port
from openjev.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
EMULATOR = ROOT / "tests" / "sglang_emulator.py"
TOKENIZER = ROOT / ".cache" / "test-assets" / "qwen3"
OPENJEV = Path(sys.executable).with_name("openjev")
API_KEY = "bench-api-key"
P50_TARGET = 1.5  # openjev p50 / bare p50, at most
THROUGHPUT_TARGET = 0.67  # openjev requests/s ÷ bare requests/s, at least
BARE_POOL = 500  # distinct pre-built bodies the bare client cycles through


def request_body(ticket: int) -> dict[str, Any]:
    """The spec example with this ticket number in the user turn: a state no earlier request had."""
    state = [dict(message) for message in EXAMPLE_REQUEST["state"]]
    state[-1]["content"] = f"{state[-1]['content']} (ticket {ticket})"
    return {**EXAMPLE_REQUEST, "state": state}


def decisions_body(ticket: int) -> dict[str, Any]:
    """The same decision as `request_body(ticket)`, on OpenAI's Decisions wire."""
    return {**DECISIONS_EXAMPLE, "input": request_body(ticket)["state"]}


ROUTES: dict[str, tuple[str, Callable[[int], dict[str, Any]]]] = {
    "openjev": ("/v1/systemone", request_body),
    "decisions": ("/v1/decisions", decisions_body),
}


GREEDY = {"max_new_tokens": 1, "temperature": 0}


@dataclass(frozen=True)
class Calls:
    """The /generate bodies of one request, without their rids: openjev's two, and the four of before."""

    warm: dict[str, Any]
    batch: dict[str, Any]  # every branch in one batched call: what openjev sends after the warm-up
    scores: tuple[dict[str, Any], ...]  # one call per branch: the original reference


def planned_calls(ticket: int, codec: HFCodec, settings: Settings, labels: LabelSet) -> Calls:
    """The bodies openjev's SGLang adapter builds for this request (see adapters/sglang/backend.py)."""
    decision = systemone.parse(json.dumps(request_body(ticket)).encode(), limits_from(settings), frozenset()).decision
    plan = build_plan(decision.state, decision.asks, codec, labels)
    prefix = list(plan.prefix_ids)
    warm = {"input_ids": prefix, "sampling_params": GREEDY}
    batch = {
        "input_ids": [prefix + list(branch.suffix_ids) for branch in plan.branches],
        "sampling_params": GREEDY,
        "return_logprob": True,
        "token_ids_logprob": [list(branch.label_ids) for branch in plan.branches],
        "logprob_start_len": -1,
    }
    scores = tuple(
        {
            "input_ids": prefix + list(branch.suffix_ids),
            "sampling_params": GREEDY,
            "return_logprob": True,
            "token_ids_logprob": list(branch.label_ids),
            "logprob_start_len": -1,
        }
        for branch in plan.branches
    )
    return Calls(warm=warm, batch=batch, scores=scores)


# -- processes ----------------------------------------------------------------------------------------


def http_json(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


@contextmanager
def emulator() -> Iterator[tuple[str, int]]:
    process = subprocess.Popen([sys.executable, str(EMULATOR), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("sglang-emulator listening on "):
            raise SystemExit(f"the emulator did not start: {line!r}")
        yield line.split()[-1], process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def openjev_server(sglang_url: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENJEV_")}
    env.update({"OPENJEV_TOKENIZER": str(TOKENIZER), "OPENJEV_API_KEY": API_KEY})
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(OPENJEV), "serve", "--connect", sglang_url, "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while http_json("GET", url + "/health")[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"openjev did not become ready:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield url, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (/proc/PID/stat fields 14 and 15)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / ticks


# -- load ------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """One path at one concurrency, summed over its time slices."""

    latencies: list[float] = field(default_factory=list)
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds by process: load generator, API, emulator

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def p90_ms(self) -> float:
        return statistics.quantiles(self.latencies, n=10)[-1] * 1000 if len(self.latencies) > 1 else self.p50_ms

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def cpu_ms_per_request(self, process: str) -> float:
        return self.cpu.get(process, 0.0) * 1000 / max(len(self.latencies), 1)


async def run_slice(one: Callable[[], Awaitable[None]], concurrency: int, seconds: float, into: Figures | None) -> None:
    """`concurrency` loops calling `one()` for `seconds`; the requests started in that time count (`into`)."""
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    stop_at = start + seconds

    async def worker() -> None:
        while loop.time() < stop_at:
            began = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    if into is not None:
        into.latencies += latencies
        into.seconds += loop.time() - start


class Bare:
    """One request's /generate calls straight to the emulator: the warm-up, then the branches.

    `batched`: the branches in one batched call, as openjev sends them; otherwise one call each, at once.
    """

    def __init__(self, session: aiohttp.ClientSession, url: str, pool: list[Calls], *, batched: bool) -> None:
        self._session = session
        self._url = url + "/generate"
        self._pool = pool
        self._batched = batched
        self._rid = 0
        self._next = 0

    def _new_rid(self) -> str:
        self._rid += 1
        return f"{self._rid:032x}"

    async def _post(self, body: dict[str, Any]) -> None:
        rid: str | list[str] = self._new_rid()
        if isinstance(body["input_ids"][0], list):
            rid = [rid, *(self._new_rid() for _ in body["input_ids"][1:])]
        data = msgspec.json.encode({**body, "rid": rid})
        async with self._session.post(self._url, data=data, headers={"Content-Type": "application/json"}) as reply:
            raw = await reply.read()
            if reply.status != 200:
                raise SystemExit(f"the emulator answered {reply.status}: {raw[:300]!r}")
            msgspec.json.decode(raw)

    async def __call__(self) -> None:
        self._next += 1
        calls = self._pool[self._next % len(self._pool)]
        await self._post(calls.warm)
        if self._batched:
            await self._post(calls.batch)
        else:
            await asyncio.gather(*(self._post(body) for body in calls.scores))


class ThroughOpenjev:
    """One three-question request through one of openjev's routes, each with a ticket number (a state) of its own."""

    def __init__(self, session: aiohttp.ClientSession, url: str, first_ticket: int, route: str = "openjev") -> None:
        path, self._body = ROUTES[route]
        self._session = session
        self._url = url + path
        self._next = first_ticket
        self._headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}

    async def __call__(self) -> None:
        self._next += 1
        data = msgspec.json.encode(self._body(self._next))
        async with self._session.post(self._url, data=data, headers=self._headers) as reply:
            raw = await reply.read()
            if reply.status != 200:
                raise SystemExit(f"openjev answered {reply.status}: {raw[:300]!r}")
            msgspec.json.decode(raw)


def check_same_bodies(emulator_url: str, api_url: str, expected: Calls) -> None:
    """One request through each route: the emulator must have received exactly the bodies the bare client sends."""
    for route, (path, body) in ROUTES.items():
        http_json("POST", emulator_url + "/_emulator/reset")
        status, answer = http_json("POST", api_url + path, body(0), headers={"Authorization": f"Bearer {API_KEY}"})
        if status != 200:
            raise SystemExit(f"openjev answered {status} on {path}: {answer}")
        recorded = http_json("GET", emulator_url + "/_emulator/requests")[1]["requests"]
        bodies = [{k: v for k, v in r["body"].items() if k != "rid"} for r in recorded if r["path"] == "/generate"]
        if bodies != [expected.warm, expected.batch]:
            raise SystemExit(f"the bare client's bodies differ from what {route} sent: update planned_calls")


async def measure(
    emulator_url: str,
    api_url: str,
    pids: dict[str, list[int]],
    pool: list[Calls],
    concurrencies: list[int],
    args: argparse.Namespace,
) -> None:
    """Per concurrency: every path warmed up, then measured in alternating slices (same background load)."""
    slices = max(1, round(args.seconds / args.slice))
    results: dict[tuple[int, str], Figures] = {}

    def cpu_now() -> dict[str, float]:
        return {"client": time.process_time(), **{name: cpu_seconds(group) for name, group in pids.items()}}

    for n, concurrency in enumerate(concurrencies):
        connector = aiohttp.TCPConnector(limit=concurrency * 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            paths: dict[str, Callable[[], Awaitable[None]]] = {
                "bare": Bare(session, emulator_url, pool, batched=True),
                "bare-4": Bare(session, emulator_url, pool, batched=False),
                "openjev": ThroughOpenjev(session, api_url, (n + 1) * 10**8),
                "decisions": ThroughOpenjev(session, api_url, (n + 1) * 10**8 + 5 * 10**7, "decisions"),
            }
            figures = {name: Figures() for name in paths}
            for one in paths.values():
                await run_slice(one, concurrency, args.warmup, None)
            for _ in range(slices):
                for name, one in paths.items():
                    http_json("POST", emulator_url + "/_emulator/reset")  # the emulator keeps every request
                    before = cpu_now()
                    await run_slice(one, concurrency, args.slice, figures[name])
                    for process, seconds in cpu_now().items():
                        figures[name].cpu[process] = figures[name].cpu.get(process, 0.0) + seconds - before[process]
            for name, result in figures.items():
                results[(concurrency, name)] = result
    report(results, concurrencies)


def report(results: dict[tuple[int, str], Figures], concurrencies: list[int]) -> None:
    """The figures of every path, then openjev's ratios to each bare path."""
    print(f"{'':>16} {'latency ms':>17} {'':>8} {'CPU ms per request':>25}")
    print(f"{'clients':>7} {'path':>8} {'p50':>8} {'p90':>8} {'req/s':>8} {'client':>8} {'API':>8} {'emulator':>8}")
    for (concurrency, name), result in results.items():
        api = f"{result.cpu_ms_per_request('api'):.2f}" if name in ROUTES else "-"
        print(
            f"{concurrency:>7} {name:>8} {result.p50_ms:>8.2f} {result.p90_ms:>8.2f} {result.rate:>8.1f} "
            f"{result.cpu_ms_per_request('client'):>8.2f} {api:>8} {result.cpu_ms_per_request('emulator'):>8.2f}"
        )
    print()
    print(
        f"{'clients':>7} {'route':>9} {'against':>8} {'p50 ratio':>10} {'≤ 1.5':>6} {'throughput ratio':>17} "
        f"{'≥ 0.67':>7} {'CPU-bound':>10}"
    )
    for concurrency in concurrencies:
        for route in ROUTES:
            served = results[(concurrency, route)]
            for reference in ("bare", "bare-4"):
                bare = results[(concurrency, reference)]
                p50_ratio = served.p50_ms / bare.p50_ms
                rate_ratio = served.rate / bare.rate
                print(
                    f"{concurrency:>7} {route:>9} {reference:>8} {p50_ratio:>10.2f} "
                    f"{'ok' if p50_ratio <= P50_TARGET else 'MISS':>6} {rate_ratio:>17.2f} "
                    f"{'ok' if rate_ratio >= THROUGHPUT_TARGET else 'MISS':>7} {cpu_bound_ratio(bare, served):>10.2f}"
                )
    print(
        "\nCPU-bound: the throughput ratio if every core were busy with these processes alone "
        "(CPU per request of the bare path ÷ that of the openjev path, load generator and emulator included)."
    )


def cpu_bound_ratio(bare: Figures, served: Figures) -> float:
    def total(figures: Figures) -> float:
        return sum(figures.cpu_ms_per_request(process) for process in ("client", "api", "emulator"))

    return total(bare) / total(served)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per path and concurrency")
    parser.add_argument("--slice", type=float, default=1.0, help="the paths alternate every this many seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per path before measuring")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8], help="concurrent clients")
    args = parser.parse_args()
    if not (TOKENIZER / "tokenizer.json").is_file():
        raise SystemExit("the Qwen3 tokenizer is missing: run scripts/fetch-test-assets")

    settings = load_settings({}, backend="sglang", tokenizer=str(TOKENIZER))
    codec = HFCodec.load(str(TOKENIZER))
    labels = verify_labels(codec, settings.max_options)
    pool = [planned_calls(10**9 + i, codec, settings, labels) for i in range(BARE_POOL)]

    with (
        tempfile.TemporaryDirectory() as tmp,
        emulator() as (emulator_url, emulator_pid),
        openjev_server(emulator_url, Path(tmp) / "serve.log") as (api_url, process),
    ):
        check_same_bodies(emulator_url, api_url, planned_calls(0, codec, settings, labels))
        pids = {"api": [process.pid, *descendants(process.pid)], "emulator": [emulator_pid]}
        print(
            f"openjev at {api_url} (pids {pids['api']}) against the emulator at {emulator_url}; "
            f"{args.seconds:g} s per path and concurrency, in {args.slice:g} s slices, after {args.warmup:g} s "
            "of warm-up\n",
            flush=True,
        )
        uvloop.run(measure(emulator_url, api_url, pids, pool, args.concurrency, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
