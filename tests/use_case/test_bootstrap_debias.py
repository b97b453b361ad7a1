"""The evaluator's bias removal and temperature: the setting, else what was measured for the served model,
else the backend's (bias removal) or 1 (temperature)."""

from __future__ import annotations

import dataclasses

import pytest

from openjev.adapters.fake.build import build_runtime
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.bootstrap import build_evaluator
from openjev.domain.debiasing import DebiasMode
from openjev.domain.labels import verify_labels
from openjev.settings import load_settings


@pytest.mark.parametrize(
    ("env", "model_default", "expected"),
    [
        ({"OPENJEV_BACKEND": "fake"}, None, "none"),
        ({"OPENJEV_BACKEND": "fake"}, "rotate", "rotate"),
        ({"OPENJEV_BACKEND": "fake", "OPENJEV_DEBIAS": "calibrate"}, "rotate", "calibrate"),
    ],
)
def test_the_served_models_measured_default_applies_unless_set(
    env: dict[str, str], model_default: DebiasMode | None, expected: str
) -> None:
    settings = load_settings(env)
    runtime = dataclasses.replace(build_runtime(settings), default_debias=model_default)
    codec = ChatMLByteCodec()
    evaluator = build_evaluator(settings, runtime, codec, verify_labels(codec, settings.max_options))
    assert evaluator.debias == expected


def test_the_served_models_temperature_reaches_the_evaluator_unless_set() -> None:
    for env, expected in (({}, 2.5), ({"OPENJEV_TEMPERATURE": "0.5"}, 0.5)):
        settings = load_settings({"OPENJEV_BACKEND": "fake", **env})
        runtime = dataclasses.replace(build_runtime(settings), default_temperature=2.5)
        codec = ChatMLByteCodec()
        evaluator = build_evaluator(settings, runtime, codec, verify_labels(codec, settings.max_options))
        assert evaluator.config.temperature == expected
