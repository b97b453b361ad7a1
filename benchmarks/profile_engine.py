"""Where a request's time goes on the OpenVINO engine: the README example, step by step, no server.

Builds the example's prompt plan with the default model's codec (both option orders of its choice
question, as the default bias removal asks), then times on the engine itself: the shared prefix
from position 0, and for each branch the restore of the prefix's KV cache, the evaluation of its
suffix and the reading of its label probabilities. Also the engine's rate on one long piece, the
rate the hardware gives when a call is long enough to keep the cores busy.

    uv run python benchmarks/profile_engine.py [--rounds 5]

Figures only, no assertion; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import available_cpus
from openjev.adapters.embedded.merged import engine_file
from openjev.adapters.embedded.model import resolve_model_path
from openjev.adapters.openvino.convert import ensure_model
from openjev.adapters.openvino.engine import PIECE, EngineConfig, OpenVINOEngine, label_logprobs
from openjev.contracts import systemone
from openjev.domain.debiasing import option_orders
from openjev.domain.kinds import rules
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.prompt import build_plan
from openjev.http.openapi_docs import EXAMPLE_REQUEST
from openjev.settings import load_settings

T = TypeVar("T")


def timed(samples: dict[str, list[float]], name: str, work: Callable[[], T]) -> T:
    started = time.perf_counter()
    result = work()
    samples.setdefault(name, []).append(time.perf_counter() - started)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = load_settings()
    cache = settings.embedded.resolved_cache_dir()
    base, packaged = resolve_model_path(None, cache)
    path, sha256 = engine_file(packaged, base, cache, workers=available_cpus())  # the default: merged
    assert sha256 is not None
    model_xml = ensure_model(path, sha256, cache)
    engine = OpenVINOEngine.load(EngineConfig(model_xml=model_xml, threads=available_cpus(), context=4096))
    codec = GGUFCodec.from_gguf(path)
    labels = verify_labels(codec, 64)
    decision = systemone.parse(json.dumps(EXAMPLE_REQUEST).encode(), Limits(), frozenset()).decision
    plan = build_plan(
        decision.state,
        decision.asks,
        codec,
        labels,
        lambda ask: option_orders(len(ask.options), 2) if rules(ask).rotatable else ((),),
    )
    prefix = list(plan.prefix_ids)
    request = engine.new_request()
    long = list(range(1000, 1000 + PIECE))
    samples: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        engine.reset(request)
        timed(samples, f"prefix ({len(prefix)} tokens)", lambda: engine.advance(request, prefix, 0))  # no logits read
        snapshot = timed(samples, "snapshot", lambda: engine.snapshot(request, len(prefix)))
        for branch in plan.branches:
            suffix = list(branch.suffix_ids)
            timed(samples, "restore", lambda s=snapshot: engine.restore(request, s))  # type: ignore[misc]
            logits = timed(
                samples,
                f"branch ({len(suffix)} tokens)",
                lambda s=suffix: engine.evaluate(request, s, len(prefix)),  # type: ignore[misc]
            )
            timed(samples, "label probabilities", lambda g=logits, b=branch: label_logprobs(g, b.label_ids))  # type: ignore[misc]
        engine.reset(request)
        timed(samples, f"one piece ({PIECE} tokens)", lambda: engine.advance(request, long, 0))
    rows = {name: round(statistics.median(values) * 1000, 2) for name, values in samples.items()}
    per_request = rows[f"prefix ({len(prefix)} tokens)"] + sum(
        rows[f"branch ({len(b.suffix_ids)} tokens)"] + rows["restore"] + rows["label probabilities"]
        for b in plan.branches
    )
    print(json.dumps({"median ms": rows, "engine ms per request": round(per_request, 1),
                      "tokens per second, one piece": round(PIECE / rows[f"one piece ({PIECE} tokens)"] * 1000, 1),
                      "precision": engine.precision, "threads": available_cpus()}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
