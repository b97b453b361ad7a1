"""Values nothing can use: text no tokenizer can take is a 400, a backend's impossible number a 502, never a 500."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from openjev.adapters.fake.backend import FakeBackend
from openjev.adapters.fake.build import build_runtime
from openjev.adapters.sglang.wire import MetaInfo, label_logprobs
from openjev.domain.errors import BackendError
from openjev.domain.ports import LabelScores, ScoreCall
from openjev.http.app import create_app
from openjev.http.openapi_docs import DECISIONS_EXAMPLE, EXAMPLE_REQUEST
from openjev.settings import load_settings
from tests.api.conftest import LOCAL, Client

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "arguments",
    ['{"a": "\\ud800"}', '{"\\udfff": 1}', '{"a": ["ok", {"b": "x\\ud83d"}]}'],
)
async def test_a_lone_surrogate_escaped_in_tool_arguments_is_a_400(client: Client, arguments: str) -> None:
    request = {
        **DECISIONS_EXAMPLE,
        "input": [
            {"role": "user", "content": "Clean up."},
            {"type": "function_call", "call_id": "call_1", "name": "run", "arguments": arguments},
        ],
    }
    response = await client.post("/v1/decisions", json=request)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "input[1].arguments" and error["code"] == "invalid_value"
    assert "lone surrogate" in error["message"]
    # A whole escape pair is text: the same call with it is answered.
    request["input"][1]["arguments"] = '{"a": "\\ud83d\\ude00"}'
    assert (await client.post("/v1/decisions", json=request)).status_code == 200


class _BrokenNumbers(FakeBackend):
    """A fake whose every label log-probability (or label mass) is `value`."""

    def __init__(self, logprob: float = -0.5, mass: float | None = None) -> None:
        super().__init__()
        self.logprob = logprob
        self.mass = mass

    async def score_many(self, calls: Sequence[ScoreCall]) -> list[LabelScores]:
        real = await super().score_many(calls)
        return [
            LabelScores(
                logprobs=tuple(self.logprob for _ in call.label_ids),
                usage=scores.usage,
                label_mass=self.mass if call.label_mass else None,
            )
            for call, scores in zip(calls, real, strict=True)
        ]


@pytest.mark.parametrize(
    ("backend", "status"),
    [
        (_BrokenNumbers(logprob=-0.5, mass=0.7), 200),  # sound numbers: answered
        (_BrokenNumbers(logprob=1e308), 502),
        (_BrokenNumbers(logprob=0.5), 502),
        (_BrokenNumbers(logprob=math.inf), 502),
        (_BrokenNumbers(logprob=-math.inf), 502),
        (_BrokenNumbers(logprob=math.nan), 502),
        (_BrokenNumbers(mass=1e308), 502),
        (_BrokenNumbers(mass=-0.1), 502),
    ],
)
async def test_an_impossible_number_from_the_backend_is_a_502_on_both_routes(
    backend: _BrokenNumbers, status: int
) -> None:
    settings = load_settings({"OPENJEV_BACKEND": "fake"})
    app = create_app(settings, replace(build_runtime(settings), backend=backend))
    async with AsyncTestClient(app=app, base_url=LOCAL) as client:
        for _ in range(200):
            if app.state.service.evaluator is not None:
                break
            await asyncio.sleep(0.01)
        answers: list[Any] = []
        # A label mass is measured only when asked for: a broken one fails only those requests.
        for mass in (False, True) if backend.mass is None else (True,):
            answers.append(await client.post("/v1/systemone", json={**EXAMPLE_REQUEST, "x_label_mass": mass}))
            answers.append(await client.post("/v1/decisions", json={**DECISIONS_EXAMPLE, "x_label_mass": mass}))
    for response in answers:
        assert response.status_code == status, response.text
        if status == 502:
            body = response.json()
            kind = body["detail"]["error_type"] if "detail" in body else body["error"]["code"]
            assert kind == "backend_error"


@pytest.mark.parametrize("value", ["1e308", "0.5", "1e-3"])
def test_sglang_label_logprobs_above_zero_are_a_backend_error(value: str) -> None:
    meta = msgspec.json.decode(
        f'{{"prompt_tokens": 3, "output_token_ids_logprobs": [[[{value}, 7, null], [-1.0, 8, null]]]}}', type=MetaInfo
    )
    with pytest.raises(BackendError, match="invalid log-probability"):
        label_logprobs(meta, (7, 8))
    ok = msgspec.json.decode(
        '{"prompt_tokens": 3, "output_token_ids_logprobs": [[[0.0, 7, null], [-1.0, 8, null]]]}', type=MetaInfo
    )
    assert label_logprobs(ok, (7, 8)) == (0.0, -1.0)
