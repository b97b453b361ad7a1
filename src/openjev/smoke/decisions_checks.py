"""The smoke checks of `POST /v1/decisions`, and the response checks they apply.

`response_problems` restates the checks promptfoo's `openai:decisions:<model>` provider makes of
every response (promptfoo itself needs Node 22): the answers come in question order with the
questions' names; every choice value is one of the question's values with exactly one probability
entry; probabilities are in [0, 1] and sum to 1 (± 0.01); score labels are the levels and `score`
equals Σ value·p; every usage field is an integer. The same checks run in the test suite on real
responses. Pure, like `checks`: any server of OpenAI's Decisions API can be judged with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from openjev.smoke.checks import FURIOUS, GLAD, MAX_DEFAULT_OPTIONS, SHAPES_STATE, Check, Verdict, excerpt, option_names

PATH = "/v1/decisions"
UNSERVED_MODEL = "openjev-smoke-no-such-model"

SUM_TOLERANCE = 0.01  # promptfoo's
USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens")
DETAIL_FIELDS = {
    "input_tokens_details": ("cached_tokens", "cache_write_tokens"),
    "output_tokens_details": ("reasoning_tokens",),
}


def _probability(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1


def _same(a: Any, b: Any) -> bool:
    """Equal with their JSON types (True is not 1, "true" is not True)."""
    return type(a) is type(b) and a == b


def response_problems(questions: list[dict[str, Any]], body: Any) -> list[str]:
    answers = body.get("answers") if isinstance(body, dict) else None
    if not isinstance(answers, list) or len(answers) != len(questions):
        return [f"expected {len(questions)} answers in a list, got {answers!r}"[:200]]
    problems: list[str] = []
    for i, (question, answer) in enumerate(zip(questions, answers, strict=True)):
        where = f"answers[{i}]"
        if answer.get("name") != question.get("name"):
            problems.append(f"{where}.name {answer.get('name')!r} is not {question.get('name')!r}")
        if answer.get("type") == "refusal":
            continue
        if answer.get("type") != question["type"]:
            problems.append(f"{where}.type {answer.get('type')!r} is not {question['type']!r}")
            continue
        problems += _answer_problems(where, question, answer)
    problems += _usage_problems(body.get("usage"))
    return problems


def _answer_problems(where: str, question: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    if question["type"] == "predicate":
        return [] if _probability(answer.get("probability")) else [f"{where}.probability is not in [0, 1]"]
    problems = [] if _probability(answer.get("confidence")) else [f"{where}.confidence is not in [0, 1]"]
    entries = answer.get("probabilities")
    if not isinstance(entries, list) or not all(_probability(e.get("probability")) for e in entries):
        return [*problems, f"{where}.probabilities is not a list of probabilities"]
    total = math.fsum(e["probability"] for e in entries)
    if abs(total - 1) > SUM_TOLERANCE:
        problems.append(f"{where}.probabilities sum to {total}")
    if question["type"] == "choice":
        values = [c["value"] for c in question["choices"]]
        for value in values:
            if sum(_same(e.get("value"), value) for e in entries) != 1:
                problems.append(f"{where}: choice {value!r} has not exactly one probability entry")
        if len(entries) != len(values) or not any(_same(answer.get("choice"), v) for v in values):
            problems.append(f"{where}.choice {answer.get('choice')!r} is not one of {values}")
        return problems
    labels = [level["label"] for level in question["levels"]]
    if [e.get("label") for e in entries] != labels or [e.get("value") for e in entries] != list(range(len(labels))):
        problems.append(f"{where}: the score entries are not the levels {labels} with values 0..{len(labels) - 1}")
    expected = math.fsum(e["value"] * e["probability"] for e in entries)
    if not isinstance(answer.get("score"), int | float) or abs(answer["score"] - expected) > 1e-6:
        problems.append(f"{where}.score {answer.get('score')!r} is not Σ value·p = {expected}")
    return problems


def _usage_problems(usage: Any) -> list[str]:
    if not isinstance(usage, dict):
        return ["usage is missing"]
    problems = [f"usage.{f} is not an integer" for f in USAGE_FIELDS if not _integer(usage.get(f))]
    for group, fields in DETAIL_FIELDS.items():
        details = usage.get(group)
        if not isinstance(details, dict):
            problems.append(f"usage.{group} is missing")
            continue
        problems += [f"usage.{group}.{f} is not an integer" for f in fields if not _integer(details.get(f))]
    return problems


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# ---------------------------------------------------------------------------------------------
# The smoke checks

SHAPES: list[dict[str, Any]] = [
    {"type": "predicate", "name": "refund", "instructions": "Does the user request a refund?"},
    {
        "type": "choice",
        "name": "department",
        "instructions": "Which department should handle this?",
        "choices": [
            {"value": "billing", "description": "Payments and refunds"},
            {"value": "technical", "description": "Software bugs"},
            {"value": True, "description": "Something else"},
        ],
    },
    {
        "type": "score",
        "name": "urgency",
        "instructions": "How urgent is the request?",
        "levels": [{"label": "Routine"}, {"label": "Urgent"}, {"label": "Emergency", "description": "An outage"}],
    },
    {"type": "predicate", "instructions": "Is the message written in English?"},
]
SATISFIED = [{"type": "predicate", "name": "satisfied", "instructions": "Is the user satisfied?"}]


def _answered(questions: list[dict[str, Any]], expect: Callable[[list[Any]], Verdict] | None = None) -> Any:
    def evaluate(status: int, body: Any) -> Verdict:
        if status != 200:
            return Verdict(False, f"expected 200, got {status}: {excerpt(body)}")
        problems = response_problems(questions, body)
        if problems:
            return Verdict(
                False, "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
            )
        return expect(body["answers"]) if expect else Verdict(True, "answers pass promptfoo's response checks")

    return evaluate


def _predicate_is(yes: bool) -> Callable[[list[Any]], Verdict]:
    def expect(answers: list[Any]) -> Verdict:
        p = answers[0]["probability"]
        ok = p > 0.5 if yes else p < 0.5
        word = "yes" if yes else "no"
        return Verdict(ok, f"probability={p:.3f}, an obvious {word} {'is' if ok else 'is NOT'} {word}")

    return expect


def _error(status: int, code: str) -> Callable[[int, Any], Verdict]:
    def evaluate(got: int, body: Any) -> Verdict:
        error = body.get("error") if isinstance(body, dict) else None
        if got == status and isinstance(error, dict) and error.get("code") == code:
            return Verdict(True, f"refused with {status} {code} in OpenAI's error envelope")
        return Verdict(False, f"expected {status} with error.code {code!r}, got {got}: {excerpt(body)}")

    return evaluate


def decisions_checks(model: str) -> list[Check]:
    """The Decisions route's checks: shapes, 64 choices, refusals of what it must refuse, an obvious pair."""
    wide = [
        {
            "type": "choice",
            "name": "wide",
            "instructions": "Which item fits best?",
            "choices": [{"value": name, "description": f"Item number {i}"} for i, name in enumerate(option_names(64))],
        }
    ]
    too_wide = [{**wide[0], "choices": [{"value": n} for n in option_names(MAX_DEFAULT_OPTIONS + 1)]}]

    def request(input: Any, questions: list[dict[str, Any]], name: str = model) -> dict[str, Any]:
        return {"model": name, "input": input, "questions": questions}

    return [
        Check("decisions_all_types", "predicate, choice and score answers pass promptfoo's response checks",
              "POST", PATH, request(SHAPES_STATE, SHAPES), _answered(SHAPES)),
        Check("decisions_choice_64", "a 64-choice question gets one probability per choice",
              "POST", PATH, request("A list of items to choose from.", wide), _answered(wide)),
        Check("decisions_choice_65_refused", "a 65-choice question is refused with OpenAI's 400",
              "POST", PATH, request("A list.", too_wide), _error(400, "too_many_options")),
        Check("decisions_unknown_model", "a model the server does not serve is OpenAI's 404 model_not_found",
              "POST", PATH, request("Hello!", SATISFIED, UNSERVED_MODEL), _error(404, "model_not_found")),
        Check("decisions_obvious_yes", f"semantics on the Decisions route: {GLAD!r} → yes",
              "POST", PATH, request(GLAD, SATISFIED), _answered(SATISFIED, _predicate_is(True)), keep_answers=True),
        Check("decisions_obvious_no", f"semantics on the Decisions route: {FURIOUS!r} → no",
              "POST", PATH, request(FURIOUS, SATISFIED), _answered(SATISFIED, _predicate_is(False)), keep_answers=True),
    ]  # fmt: skip
