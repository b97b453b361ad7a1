"""Golden prompts: the exact token ids System One requests become, with the real Qwen3 tokenizer.

Every answer is a function of these ids, so a change that moves one of them changes answers. The
pinned ids (systemone_prompts.json) were written by this module's `main` and must only be
rewritten on purpose, by a change that means to change the prompts:

    uv run python -m tests.golden.test_systemone_prompts
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.hf_codec import HFCodec
from openjev.contracts import systemone
from openjev.domain.debiasing import DebiasMode
from openjev.domain.labels import verify_labels
from openjev.domain.limits import Limits
from openjev.domain.prompt import PromptPlan
from openjev.evaluation import Evaluator
from tests.assets import qwen3_tokenizer_dir
from tests.golden.cases import CASES

GOLDEN = Path(__file__).with_name("systemone_prompts.json")


def _plan(plan: PromptPlan | None, ids: list[str]) -> dict[str, Any] | None:
    """`ids`: the request's question ids, in its order (a branch names its ask by position)."""
    if plan is None:
        return None
    return {
        "head": plan.head_tokens,
        "prefix": list(plan.prefix_ids),
        "branches": [
            {
                "question": ids[b.ask],
                "order": list(b.order),
                "suffix": list(b.suffix_ids),
                "labels": list(b.label_ids),
            }
            for b in plan.branches
        ],
    }


def prompts(codec: HFCodec, body: dict[str, Any], mode: DebiasMode) -> dict[str, Any]:
    """The plan of one request (and of its content-free priors) as plain lists of ids."""
    limits = Limits()
    labels = verify_labels(codec, limits.max_options)
    evaluator = Evaluator(backend=FakeBackend(), codec=codec, labels=labels, limits=limits, debias=mode)
    parsed = systemone.parse(json.dumps(body).encode(), limits, frozenset())
    prepared = evaluator.prepare(parsed.decision)
    ids = list(parsed.request.questions)
    return {"plan": _plan(prepared.plan, ids), "priors": _plan(prepared.priors, ids)}


@pytest.fixture(scope="module")
def codec() -> HFCodec:
    return HFCodec.load(str(qwen3_tokenizer_dir()))


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    pinned: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return pinned


def test_every_case_is_pinned(golden: dict[str, Any]) -> None:
    assert sorted(golden) == sorted(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_token_ids_are_exactly_the_pinned_ones(codec: HFCodec, golden: dict[str, Any], name: str) -> None:
    body, mode = CASES[name]
    assert prompts(codec, body, mode) == golden[name]


def main() -> None:
    codec = HFCodec.load(str(qwen3_tokenizer_dir()))
    pinned = {name: prompts(codec, body, mode) for name, (body, mode) in sorted(CASES.items())}
    GOLDEN.write_text(json.dumps(pinned, separators=(",", ":")) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)\n")


if __name__ == "__main__":
    main()
