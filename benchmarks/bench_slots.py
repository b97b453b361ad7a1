"""Benchmark: the branches of one request in one llama.cpp slot, or together in several slots.

Run: `uv run python benchmarks/bench_slots.py [--rounds N] [--slots K] [--model NAME] [--threads N]`
(default model: `smollm2-135m`).

openjev prefills a request's shared prefix once (the warm-up) and then scores every branch (prefix +
one question's suffix) in the slot that holds the prefix, one after another. llama.cpp can also
decode several slots in one batch (continuous batching), so the branches could run together in K
slots if each of them starts from the prefix. This measures, on llama.cpp loaded here with
openjev's engine parameters and openjev's own warm-up and scoring requests:

- `one slot`: warm-up in slot 0, then every branch submitted at once to slot 0 (what openjev does);
- `K slots, copied prefix`: warm-up in slot 0, its cache saved and restored into the K-1 other slots
  (llama.cpp's slot save/restore), then the branches submitted at once, spread over the K slots;
- `K slots, prefilled prefix`: the warm-up submitted to all K slots at once (one batch), then the
  branches spread over the K slots.

Each round draws a new prefix and new suffixes (token ids, lengths as in the 12-question request of
bench_embedded.py by default) and runs the three modes on the same prompts in a rotating order, every
slot erased before each mode, so load changes on a shared machine hit them alike. Printed: p50/p90 of
the request's wall time per mode, its ratio to `one slot`, tokens computed, and the largest difference
of a label probability from `one slot` (the modes must give the same answers).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from local_engine import LocalEngine, add_model_arguments, verified_model_path

from openjev.adapters.embedded.llama_protocol import (
    LABEL_BIAS,
    ReplyCollector,
    label_probabilities,
    score_request,
    warm_request,
)

SLOT_FILE = "prefix.bin"


@dataclass(frozen=True)
class Branch:
    token_ids: list[int]
    label_ids: list[int]


@dataclass(frozen=True)
class Request:
    prefix: list[int]
    branches: list[Branch]


def draw(rng: random.Random, prefix: int, branches: int, suffix: int) -> Request:
    def tokens(n: int) -> list[int]:
        return [rng.randrange(1_000, 40_000) for _ in range(n)]

    head = tokens(prefix)
    return Request(
        prefix=head,
        branches=[
            Branch(token_ids=head + tokens(suffix), label_ids=rng.sample(range(100, 900), rng.randint(2, 5)))
            for _ in range(branches)
        ],
    )


class Runner:
    def __init__(self, engine: LocalEngine, slots: int) -> None:
        self.engine = engine
        self.slots = slots

    def call(self, body: dict[str, object]) -> ReplyCollector:
        reply = ReplyCollector()
        self.engine.complete(body, reply)
        if reply.error is not None:
            raise RuntimeError(f"llama.cpp refused the call: {reply.error}")
        return reply

    def together(self, jobs: list[Callable[[], None]]) -> None:
        """Run the jobs in threads at once, as the backend's executor does, and re-raise a failure."""
        errors: list[BaseException] = []

        def run(job: Callable[[], None]) -> None:
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def branches(self, request: Request, slots: int) -> list[dict[int, float]]:
        """Every branch, submitted at once; branch i goes to slot i % slots; a slot's calls run in order."""
        results: list[dict[int, float]] = [{} for _ in request.branches]
        locks = [threading.Lock() for _ in range(slots)]

        def job(i: int, branch: Branch) -> Callable[[], None]:
            def run() -> None:
                slot = i % slots
                with locks[slot]:
                    body = score_request(branch.token_ids, branch.label_ids, slot=slot, bias=LABEL_BIAS)
                    probs = label_probabilities(self.call(body), branch.label_ids)
                if probs is None:
                    raise RuntimeError("a label was missing from the reply")
                results[i] = probs

            return run

        self.together([job(i, b) for i, b in enumerate(request.branches)])
        return results

    def warm(self, prefix: list[int], slot: int) -> None:
        self.call(warm_request(prefix, slot=slot))

    def one_slot(self, request: Request) -> list[dict[int, float]]:
        self.call(warm_request(request.prefix, slot=0))
        return self.branches(request, 1)

    def copied_prefix(self, request: Request) -> list[dict[int, float]]:
        self.call(warm_request(request.prefix, slot=0))
        self.engine.post("/slots/0?action=save", {"filename": SLOT_FILE})
        for slot in range(1, self.slots):
            self.engine.post(f"/slots/{slot}?action=restore", {"filename": SLOT_FILE})
        return self.branches(request, self.slots)

    def prefilled_prefix(self, request: Request) -> list[dict[int, float]]:
        def warm(slot: int) -> Callable[[], None]:
            return lambda: self.warm(request.prefix, slot)

        self.together([warm(slot) for slot in range(self.slots)])
        return self.branches(request, self.slots)

    def erase(self) -> None:
        for slot in range(self.slots):
            self.engine.post(f"/slots/{slot}?action=erase", {})


