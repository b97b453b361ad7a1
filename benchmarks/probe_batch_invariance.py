"""When does llama.cpp give a cached evaluation the same answer as a cold one? (the real engine)

Run: `uv run python benchmarks/probe_batch_invariance.py [--model NAME] [--threads N]`

For prompts of 113 to 128 tokens, this scores the same yes/no label pair three ways in one slot:
cold (the whole prompt as one batch), and after warming a prefix of `start` tokens, so that
llama.cpp reuses that prefix and evaluates only the rest (`batch` tokens), with `start` a multiple
of 8 (112), one token off (111) and further back (104). It prints whether each label probability is
bit-identical to the cold one (`=`), and which start llama.cpp really reused. The rules
`src/openjev/adapters/embedded/cache_plan.py` follows come from this table: a reused prefix must
end at a multiple of `ALIGN`, and at least `MIN_BATCH` tokens must follow it. The host-memory
prompt cache is off, as in deterministic mode, so the only reuse is the slot's own.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import local_engine
from local_engine import LocalEngine, add_model_arguments, verified_model_path

from openjev.adapters.embedded.llama_protocol import ReplyCollector, score_request, warm_request

STARTS = (112, 111, 104)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_arguments(parser)
    parser.set_defaults(model="qwen2.5-coder-1.5b")
    args = parser.parse_args()
    engine_params = local_engine.engine_params

    def without_host_cache(config: Any, key: str) -> Any:
        params = engine_params(config, key)
        params.cache_ram_mib = 0
        return params

    local_engine.engine_params = without_host_cache
    engine = LocalEngine(verified_model_path(args.model), args.threads, slots=1)

    def tokens(text: str) -> list[int]:
        reply = engine.post("/tokenize", {"content": text, "add_special": False, "parse_special": True})
        return [int(t) for t in reply["tokens"]]

    def call(request: dict[str, Any]) -> ReplyCollector:
        reply = ReplyCollector()
        engine.complete(request, reply)
        return reply

    labels = tokens("yes")[:1] + tokens("no")[:1]
    clear = tokens("zzz " * 40)
    text = tokens(
        "<|im_start|>system\nYou judge data.<|im_end|>\n<|im_start|>user\n"
        + "A long preamble about refunds and cards. " * 12
        + "The customer writes: my card was charged twice. Is this about billing? Answer yes or no."
    )

    def probability(prompt: Sequence[int], start: int | None) -> tuple[float, int | None]:
        call(warm_request(clear, slot=0))  # nothing of the prompt stays in the slot
        if start is not None:
            call(warm_request(prompt[:start], slot=0))
        reply = call(score_request(prompt, labels, slot=0, bias=32.0))
        assert reply.top_probs is not None, reply.error
        return next(p.prob for p in reply.top_probs if p.id == labels[0]), reply.reused()

    print(f"{args.model}, {args.threads} threads; cells: start=result (reused if not the start)")
    print("| prompt | cold P(yes) | " + " | ".join(f"start {s}" for s in STARTS) + " |")
    print("|---|---|" + "---|" * len(STARTS))
    for length in range(113, 129):
        prompt = text[:length]
        cold, _ = probability(prompt, None)
        cells = []
        for start in STARTS:
            p, reused = probability(prompt, start)
            mark = "=" if p == cold else f"{p - cold:+.1e}"
            cells.append(f"batch {length - start}: {mark}" + ("" if reused == start else f" (reused {reused})"))
        print(f"| {length} | {cold:.6f} | " + " | ".join(cells) + " |", flush=True)
    engine.close()


if __name__ == "__main__":
    main()
