"""The smoke checks: each is one request plus what a correct System One server must answer.

Pure: no I/O, no clock. The runner sends `Check.method`/`path`/`body` and hands the status and
decoded JSON to `Check.evaluate`. Everything here uses only the public API (docs/spec.md), so
the same checks judge openjev, TypeSafe's Jev or any other System One server.

The semantic checks come in mirrored pairs (an obvious yes and an obvious no; the right option
first and last). A server whose label mapping is off — reversed, shifted, or stuck on one label —
then fails at least one check of each pair, however its model leans.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeGuard

PROBABILITY_TOLERANCE = 1e-6
ALIAS_MODEL = "jev-latest"
MAX_DEFAULT_OPTIONS = 64  # docs/spec.md#limits-and-errors: 2–64 options by default; 65 must be refused with 422.


class Verdict(NamedTuple):
    ok: bool
    reason: str


@dataclass(frozen=True)
class Check:
    """One request and its judgement. `purpose` says, for the report, what a pass proves."""

    name: str
    purpose: str
    method: Literal["GET", "POST"]
    path: str
    body: Mapping[str, Any] | None
    evaluate: Callable[[int, Any], Verdict]
    keep_answers: bool = False  # copy the answers into the result file (small semantic checks only)


# ---------------------------------------------------------------------------------------------
# Catalog (GET /v1/models)


def catalog_model_ids(body: Any) -> list[str]:
    """Model ids a catalog lists, OpenAI-style `data[].id` first, then TypeSafe-style `models[].name`."""
    ids: list[str] = []
    if not isinstance(body, dict):
        return ids
    for key, field in (("data", "id"), ("models", "name")):
        entries = body.get(key)
        if isinstance(entries, list):
            for entry in entries:
                value = entry.get(field) if isinstance(entry, dict) else None
                if isinstance(value, str) and value and value not in ids:
                    ids.append(value)
    return ids


def listed_model(body: Any) -> str | None:
    """The server's own model id: the first catalog entry that is not the `jev-latest` alias."""
    return next((m for m in catalog_model_ids(body) if m != ALIAS_MODEL), None)


def evaluate_catalog(status: int, body: Any) -> Verdict:
    if status != 200:
        return Verdict(False, f"GET /v1/models answered {status}: {excerpt(body)}")
    ids = catalog_model_ids(body)
    if not ids:
        return Verdict(False, "the catalog lists no model (neither data[].id nor models[].name)")
    return Verdict(True, f"lists {', '.join(ids)}")


# ---------------------------------------------------------------------------------------------
# Response shape (docs/spec.md#the-response)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_probability(value: object) -> TypeGuard[float]:
    return _is_number(value) and 0.0 <= value <= 1.0


def _distribution_problems(where: str, probabilities: Any, keys: Sequence[str]) -> list[str]:
    """Keyed exactly by `keys`, each a finite probability, summing to 1 within 1e-6."""
    if not isinstance(probabilities, dict):
        return [f"{where}.probabilities is not an object"]
    problems: list[str] = []
    if set(probabilities) != set(keys) or len(probabilities) != len(keys):
        missing = [k for k in keys if k not in probabilities]
        extra = [k for k in probabilities if k not in set(keys)]
        problems.append(
            f"{where}.probabilities keys differ from the options (missing {missing[:5]}, extra {extra[:5]})"
        )
    bad = [k for k, v in probabilities.items() if not _is_probability(v)]
    if bad:
        problems.append(f"{where}.probabilities has values outside [0, 1] or not numbers for {bad[:5]}")
        return problems
    total = math.fsum(probabilities.values())
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        problems.append(f"{where}.probabilities sum to {total!r}, not 1 ± {PROBABILITY_TOLERANCE}")
    return problems


def _confidence_problems(where: str, answer: Mapping[str, Any]) -> list[str]:
    return [] if _is_probability(answer.get("confidence")) else [f"{where}.confidence is not in [0, 1]"]


def _noul_problems(where: str, answer: Mapping[str, Any]) -> list[str]:
    return [] if _is_probability(answer.get("noul")) else [f"{where}.noul is not a probability in [0, 1]"]