def largest_difference(probs: list[dict[int, float]], reference: list[dict[int, float]]) -> float:
    return max(abs(p[label] - r[label]) for p, r in zip(probs, reference, strict=True) for label in p)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="requests per mode (default 6)")
    parser.add_argument("--slots", type=int, default=4, help="slots the branches may use (default 4)")
    parser.add_argument("--prefix", type=int, default=47, help="prefix tokens (default 47)")
    parser.add_argument("--branches", type=int, default=13, help="branches per request (default 13)")
    parser.add_argument("--suffix", type=int, default=44, help="suffix tokens per branch (default 44)")
    add_model_arguments(parser)
    args = parser.parse_args()
    model_path = verified_model_path(args.model)
    slot_files = Path(tempfile.mkdtemp(prefix="openjev-slots-"))
    engine = LocalEngine(model_path, args.threads, slots=args.slots, slot_files=slot_files)
    runner = Runner(engine, args.slots)
    modes: dict[str, Callable[[Request], list[dict[int, float]]]] = {
        "one slot": runner.one_slot,
        f"{args.slots} slots, copied prefix": runner.copied_prefix,
        f"{args.slots} slots, prefilled prefix": runner.prefilled_prefix,
    }
    computed = {
        "one slot": args.prefix + args.branches * args.suffix,
        f"{args.slots} slots, copied prefix": args.prefix + args.branches * args.suffix,
        f"{args.slots} slots, prefilled prefix": args.slots * args.prefix + args.branches * args.suffix,
    }
    seconds: dict[str, list[float]] = {name: [] for name in modes}
    worst = dict.fromkeys(modes, 0.0)
    rng = random.Random(11)
    names = list(modes)
    print(f"{args.model}, {args.threads} threads, {args.slots} slots; {args.branches} branches of {args.suffix} tokens")
    try:
        runner.one_slot(draw(rng, args.prefix, args.branches, args.suffix))  # warm the engine, not measured
        for n in range(args.rounds):
            request = draw(rng, args.prefix, args.branches, args.suffix)
            answers: dict[str, list[dict[int, float]]] = {}
            for name in names[n % len(names) :] + names[: n % len(names)]:
                runner.erase()
                started = time.perf_counter()
                answers[name] = modes[name](request)
                seconds[name].append(time.perf_counter() - started)
            for name in names:
                worst[name] = max(worst[name], largest_difference(answers[name], answers["one slot"]))
            print(f"  round {n + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()), flush=True)
    finally:
        engine.close()
    base = statistics.median(seconds["one slot"])
    print()
    print(f"{'mode':<28}  {'p50 s':>6}  {'p90 s':>6}  {'vs one slot':>11}  {'computed tok':>12}  {'max |dp|':>9}")
    for name in names:
        p50 = statistics.median(seconds[name])
        print(
            f"{name:<28}  {p50:>6.2f}  {percentile(seconds[name], 0.9):>6.2f}  {p50 / base:>11.2f}  "
            f"{computed[name]:>12}  {worst[name]:>9.1e}"
        )


if __name__ == "__main__":
    main()
