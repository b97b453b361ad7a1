"""Compare prompt layouts on labelled items, each prompt evaluated cold: answer quality without cache noise.

Run: `uv run python benchmarks/compare_layouts.py benchmarks/quality-dev/sst2.jsonl [more files]
[--layouts current,former,no-cue] [--model NAME] [--limit N]` (default model: the server's default,
`qwen2.5-coder-1.5b`; one item takes about 3 s per layout on 2 cores).

Why not `openjev eval`: through the server a prompt's prefix comes from llama.cpp's cache, and a
cached and a cold evaluation of the same tokens differ by a few hundredths in probability on the
Qwen models, which moves near-tied items. Here every prompt is scored in one engine call with no
cache, so two layouts differ only by their tokens. No bias removal is applied.

Layouts:

- `current`: the server's own prompt (`build_plan`: the shared prefix, then the question's suffix);
- `former`: the layout before the question turn's shared opening moved into the cached prefix (each
  question repeats it, with blank lines around the question, an `Options:` header for a choice and
  `the one best` in the format line);
- `no-cue`: the answer-format line in the opening, no `Answer:` cue, the label read as the first
  token of the assistant turn without a leading space (9–12 tokens fewer per question).

Printed per file and layout: items, accuracy, mean negative log-likelihood of the gold answer,
prompt tokens, and for yes/no files the AUC of P(yes) and how often P(yes) > 0.5; then for each pair
of layouts the items only one of them answers right, with a two-sided sign-test p-value.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_engine import LocalEngine, verified_model_path

from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_protocol import LABEL_BIAS, score_request
from openjev.contracts.systemone.parsing import decode_request, to_decision
from openjev.domain.decision import Ask, State
from openjev.domain.labels import NO, YES, LabelSet, verify_labels
from openjev.domain.ports import ChatMessage
from openjev.domain.prompt import build_plan, label_ids_for, question_opening, question_text
from openjev.domain.state import state_messages, state_subject
from openjev.quality.dataset import answer_keys

LAYOUTS = ("current", "former", "no-cue")
QUESTION_CUE = "\n\nQuestion:"  # how the server's question opening ends, after its guard sentence


@dataclass
class Scored:
    names: list[Any]  # the answers in label order: option names, or True/False
    probs: list[float]
    tokens: int


def prompt_ids(
    layout: str, state: State, question: Ask, codec: GGUFCodec, labels: LabelSet
) -> tuple[list[int], list[int]]:
    """The whole prompt's token ids and the label ids read after it, for one question in `layout`."""
    if layout == "current":
        plan = build_plan(state, [question], codec, labels)
        branch = plan.branches[0]
        return [*plan.prefix_ids, *branch.suffix_ids], list(branch.label_ids)
    guard, cue_found, rest = question_opening(state_subject(state)).rpartition(QUESTION_CUE)
    if not cue_found or rest:
        sys.exit(f"compare_layouts: the server's question opening no longer ends with {QUESTION_CUE!r}")
    own = question_text(question, labels)[1:].split("\n")  # instructions, option lines, format line
    noul = question.kind == "yes_no"
    if layout == "former":
        choice = question.kind == "choice"  # a score question's lines start with its header
        middle = own[1:-1] if noul else ["", "Options:", *own[1:-1]] if choice else ["", *own[1:-1]]
        last = own[-1] if noul else f"Answer with the letter of the one best {'option' if choice else 'level'}."
        content, cue = "\n".join([guard, "", f"Question: {own[0]}", *middle, "", last]), "Answer:"
    else:
        content, cue = "\n".join([guard, own[-1], "", f"Question: {own[0]}", *own[1:-1]]), ""
    rendered = codec.render([*state_messages(state), ChatMessage(role="user", content=content)]) + cue
    ids = codec.encode_template(rendered)
    if layout == "former":
        return ids, list(label_ids_for(question, labels))
    names = [YES, NO] if noul else list(labels.labels[: len(label_ids_for(question, labels))])
    return ids, [_next_token(codec, rendered, ids, name) for name in names]


