"""Golden answers: the exact System One response bodies of the golden cases on the fake backend.

The fake backend's log-probabilities are a hash of the prompt's token ids, so these bodies pin the
whole path from a request to its answers (parsing, prompt, bias removal, the answer math, usage)
to the last bit. Rewrite them only on purpose:

    uv run python -m tests.golden.test_systemone_answers
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.api.conftest import running
from tests.golden.cases import CASES

GOLDEN = Path(__file__).with_name("systemone_answers.json")


async def answers() -> dict[str, Any]:
    """Each case's response body and its prefix-token header, through the app."""
    out: dict[str, Any] = {}
    async with running(prior_cache_entries=0) as client:
        for name, (body, mode) in sorted(CASES.items()):
            response = await client.post("/v1/systemone", json={**body, "x_debias": mode})
            assert response.status_code == 200, response.text
            out[name] = {"body": response.json(), "prefix_tokens": response.headers["x-openjev-prefix-tokens"]}
    return out


async def test_response_bodies_are_exactly_the_pinned_ones() -> None:
    pinned = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = await answers()
    assert sorted(got) == sorted(pinned)
    for name in pinned:
        assert got[name] == pinned[name], name


def main() -> None:
    GOLDEN.write_text(json.dumps(asyncio.run(answers()), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.stdout.write(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)\n")


if __name__ == "__main__":
    main()
