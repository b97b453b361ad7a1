"""The backend registry: the names the settings and the command line accept, the adapter start-up builds,
the default bias removal; a toy backend registered here, and nowhere in `src/`, gets all of them."""

from __future__ import annotations

import asyncio
from typing import Any, cast, get_args

import pytest
from litestar.testing import AsyncTestClient

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.codec import ChatMLByteCodec
from openjev.backend_spec import BUILT_IN_BACKENDS, BackendName
from openjev.backends import BACKENDS, Backend
from openjev.bootstrap import build_runtime
from openjev.cli import main
from openjev.contracts.systemone.openapi import EXAMPLE_REQUEST
from openjev.domain.errors import SettingsError
from openjev.http.app import create_app
from openjev.runtime import Runtime
from openjev.settings import Settings, load_settings, setting_names
from tests.api.conftest import LOCAL


def _toy_runtime(settings: Settings) -> Runtime:
    return Runtime(
        kind=cast(BackendName, "toy"),  # the built-in names are a Literal; a toy is not one of them
        backend=FakeBackend(latency=0.0),
        load_codec=ChatMLByteCodec,
        public_model=settings.served_model_name or "toy/model",
        model_description="A toy backend.",
    )


TOY = Backend("toy", "rotate", "a toy backend for the registry test", _toy_runtime)
WITH_TOY = {**BACKENDS, "toy": TOY}


def test_the_literal_names_the_registered_backends() -> None:
    assert set(get_args(BackendName)) == set(BUILT_IN_BACKENDS) == set(BACKENDS)


def test_every_backend_setting_keeps_its_variable_name() -> None:
    """The per-backend sections move nothing: OPENJEV_X still sets field x, wherever x lives."""
    where = {name: section for section, name in setting_names()}
    assert (where["threads"], where["sglang_url"], where["fake_latency"], where["model"]) == (
        "embedded", "sglang", "fake", None
    )  # fmt: skip
    s = load_settings({"OPENJEV_THREADS": "3", "OPENJEV_SGLANG_PORT": "31000", "OPENJEV_FAKE_FAIL_AFTER": "2"})
    assert (s.embedded.threads, s.sglang.sglang_port, s.fake.fake_fail_after) == (3, 31000, 2)
    with pytest.raises(SettingsError, match="OPENJEV_SGLANG_PORT"):
        load_settings({"OPENJEV_SGLANG_PORT": "0"})
    assert load_settings({}, sglang_url="http://127.0.0.1:1").sglang.sglang_url == "http://127.0.0.1:1"
    assert load_settings({"XDG_CACHE_HOME": "/tmp/x"}).embedded.cache_dir == "/tmp/x/openjev"


def test_a_registered_backend_is_accepted_built_and_gets_its_default_bias_removal() -> None:
    with pytest.raises(SettingsError, match="OPENJEV_BACKEND: expected one of auto, embedded, sglang, fake"):
        load_settings({"OPENJEV_BACKEND": "toy"})
    settings = load_settings({"OPENJEV_BACKEND": "toy"}, backends=WITH_TOY)
    runtime = build_runtime(settings, WITH_TOY)
    assert (runtime.kind, runtime.public_model) == ("toy", "toy/model")
    assert settings.resolved_debias(None, WITH_TOY) == "rotate"
    assert (
        load_settings({"OPENJEV_BACKEND": "toy", "OPENJEV_DEBIAS": "none"}, backends=WITH_TOY).resolved_debias(
            None, WITH_TOY
        )
        == "none"
    )


async def _calls_for_the_example(env: dict[str, str]) -> tuple[dict[str, Any], int]:
    """The health report and the backend calls (`usage.output_tokens`) of the System One example."""
    settings = load_settings({"OPENJEV_BACKEND": "toy", **env}, backends=WITH_TOY)
    app = create_app(settings, build_runtime(settings, WITH_TOY))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if (await client.get("/health")).status_code == 200:
                break
            await asyncio.sleep(0.01)
        health = (await client.get("/health")).json()
        answer = await client.post("/v1/systemone", json=EXAMPLE_REQUEST)
        assert answer.status_code == 200, answer.text
        assert 'backend="toy"' in (await client.get("/metrics")).text
    return health, answer.json()["usage"]["output_tokens"]


async def test_a_registered_backend_serves_the_api_with_its_default_bias_removal() -> None:
    health, calls = await _calls_for_the_example({})
    assert (health["backend"], health["model"]) == ("toy", "toy/model")
    _, plain_calls = await _calls_for_the_example({"OPENJEV_DEBIAS": "none"})
    assert plain_calls == 4  # N + 1 for three questions
    assert calls > plain_calls  # "rotate", the toy's default, asks the choice and the score in more orders


def test_the_command_line_offers_every_registered_backend(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--backend", "nope"])
    refused = capsys.readouterr().err
    assert all(f"'{name}'" in refused for name in ["auto", *BACKENDS]), refused