def _next_token(codec: GGUFCodec, context: str, ids: list[int], label: str) -> int:
    full = codec.encode_template(context + label)
    if len(full) != len(ids) + 1 or full[:-1] != ids:
        sys.exit(f"compare_layouts: {label!r} is not one token at the start of the assistant turn")
    return full[-1]


def score(engine: LocalEngine, ids: list[int], label_ids: list[int]) -> list[float]:
    """The labels' probabilities, asked as the embedded backend asks them, but cold and in one reply."""
    body = {**score_request(ids, label_ids, slot=0, bias=LABEL_BIAS), "cache_prompt": False, "stream": False}
    reply = engine.post("/completion", body)
    top = {p["id"]: p["prob"] for p in reply["completion_probabilities"][0]["top_probs"]}
    probs = [top.get(label, 0.0) for label in label_ids]
    return [p / sum(probs) for p in probs]


def right(scored: Scored, gold: Any) -> bool:
    return bool(scored.names[max(range(len(scored.probs)), key=scored.probs.__getitem__)] == gold)


def auc(yes: Sequence[float], golds: Sequence[bool]) -> float:
    pos = [p for p, g in zip(yes, golds, strict=True) if g]
    neg = [p for p, g in zip(yes, golds, strict=True) if not g]
    pairs = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return pairs / (len(pos) * len(neg)) if pos and neg else math.nan


def sign_test(a: int, b: int) -> float:
    """Two-sided exact binomial p-value for a vs b discordant items."""
    n, k = a + b, min(a, b)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0


def report(name: str, golds: list[Any], results: dict[str, list[Scored]]) -> None:
    print(f"\n{name}: {len(golds)} items")
    yes_no = all(isinstance(g, bool) for g in golds)
    for layout, scored in results.items():
        accuracy = sum(right(s, g) for s, g in zip(scored, golds, strict=True)) / len(golds)
        nll = -sum(math.log(max(s.probs[s.names.index(g)], 1e-12)) for s, g in zip(scored, golds, strict=True))
        tokens = sum(s.tokens for s in scored) / len(scored)
        line = f"  {layout:8} accuracy {accuracy:6.1%}  NLL {nll / len(golds):.3f}  tokens {tokens:6.1f}"
        if yes_no:
            yes = [s.probs[0] for s in scored]
            line += f"  AUC {auc(yes, golds):.3f}  P(yes) > 0.5 on {sum(p > 0.5 for p in yes) / len(yes):.0%}"
        print(line)
    names = list(results)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs = list(zip(results[a], results[b], golds, strict=True))
            only_a = sum(right(x, g) and not right(y, g) for x, y, g in pairs)
            only_b = sum(right(y, g) and not right(x, g) for x, y, g in pairs)
            p = sign_test(only_a, only_b)
            print(f"  {a} vs {b}: only {a} right on {only_a}, only {b} on {only_b} (sign test p = {p:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="JSONL files of labelled items (openjev eval's format)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of {', '.join(LAYOUTS)}")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="packaged model name")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="only the first N items of each file")
    args = parser.parse_args()
    layouts = args.layouts.split(",")
    if unknown := set(layouts) - set(LAYOUTS):
        parser.error(f"unknown layouts {sorted(unknown)}; choose from {', '.join(LAYOUTS)}")
    model_path = verified_model_path(args.model)
    codec = GGUFCodec.from_gguf(model_path)
    labels = verify_labels(codec, 26)
    engine = LocalEngine(model_path, args.threads)
    try:
        for path in args.files:
            golds: list[Any] = []
            results: dict[str, list[Scored]] = {layout: [] for layout in layouts}
            for line in path.read_text().splitlines()[: args.limit]:
                item = json.loads(line)
                body = {"model": "m", "state": item["state"], "questions": {"q": item["question"]}}
                request = decode_request(json.dumps(body).encode())
                decision = to_decision(request)
                names = answer_keys(request.questions["q"])
                golds.append(item["gold"])
                for layout in layouts:
                    ids, label_ids = prompt_ids(layout, decision.state, decision.asks[0], codec, labels)
                    results[layout].append(Scored(names, score(engine, ids, label_ids), len(ids)))
            report(path.name, golds, results)
    finally:
        engine.close()


if __name__ == "__main__":
    main()