def _choice_problems(where: str, question: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
    options = list(question["criteria"])
    problems = _distribution_problems(where, answer.get("probabilities"), options)
    problems += _confidence_problems(where, answer)
    choice = answer.get("choice")
    if choice not in options:
        problems.append(f"{where}.choice {choice!r} is not one of the options")
    elif not problems:
        probabilities = answer["probabilities"]
        if probabilities[choice] < max(probabilities.values()):
            problems.append(f"{where}.choice {choice!r} is not the most probable option")
    return problems


def _score_problems(where: str, question: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
    levels = list(question["criteria"])
    keys = [str(i) for i in range(len(levels))]
    problems = _distribution_problems(where, answer.get("probabilities"), keys)
    problems += _confidence_problems(where, answer)
    if answer.get("legend") != dict(zip(keys, levels, strict=True)):
        problems.append(f'{where}.legend is not {{"0".."{len(levels) - 1}"}} → the levels as sent')
    score = answer.get("score")
    if not _is_number(score):
        problems.append(f"{where}.score is not a number")
    elif not problems:
        expected = math.fsum(i * answer["probabilities"][k] for i, k in enumerate(keys))
        if abs(score - expected) > PROBABILITY_TOLERANCE:
            problems.append(f"{where}.score {score!r} is not Σ i·p_i = {expected!r}")
    return problems


def answer_problems(questions: Mapping[str, Mapping[str, Any]], body: Any) -> list[str]:
    """Everything in a 200 body that breaks docs/spec.md#the-response, or [] when the shape is right."""
    if not isinstance(body, dict):
        return ["the body is not a JSON object"]
    problems: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        problems.append("model is missing")
    usage = body.get("usage")
    counts = [usage.get(k) if isinstance(usage, dict) else None for k in ("input_tokens", "output_tokens")]
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
        problems.append("usage.input_tokens / usage.output_tokens are not non-negative integers")
    answers = body.get("answers")
    if not isinstance(answers, dict):
        return [*problems, "answers is not an object"]
    if set(answers) != set(questions):
        problems.append(f"answers are for {sorted(answers)[:5]}, questions were {sorted(questions)[:5]}")
    for qid, question in questions.items():
        answer = answers.get(qid)
        if isinstance(answer, dict):
            problems += _typed_answer_problems(f"answers[{qid!r}]", question, answer)
    return problems


def _typed_answer_problems(where: str, question: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
    if answer.get("type") != question["type"]:
        return [f"{where}.type is {answer.get('type')!r}, the question is {question['type']!r}"]
    if question["type"] == "noul":
        return _noul_problems(where, answer)
    if question["type"] == "choice":
        return _choice_problems(where, question, answer)
    return _score_problems(where, question, answer)


# ---------------------------------------------------------------------------------------------
# Evaluations


Expectation = Callable[[Mapping[str, Any]], Verdict]


def _answered(questions: Mapping[str, Mapping[str, Any]], *expectations: Expectation) -> Callable[[int, Any], Verdict]:
    """A 200 whose shape is right, then each expectation on the answers."""

    def evaluate(status: int, body: Any) -> Verdict:
        if status != 200:
            return Verdict(False, f"expected 200, got {status}: {excerpt(body)}")
        problems = answer_problems(questions, body)
        if problems:
            more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
            return Verdict(False, "; ".join(problems[:3]) + more)
        reasons: list[str] = []
        for expectation in expectations:
            verdict = expectation(body["answers"])
            if not verdict.ok:
                return verdict
            reasons.append(verdict.reason)
        return Verdict(True, "; ".join(reasons) or "well-formed answers")

    return evaluate


def _refused_with_422(status: int, body: Any) -> Verdict:
    if status == 422:
        return Verdict(True, "refused with 422")
    return Verdict(False, f"expected 422 for 65 options, got {status}: {excerpt(body)}")


def _all_shapes(answers: Mapping[str, Any]) -> Verdict:
    return Verdict(True, "noul, choice and score answers are well-formed")


def _noul_is(qid: str, yes: bool) -> Expectation:
    def expectation(answers: Mapping[str, Any]) -> Verdict:
        p = answers[qid]["noul"]
        ok = p > 0.5 if yes else p < 0.5
        word = "yes" if yes else "no"
        return Verdict(ok, f"p(yes)={p:.3f}, an obvious {word} {'is' if ok else 'is NOT'} {word}")

    return expectation


def _choice_is(qid: str, winner: str) -> Expectation:
    def expectation(answers: Mapping[str, Any]) -> Verdict:
        answer = answers[qid]
        p = answer["probabilities"][winner]
        if answer["choice"] == winner:
            return Verdict(True, f"{winner!r} wins with p={p:.3f}")
        return Verdict(False, f"{answer['choice']!r} won over the obvious {winner!r} (p={p:.3f})")

    return expectation


def _count_is(qid: str, n: int) -> Expectation:
    def expectation(answers: Mapping[str, Any]) -> Verdict:
        return Verdict(len(answers[qid]["probabilities"]) == n, f"{n} probabilities")

    return expectation


# ---------------------------------------------------------------------------------------------
# The requests


def option_names(n: int) -> list[str]:
    """`n` distinct names, some non-ASCII, so the server must echo names byte for byte."""
    return [f"opção {i:02d} ✓" if i % 8 == 0 else f"option-{i:02d}" for i in range(n)]


def many_options(n: int) -> dict[str, str | None]:
    """`n` options; every fifth has a null description (the name then carries the meaning)."""
    return {name: None if i % 5 == 4 else f"Item number {i}" for i, name in enumerate(option_names(n))}


SHAPES_STATE: list[dict[str, str]] = [
    {"role": "system", "content": "You are a support assistant."},
    {"role": "user", "content": "I was charged twice for my order. Please refund the duplicate charge."},
]
SHAPES_QUESTIONS: dict[str, dict[str, Any]] = {
    "refund": {"type": "noul", "instructions": "Does the user request a refund?"},
    "department": {
        "type": "choice",
        "instructions": "Which department should handle this?",
        "criteria": {"billing": "Payments and refunds", "technical": "Software bugs", "général ☕": None},
    },
    "urgency": {
        "type": "score",
        "instructions": "How urgent is the request?",
        "criteria": ["Routine", "Urgent", {"level": "Emergency", "examples": ["outage"]}],
    },
}


@dataclass(frozen=True)
class SemanticCase:
    """A question whose answer is obvious; `expect` is True/False for noul, the winner for choice."""

    name: str
    state: str
    question: dict[str, Any]
    expect: bool | str


# Mirrored pairs (see the module docstring), tuned on SmolLM2-135M-Instruct, the embedded default:
# - The yes/no pair is a real reading test: the same question on a glad and a furious message.
#   The tiny model gets both right (p(yes) 0.71 and 0.27 when tuned), so the pair also catches a
#   server that answers every noul the same way.
# - The choice pair puts the right option first (of two) and last (of three). SmolLM2-135M shows
#   almost no content signal on letter choices, only a position preference that depends on the
#   option count; these two layouts are where that preference agrees with the obvious answer
#   (margins ~0.2), so for this model the pair tests the label plumbing (any reversed, rotated or
#   constant mapping fails one of them), while a capable model passes it on meaning alone.
GLAD = "Great, thanks! Everything works perfectly."
FURIOUS = "Awful. It is broken again and I am furious."
_SATISFIED = {"type": "noul", "instructions": "Is the user satisfied?"}
_HAPPY, _ANGRY, _SAD = "Happy and grateful", "Angry and upset", "Sad and lonely"
_FEEL = "How does the user feel?"

SEMANTIC_CASES: tuple[SemanticCase, ...] = (
    SemanticCase("obvious_yes", GLAD, _SATISFIED, True),
    SemanticCase("obvious_no", FURIOUS, _SATISFIED, False),
    SemanticCase(
        "obvious_choice_first",
        GLAD,
        {"type": "choice", "instructions": _FEEL, "criteria": {"happy": _HAPPY, "angry": _ANGRY}},
        "happy",
    ),
    SemanticCase(
        "obvious_choice_last",
        GLAD,
        {"type": "choice", "instructions": _FEEL, "criteria": {"angry": _ANGRY, "sad": _SAD, "happy": _HAPPY}},
        "happy",
    ),
)


def _request(model: str, state: Any, questions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {"model": model, "state": state, "questions": dict(questions)}


def semantic_check(case: SemanticCase, model: str) -> Check:
    qid = "q"
    questions = {qid: case.question}
    expect = case.expect
    expectation = _noul_is(qid, expect) if isinstance(expect, bool) else _choice_is(qid, expect)
    return Check(
        name=case.name,
        purpose=f"semantics: {case.state!r} → {case.expect!r}",
        method="POST",
        path="/v1/systemone",
        body=_request(model, case.state, questions),
        evaluate=_answered(questions, expectation),
        keep_answers=True,
    )


def catalog_check() -> Check:
    return Check(
        name="models",
        purpose="GET /v1/models lists the server's model",
        method="GET",
        path="/v1/models",
        body=None,
        evaluate=evaluate_catalog,
    )


def system_one_checks(model: str = ALIAS_MODEL, catalog_model: str | None = None) -> list[Check]:
    """The System One POST checks, in order. `catalog_model`, when the catalog listed one, must be accepted too."""
    wide = {"wide": {"type": "choice", "instructions": "Which item fits best?", "criteria": many_options(64)}}
    too_wide = {"wide": {"type": "choice", "criteria": many_options(MAX_DEFAULT_OPTIONS + 1)}}
    checks = [
        Check(
            name="all_types",
            purpose="noul, choice and score answers have the documented shapes",
            method="POST",
            path="/v1/systemone",
            body=_request(model, SHAPES_STATE, SHAPES_QUESTIONS),
            evaluate=_answered(SHAPES_QUESTIONS, _all_shapes),
        ),
        Check(
            name="choice_64",
            purpose="a 64-option choice question gets 64 probabilities keyed by the exact names",
            method="POST",
            path="/v1/systemone",
            body=_request(model, "A list of items to choose from.", wide),
            evaluate=_answered(wide, _count_is("wide", 64)),
        ),
        Check(
            name="choice_65_refused",
            purpose="a 65-option choice question is refused with 422 before any inference",
            method="POST",
            path="/v1/systemone",
            body=_request(model, "A list of items to choose from.", too_wide),
            evaluate=_refused_with_422,
        ),
    ]
    if catalog_model is not None and catalog_model != model:
        listed = {"q": {"type": "noul", "instructions": "Is this a greeting?"}}
        checks.append(
            Check(
                name="catalog_model_accepted",
                purpose=f"the catalog's own id {catalog_model!r} is accepted as `model`",
                method="POST",
                path="/v1/systemone",
                body=_request(catalog_model, "Hello!", listed),
                evaluate=_answered(listed),
            )
        )
    return checks


def excerpt(body: Any, limit: int = 300) -> str:
    text = body if isinstance(body, str) else repr(body)
    return text if len(text) <= limit else text[:limit] + "…"
