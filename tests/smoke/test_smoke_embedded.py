"""`openjev smoke` against a real embedded server: `openjev serve` with SmolLM2-135M on CPU, no bias removal.

Every check must pass, the semantic ones included: they were tuned on this model (see
openjev.smoke.checks). Two runs must agree exactly, so a pass is not a lucky draw. (The default
model, Qwen2.5-Coder-1.5B, is exercised in tests/integration/test_default_model.py: it is three
times slower than this test should be.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openjev.smoke.runner import EXIT_OK, SmokeOptions, SmokeResult, run_smoke
from tests.smoke.servers import openjev_server

pytestmark = pytest.mark.integration

MARGIN = 0.1  # how clearly the obvious yes/no answers must win, so small numeric drift cannot flip them
# SmolLM2 is at chance on real data; on the two obvious choices it picks the right option by only 0.02
# and 0.04 with the current prompt layout. The engine's exact mode makes runs identical (checked
# below), so this margin only has to exceed float drift between machines (about 1e-6).
CHOICE_MARGIN = 0.01


async def test_the_small_embedded_model_passes_every_check(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with openjev_server(log=log, env={"OPENJEV_MODEL": "smollm2-135m", "OPENJEV_DEBIAS": "none"}) as url:
        first = await run_smoke(SmokeOptions(url=url, out=tmp_path / "first.json", startup_timeout=300))
        second = await run_smoke(SmokeOptions(url=url, out=None, startup_timeout=60))
    failures = [(c.name, c.reason) for c in first.checks if not c.ok]
    assert failures == [], log.read_text()[-2000:]
    assert first.exit_code == EXIT_OK
    assert first.server_model == "HuggingFaceTB/SmolLM2-135M-Instruct"

    def kept(result: SmokeResult) -> dict[str, Any]:
        """The answers the semantic checks kept: System One's by question id, Decisions' in a list."""
        return {
            c.name: c.answers[0] if c.name.startswith("decisions_") else c.answers["q"]
            for c in result.checks
            if c.answers is not None
        }

    answers = kept(first)
    assert answers == kept(second)
    assert answers["obvious_yes"]["noul"] > 0.5 + MARGIN
    assert answers["obvious_no"]["noul"] < 0.5 - MARGIN
    # The same questions on the Decisions route: the same probabilities.
    assert answers["decisions_obvious_yes"]["probability"] == pytest.approx(answers["obvious_yes"]["noul"], abs=1e-6)
    assert answers["decisions_obvious_no"]["probability"] == pytest.approx(answers["obvious_no"]["noul"], abs=1e-6)
    for name in ("obvious_choice_first", "obvious_choice_last"):
        p = sorted(answers[name]["probabilities"].values(), reverse=True)
        assert p[0] - p[1] > CHOICE_MARGIN, (name, p)

    calls = [
        c.call for c in first.checks if c.call is not None and c.call.status == 200 and c.call.path != "/v1/models"
    ]
    assert all(call.prefix_tokens and call.prefix_tokens > 0 for call in calls)
    assert all(call.cached_tokens is not None for call in calls)  # the embedded engine reports cache hits
