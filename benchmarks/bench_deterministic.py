"""What deterministic mode costs on the embedded backend: the same requests with it off and on.

Run: `uv run python benchmarks/bench_deterministic.py [--rounds N]`
(`OPENJEV_MODEL=...` in the environment measures another model.)

Starts two `openjev serve` processes on the default model, one with `OPENJEV_DETERMINISTIC=false`
and one with the default (on), and sends them the same requests in alternation (the example of
docs/spec.md and a 12-question request, at concurrency 1 and 4, each request about its own ticket
number so none finds another's state cached), so both see the same machine load. Prints, per
scenario, the median latency of each, the ratio, and decisions per second of each.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from bench_embedded import SPEC_EXAMPLE, TWELVE_QUESTIONS, Sample, run_scenario, start_server, wait_ready

from openjev.listen import free_ports

# A long request deadline: on a loaded machine a 12-question request at concurrency 4 can exceed 120 s.
DEADLINE = {"OPENJEV_REQUEST_TIMEOUT": "900"}
MODES = {"off": {"OPENJEV_DETERMINISTIC": "false", **DEADLINE}, "on": DEADLINE}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="alternations per scenario (default 4)")
    parser.add_argument("--concurrency", default="1,4", help="client concurrencies, comma-separated (default 1,4)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    logs = Path(tempfile.mkdtemp(prefix="openjev-bench-deterministic-"))
    ports = dict(zip(MODES, free_ports(len(MODES)), strict=True))
    processes = {mode: start_server(ports[mode], logs / f"{mode}.log", env) for mode, env in MODES.items()}
    try:
        for mode, process in processes.items():
            print(f"deterministic {mode}: ready in {wait_ready(ports[mode], process, timeout=300):.1f} s")
        requests = [("spec example (3 q)", SPEC_EXAMPLE), ("12 questions", TWELVE_QUESTIONS)]
        scenarios = [(name, request, c) for name, request in requests for c in levels]
        for mode in MODES:  # the first request of each server: lazy initialisation, not measured
            run_scenario(ports[mode], SPEC_EXAMPLE, 1, 1, 600.0, seed=90_000)
        print("| scenario | conc. | p50 off (s) | p50 on (s) | on/off | decisions/s off | decisions/s on |")
        print("|---|---|---|---|---|---|---|", flush=True)
        for index, (name, request, concurrency) in enumerate(scenarios):
            samples: dict[str, list[Sample]] = {mode: [] for mode in MODES}
            walls = dict.fromkeys(MODES, 0.0)
            for round_ in range(args.rounds):
                for mode in MODES:
                    seed = 1000 * index + 10 * round_
                    got, wall = run_scenario(ports[mode], request, concurrency, concurrency, 600.0, seed=seed)
                    samples[mode] += got
                    walls[mode] += wall
            p50 = {mode: statistics.median(s.seconds for s in samples[mode]) for mode in MODES}
            rate = {mode: sum(s.questions for s in samples[mode]) / walls[mode] for mode in MODES}
            print(
                f"| {name} | {concurrency} | {p50['off']:.2f} | {p50['on']:.2f} | {p50['on'] / p50['off']:.2f} "
                f"| {rate['off']:.2f} | {rate['on']:.2f} |",
                flush=True,
            )
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            process.wait(120)


if __name__ == "__main__":
    main()
