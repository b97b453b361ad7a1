"""promptfoo's response checks (`promptfoo_checks`) on the real server's answers, and on broken ones."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from openjev.contracts.decisions.openapi import AGENT_EXAMPLE, DECISIONS_EXAMPLE
from openjev.smoke.decisions_checks import response_problems
from tests.blackbox.conftest import ServerProcess, post_json

SIXTY_FOUR = {
    "type": "choice",
    "name": "component",
    "instructions": "Which component?",
    "choices": [{"value": f"c{i}", "description": f"Component {i}"} for i in range(63)] + [{"value": False}],
}
LEVELS = {"type": "score", "name": "level", "instructions": "Level?", "levels": [{"label": f"L{i}"} for i in range(64)]}
REQUESTS = [
    DECISIONS_EXAMPLE,
    AGENT_EXAMPLE,
    {**DECISIONS_EXAMPLE, "questions": [SIXTY_FOUR, LEVELS, *DECISIONS_EXAMPLE["questions"]]},
    {**DECISIONS_EXAMPLE, "x_debias": "rotate+calibrate"},
]


@pytest.mark.parametrize("request_body", REQUESTS, ids=["example", "agent", "64-options", "debiased"])
def test_every_answer_passes_promptfoos_checks(server: ServerProcess, request_body: dict[str, Any]) -> None:
    reply = post_json(server.url, request_body, path="/v1/decisions")
    assert reply.status == 200, reply.body
    assert response_problems(request_body["questions"], reply.json()) == []


def _drop_last_answer(body: Any) -> None:
    body["answers"].pop()


def _rename(body: Any) -> None:
    body["answers"][0]["name"] = "other"


def _unknown_value(body: Any) -> None:
    body["answers"][1]["probabilities"][0]["value"] = "bill"


def _sum_above_one(body: Any) -> None:
    body["answers"][1]["probabilities"][0]["probability"] += 0.5


def _wrong_score(body: Any) -> None:
    body["answers"][2]["score"] += 0.1


def _float_usage(body: Any) -> None:
    body["usage"]["input_tokens"] = float(body["usage"]["input_tokens"])


@pytest.mark.parametrize(
    "spoil", [_drop_last_answer, _rename, _unknown_value, _sum_above_one, _wrong_score, _float_usage]
)
def test_the_checks_catch_what_promptfoo_rejects(server: ServerProcess, spoil: Callable[[Any], None]) -> None:
    body = post_json(server.url, DECISIONS_EXAMPLE, path="/v1/decisions").json()
    spoiled = copy.deepcopy(body)
    spoil(spoiled)
    assert response_problems(DECISIONS_EXAMPLE["questions"], body) == []
    assert response_problems(DECISIONS_EXAMPLE["questions"], spoiled) != []
