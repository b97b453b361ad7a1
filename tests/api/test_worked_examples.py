"""`x_examples` through the app: the same examples give the same answers on both routes, and are paid for."""

from __future__ import annotations

from typing import Any

from tests.api.conftest import Client

CASES = [("Please refund the double charge.", "billing"), ("The app crashes at login.", "tech")]


def _systemone(examples: bool) -> dict[str, Any]:
    question: dict[str, Any] = {
        "type": "choice",
        "instructions": "Which team should handle this?",
        "criteria": {"billing": "Payments and refunds", "tech": "Software bugs"},
    }
    if examples:
        question["x_examples"] = [{"state": text, "answer": answer} for text, answer in CASES]
    return {"model": "jev-latest", "state": "I was charged twice for order 7.", "questions": {"team": question}}


def _decisions(examples: bool) -> dict[str, Any]:
    question: dict[str, Any] = {
        "type": "choice",
        "instructions": "Which team should handle this?",
        "choices": [
            {"value": "billing", "description": "Payments and refunds"},
            {"value": "tech", "description": "Software bugs"},
        ],
    }
    if examples:
        question["x_examples"] = [{"input": text, "answer": answer} for text, answer in CASES]
    return {"model": "jev-latest", "input": "I was charged twice for order 7.", "questions": [question]}


async def test_the_same_examples_give_the_same_answers_on_both_routes(client: Client) -> None:
    one = (await client.post("/v1/systemone", json=_systemone(examples=True))).json()
    two = (await client.post("/v1/decisions", json=_decisions(examples=True))).json()
    (team,) = two["answers"]
    assert {p["value"]: p["probability"] for p in team["probabilities"]} == one["answers"]["team"]["probabilities"]
    assert two["usage"]["input_tokens"] == one["usage"]["input_tokens"]
    bare = (await client.post("/v1/systemone", json=_systemone(examples=False))).json()
    assert one["usage"]["input_tokens"] > bare["usage"]["input_tokens"]  # the examples are sent, and counted


async def test_fitted_on_the_examples_the_routes_agree_and_the_examples_leave_the_prompt(client: Client) -> None:
    fit = {"x_debias": "reverse+fit"}
    one = (await client.post("/v1/systemone", json={**_systemone(examples=True), **fit})).json()
    two = (await client.post("/v1/decisions", json={**_decisions(examples=True), **fit})).json()
    (team,) = two["answers"]
    assert {p["value"]: p["probability"] for p in team["probabilities"]} == one["answers"]["team"]["probabilities"]
    bare = (await client.post("/v1/systemone", json={**_systemone(examples=False), **fit})).json()
    assert one["answers"]["team"] != bare["answers"]["team"]  # the offsets moved the answer
    # Each example is asked about in both orders on its own (one call per order), not shown before the state.
    assert one["usage"]["output_tokens"] == bare["usage"]["output_tokens"] + 2 * len(CASES)


async def test_a_wrong_example_answer_is_a_422_on_system_one_and_a_400_on_decisions(client: Client) -> None:
    body = _systemone(examples=True)
    body["questions"]["team"]["x_examples"][0]["answer"] = "sales"
    reply = await client.post("/v1/systemone", json=body)
    assert reply.status_code == 422
    assert reply.json()["detail"][0]["loc"] == ["body", "questions", "team", "x_examples", 0, "answer"]
    wrong = _decisions(examples=True)
    wrong["questions"][0]["x_examples"][1]["answer"] = True
    reply = await client.post("/v1/decisions", json=wrong)
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "questions[0].x_examples[1].answer"


async def test_the_document_describes_each_routes_own_example_shape(client: Client) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    assert schemas["SystemOneExample"]["required"] == ["state", "answer"]
    assert schemas["DecisionExample"]["required"] == ["input", "answer"]
