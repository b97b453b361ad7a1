"""How SGLang's router spreads openjev's calls over two workers, by routing policy.

Two emulated workers (`tests/sglang_emulator.py`, each /generate taking `--slow` seconds) behind the
real router (sglang-router 0.3.2, `tests/sglang/router.py`), all on loopback, and the SGLang adapter
driving it as `openjev serve --connect ROUTER` does: per request, a warm-up of its prefix, then one
call per question, all at once. `--clients` clients send `--requests` requests in all, each with its
own state behind a shared chat-template head. For each policy it prints the requests (warm-ups) and
the /generate calls each worker received, how many requests had all their calls on one worker, and
the share of the questions' prompt tokens the worker found cached (the prefix its warm-up left).

    uv run python benchmarks/bench_router_policy.py [--requests 40] [--clients 4] [--questions 4]
        [--slow 0.02] [--policies cache_aware round_robin power_of_two]

It prints figures and asserts nothing (tests/sglang/test_router.py holds the regression tests).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.domain.ports import ScoreCall
from openjev.logs import configure_logging
from tests.sglang.router import router_process
from tests.sglang_emulator import EmulatorConfig, EmulatorThread

HEAD = [151644, 8948, 198, *range(3000, 3040), 151645, 198, 151644, 872, 198]  # system turn + user turn start
LABELS = (32, 33, 34, 35)


@dataclass
class Outcome:
    policy: str
    warmups: list[int]  # per worker
    calls: list[int]  # per worker: every /generate
    on_one_worker: int  # requests whose warm-up and questions all went to one worker
    cached_share: float  # of the questions' prompt tokens


def state(n: int) -> list[int]:
    return [*HEAD, *range(10_000 + 500 * n, 10_000 + 500 * n + 300), 151645, 198, 151644, 77091, 198]


async def one_request(backend: SGLangBackend, n: int, questions: int, requests: dict[str, int]) -> tuple[int, int]:
    """Warm-up then the questions at once; (cached, prompt) tokens of the questions."""
    prefix = state(n)
    warm = uuid.uuid4().hex
    requests[warm] = n
    await backend.warm(warm, prefix)
    calls = [ScoreCall(uuid.uuid4().hex, [*prefix, 1000 + q, 1100 + q], LABELS) for q in range(questions)]
    requests.update((call.call_id, n) for call in calls)
    scores = await backend.score_many(calls)
    cached = sum(score.usage.cached_tokens or 0 for score in scores)
    return cached, sum(len(call.token_ids) for call in calls)


async def drive(url: str, total: int, clients: int, questions: int, requests: dict[str, int]) -> tuple[int, int]:
    backend = SGLangBackend(url, startup_timeout=30)  # no context setting: the workers say theirs
    await backend.start()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(total):
        queue.put_nowait(n)
    tokens = [0, 0]

    async def client() -> None:
        while not queue.empty():
            cached, prompt = await one_request(backend, queue.get_nowait(), questions, requests)
            tokens[0] += cached
            tokens[1] += prompt

    try:
        await asyncio.gather(*(client() for _ in range(clients)))
    finally:
        await backend.close()
    return tokens[0], tokens[1]


def measure(policy: str, args: argparse.Namespace, folder: Path) -> Outcome:
    with (
        EmulatorThread(EmulatorConfig(slow=args.slow)) as one,
        EmulatorThread(EmulatorConfig(slow=args.slow)) as two,
        router_process([one.url, two.url], folder / f"{policy}.log", policy=policy) as router,
    ):
        for emulated in (one, two):
            emulated.emulator.reset()  # the router's own probes are not openjev's calls
        requests: dict[str, int] = {}  # rid -> the request it belongs to
        cached, prompt = asyncio.run(drive(router.url, args.requests, args.clients, args.questions, requests))
        bodies = [[b for b in w.emulator.generate_bodies() if b.get("rid") in requests] for w in (one, two)]
    warmups = [sum(1 for b in worker if not b.get("token_ids_logprob")) for worker in bodies]
    holders: dict[int, set[int]] = {}
    for index, worker in enumerate(bodies):
        for body in worker:
            holders.setdefault(requests[body["rid"]], set()).add(index)
    on_one = Counter(len(h) for h in holders.values())[1]
    return Outcome(policy, warmups, [len(worker) for worker in bodies], on_one, cached / prompt if prompt else 0.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--slow", type=float, default=0.02, help="seconds each /generate takes on a worker")
    parser.add_argument("--policies", nargs="+", default=["cache_aware", "round_robin", "power_of_two"])
    args = parser.parse_args()
    configure_logging("error")  # the adapter's start-up lines, once per policy, are not the figures
    print(
        f"{args.requests} requests from {args.clients} clients, {args.questions} questions each "
        f"(a warm-up + {args.questions} calls), two emulated workers, /generate {args.slow:g} s"
    )
    print(f"{'policy':<14} {'requests/worker':<16} {'calls/worker':<14} {'on one worker':<14} questions' tokens cached")
    with tempfile.TemporaryDirectory() as folder:
        for policy in args.policies:
            o = measure(policy, args, Path(folder))
            print(
                f"{o.policy:<14} {'/'.join(map(str, o.warmups)):<16} {'/'.join(map(str, o.calls)):<14} "
                f"{o.on_one_worker}/{args.requests:<11} {o.cached_share:.0%}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
