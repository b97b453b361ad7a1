from __future__ import annotations

import pytest

from openjev.domain.debiasing import DebiasMode
from openjev.domain.errors import SettingsError
from openjev.settings import Settings, load_settings


def test_defaults_follow_the_spec() -> None:
    s = load_settings({})
    assert (s.max_questions, s.max_options, s.max_body_bytes) == (64, 64, 2 * 1024 * 1024)
    assert (s.max_input_tokens, s.max_total_input_tokens) == (32768, 262144)
    assert (s.max_concurrent_requests, s.max_concurrent_branches, s.request_timeout) == (16, 64, 120.0)
    assert (s.resolved_temperature(), s.sglang.frontend, s.confidence, s.api_key) == (1.0, "python", "typesafe", None)


def test_values_are_read_and_converted() -> None:
    s = load_settings({"OPENJEV_MAX_OPTIONS": "255", "OPENJEV_TEMPERATURE": "0.5", "OPENJEV_FAKE_SWAP_LABELS": "true"})
    assert (s.max_options, s.temperature, s.fake.fake_swap_labels) == (255, 0.5, True)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("OPENJEV_MAX_OPTIONS", "256"),
        ("OPENJEV_MAX_OPTIONS", "1"),
        ("OPENJEV_TEMPERATURE", "abc"),
        ("OPENJEV_TEMPERATURE", "0"),
        ("OPENJEV_FRONTEND", "go"),
        ("OPENJEV_BACKEND", "vllm"),
        ("OPENJEV_PORT", "70000"),
        ("OPENJEV_MAX_QUESTONS", "5"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({name: value})


def test_the_deployment_variables_are_tolerated() -> None:
    """modal_app.py reads them on the deploying machine; a server started from the same shell ignores them."""
    deployment = {"OPENJEV_MIN_CONTAINERS": "1", "OPENJEV_MAX_CONTAINERS": "2", "OPENJEV_API_KEY_SECRET": "k"}
    assert load_settings(deployment) == Settings()


def test_overrides_win_and_none_means_unset() -> None:
    s = load_settings({"OPENJEV_PORT": "9000", "OPENJEV_HOST": "0.0.0.0"}, port=9100, host=None)
    assert (s.port, s.host) == (9100, "0.0.0.0")


@pytest.mark.parametrize(
    ("env", "kind"),
    [
        ({}, "embedded"),
        ({"OPENJEV_SGLANG_URL": "http://127.0.0.1:30000"}, "sglang"),
        ({"OPENJEV_SGLANG_PYTHON": "/opt/sglang/bin/python"}, "sglang"),
        ({"OPENJEV_BACKEND": "fake", "OPENJEV_SGLANG_URL": "http://x"}, "fake"),
    ],
)
def test_auto_picks_sglang_only_when_configured(env: dict[str, str], kind: str) -> None:
    assert load_settings(env).resolved_backend() == kind


@pytest.mark.parametrize(
    "name", ["OPENJEV_TEMPERATURE", "OPENJEV_REQUEST_TIMEOUT", "OPENJEV_FAKE_LATENCY", "OPENJEV_BODY_TIMEOUT"]
)
@pytest.mark.parametrize("value", ["inf", "Infinity", "nan"])
def test_non_finite_numbers_are_refused(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings({name: value})


def test_configured_keys_are_stripped_like_presented_ones() -> None:
    s = load_settings({"OPENJEV_API_KEY": "s3cret\n", "OPENJEV_BACKEND_API_KEY": "  b4ck  "})
    assert (s.api_key, s.sglang.backend_api_key) == ("s3cret", "b4ck")
    with pytest.raises(SettingsError, match="OPENJEV_API_KEY"):
        load_settings({"OPENJEV_API_KEY": " \n"})


@pytest.mark.parametrize(
    ("env", "model_default", "expected"),
    [
        ({}, None, "rotate+calibrate"),  # the embedded backend's measured default
        ({}, "rotate", "rotate"),  # a packaged model measured otherwise
        ({"OPENJEV_DEBIAS": "none"}, "rotate", "none"),  # the operator's setting wins
        ({"OPENJEV_BACKEND": "fake"}, None, "none"),
    ],
)
def test_debias_is_the_setting_else_the_models_else_the_backends(
    env: dict[str, str], model_default: DebiasMode | None, expected: str
) -> None:
    assert load_settings(env).resolved_debias(model_default) == expected


@pytest.mark.parametrize(
    ("env", "model_default", "expected"),
    [
        ({}, None, 1.0),  # the logits as they are
        ({}, 2.5, 2.5),  # a packaged model's fitted temperature
        ({"OPENJEV_TEMPERATURE": "1"}, 2.5, 1.0),  # the operator's setting wins, even when it is 1
    ],
)
def test_temperature_is_the_setting_else_the_models_else_1(
    env: dict[str, str], model_default: float | None, expected: float
) -> None:
    assert load_settings(env).resolved_temperature(model_default) == expected
