"""Decision GGUFs against llama.cpp itself: openjev and xllamacpp's `handle_systemone` on the same file.

Each label-reading type gets SmolLM2-135M with that type's metadata and a `systemone` template of its
shape (decision_gguf.py); the same System One request then goes through openjev (its contract, its
evaluator, its embedded backend) and through llama.cpp's own /v1/systemone, and every probability
must agree within 1e-3: noul, choice and score, with the type's labels, orders and temperatures.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import xllamacpp  # type: ignore[import-untyped]

from openjev.adapters.embedded.llama_engine import EngineConfig, engine_params
from openjev.bootstrap import build_runtime, limits_from, serving
from openjev.contracts import systemone
from openjev.http.lifecycle import Phase, ServiceLifecycle
from openjev.settings import load_settings
from tests.embedded.decision_gguf import decision_gguf

pytestmark = [pytest.mark.integration]

# A template of the usual shape: ChatML, the state, the question, one line per option, then the
# answer opens. `label` is what lev, nimble, pplx-decider and lfm2-d1 hand it; the openjev type
# writes its own letters. Block tags alone on their lines test that whitespace is handled as
# llama.cpp handles it.
TEMPLATE = """<|im_start|>system
You answer questions about data with one label.<|im_end|>
<|im_start|>user
{% if state is string %}
{{ state }}
{% else %}
{{ state | tojson }}
{% endif %}

Question {{ id }} ({{ type }}): {{ instructions }}
{% for option in options %}
{{ option.label if option.label is defined else "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[loop.index0] }}) \
{{ option.key }}{% if option.description is not none %}: {{ option.description }}{% endif %}

{% endfor %}
{% if questions is defined %}({{ questions | length }} questions in this request)
{% endif %}
<|im_end|>
<|im_start|>assistant
Answer: """

TEMPERATURES = {
    "choice": 1.7,
    "choice.3_5": 0.8,
    "noul": 1.3,
    "noul.small": 0.6,
    "score.6_10": 2.5,
    "score.small": 1.4,
}
LABEL_TYPES = ["openjev", "lev", "nimble", "pplx-decider", "lfm2-d1"]

REQUEST: dict[str, Any] = {
    "model": "jev-latest",
    "state": "I was charged twice for my order #4411. Please refund the duplicate payment to my card.",
    "questions": {
        "refund": {
            "type": "noul",
            "instructions": "Does the customer ask for money back?",
            "criteria": {"true": "they want a refund", "false": "they want something else"},
        },
        "team": {
            "type": "choice",
            "instructions": "Which team should handle this?",
            "criteria": {"payments": "Payments and refunds", "bugs": "Software bugs", "sales": None},
        },
        "letters": {
            "type": "choice",
            "instructions": "Pick one.",
            "criteria": {"x": "First", "y": "Second"},
        },
        "anger": {
            "type": "score",
            "instructions": "How upset is the customer?",
            "criteria": ["calm", "annoyed", "angry", "furious"],
        },
        "urgency": {
            "type": "score",
            "instructions": "How urgent is it?",
            "criteria": [f"level {i}" for i in range(7)],
        },
    },
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("decision-ggufs")
    return {kind: decision_gguf(folder / f"{kind}.gguf", kind, TEMPLATE, TEMPERATURES) for kind in LABEL_TYPES}


def llama_answers(path: Path, request: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's own /v1/systemone on `path` (xllamacpp's `handle_systemone`)."""
    server = xllamacpp.Server(
        engine_params(EngineConfig(model_path=path, threads=2, parallel_slots=1, slot_context=2048), "k")
    )
    try:
        reply = json.loads(server.handle_systemone(json.dumps(request)))
    finally:
        del server
    assert "answers" in reply, reply
    answers: dict[str, Any] = reply["answers"]
    return answers


async def openjev_answers(path: Path, request: dict[str, Any]) -> dict[str, Any]:
    settings = load_settings(
        {"OPENJEV_MODEL": str(path), "OPENJEV_ENGINE": "llama.cpp"},
        backend="embedded",
        parallel_slots=1,
        slot_context=2048,
        debias="none",
    )
    runtime = build_runtime(settings)
    async with serving(settings, runtime) as evaluator:
        parsed = systemone.parse(json.dumps(request).encode(), limits_from(settings), runtime.model_names)
        outcome = await evaluator.evaluate(evaluator.prepare(parsed.decision))
        response = systemone.respond(parsed, outcome, runtime.public_model)
    answers: dict[str, Any] = msgspec.to_builtins(response)["answers"]
    return answers


def numbers(answer: dict[str, Any]) -> Iterator[tuple[str, float]]:
    for field in ("noul", "score", "confidence"):
        if field in answer:
            yield field, answer[field]
    for key, p in (answer.get("probabilities") or {}).items():
        yield f"p[{key}]", p


@pytest.mark.parametrize("kind", LABEL_TYPES)
async def test_label_probabilities_equal_llama_cpps_own_systemone(kind: str, files: dict[str, Path]) -> None:
    ours, theirs = await openjev_answers(files[kind], REQUEST), llama_answers(files[kind], REQUEST)
    assert ours.keys() == theirs.keys()
    for qid in REQUEST["questions"]:
        expected = dict(numbers(theirs[qid]))
        got = dict(numbers(ours[qid]))
        assert got.keys() == expected.keys(), qid
        for field, value in expected.items():
            assert got[field] == pytest.approx(value, abs=1e-3), (kind, qid, field, got, expected)
        if "choice" in theirs[qid]:
            assert ours[qid]["choice"] == theirs[qid]["choice"]


async def test_health_and_the_ready_log_name_the_decision_type_and_bias_removal_still_applies(
    files: dict[str, Path], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = load_settings(
        {"OPENJEV_MODEL": str(files["lev"]), "OPENJEV_ENGINE": "llama.cpp"},
        backend="embedded",
        parallel_slots=1,
        slot_context=2048,
    )
    service = ServiceLifecycle(settings, build_runtime(settings))
    service.begin()
    try:
        while service.phase is Phase.STARTING:  # noqa: ASYNC110 - the lifecycle has no event to wait on
            await asyncio.sleep(0.1)
        health = await service.health()
        assert health.backend_ok, health
        assert "prompts: the model's own `systemone` template, decision type lev" in health.backend_detail
        assert "decision type lev" in capsys.readouterr().out  # the `ready` log line
        evaluator = service.require_ready()
        request = {**REQUEST, "x_debias": "rotate+calibrate"}
        parsed = systemone.parse(json.dumps(request).encode(), limits_from(settings), service.accepted_models)
        prepared = evaluator.prepare(parsed.decision)
        assert prepared.prior_plan is not None  # calibrated on a content-free state, through the model's template
        outcome = await evaluator.evaluate(prepared)
        answers = msgspec.to_builtins(systemone.respond(parsed, outcome, "m"))["answers"]
        assert sum(answers["team"]["probabilities"].values()) == pytest.approx(1.0)
        assert 0.0 <= answers["refund"]["noul"] <= 1.0
    finally:
        await service.stop()
