"""The pure check definitions: shape validation, the catalog, the mirrored semantic pairs."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

from openjev.smoke.checks import (
    SEMANTIC_CASES,
    SHAPES_QUESTIONS,
    answer_problems,
    catalog_model_ids,
    evaluate_catalog,
    listed_model,
    many_options,
    semantic_check,
)
from openjev.smoke.suite import build_checks
from tests.smoke.smoke_stub import answer_for, correct_distribution


def good_body() -> dict[str, Any]:
    answers = {qid: answer_for(q, correct_distribution(None, q)) for qid, q in SHAPES_QUESTIONS.items()}
    return {"model": "m", "answers": answers, "usage": {"input_tokens": 10, "output_tokens": 4}}


def test_a_correct_body_has_no_problems() -> None:
    assert answer_problems(SHAPES_QUESTIONS, good_body()) == []


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        target = body
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return change


def _rescale(qid: str, factor: float) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        probabilities = body["answers"][qid]["probabilities"]
        for k in probabilities:
            probabilities[k] *= factor

    return change


BREAKAGES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "noul above 1": (_set(("answers", "refund", "noul"), 1.5), "noul is not a probability"),
    "noul infinite": (_set(("answers", "refund", "noul"), math.inf), "noul is not a probability"),
    "noul boolean": (_set(("answers", "refund", "noul"), True), "noul is not a probability"),
    "wrong type": (_set(("answers", "refund", "type"), "choice"), "type is 'choice'"),
    "missing answer": (_delete(("answers", "urgency")), "answers are for"),
    "extra answer": (_set(("answers", "extra"), {"type": "noul", "noul": 0.5}), "answers are for"),
    "no model": (_delete(("model",)), "model is missing"),
    "usage not ints": (_set(("usage", "input_tokens"), 1.5), "usage."),
    "choice unknown": (_set(("answers", "department", "choice"), "sales"), "not one of the options"),
    "choice not argmax": (_set(("answers", "department", "choice"), "technical"), "not the most probable"),
    "choice renamed option": (
        _set(("answers", "department", "probabilities"), {"billing": 0.5, "technical": 0.3, "general": 0.2}),
        "keys differ",
    ),
    "choice sum": (_rescale("department", 1.001), "sum to"),
    "choice confidence": (_set(("answers", "department", "confidence"), -0.1), "confidence is not in [0, 1]"),
    "score not expectation": (_set(("answers", "urgency", "score"), 0.5), "is not Σ i·p_i"),
    "score legend": (_set(("answers", "urgency", "legend", "2"), "Emergency"), "legend"),
    "score keys": (_delete(("answers", "urgency", "probabilities", "2")), "keys differ"),
    "score negative p": (_set(("answers", "urgency", "probabilities", "1"), -0.01), "outside [0, 1]"),
}


@pytest.mark.parametrize("name", sorted(BREAKAGES))
def test_each_breakage_is_reported(name: str) -> None:
    change, expected = BREAKAGES[name]
    body = copy.deepcopy(good_body())
    change(body)
    problems = answer_problems(SHAPES_QUESTIONS, body)
    assert any(expected in p for p in problems), problems


def test_probabilities_within_tolerance_pass() -> None:
    body = good_body()
    _rescale("department", 1 + 5e-7)(body)
    assert answer_problems(SHAPES_QUESTIONS, body) == []


def test_catalog_ids_from_both_styles() -> None:
    body = {
        "object": "list",
        "data": [{"id": "jev-latest"}, {"id": "Qwen/Qwen3.6-35B-A3B"}],
        "models": [{"name": "jev-latest"}, {"name": "other"}],
    }
    assert catalog_model_ids(body) == ["jev-latest", "Qwen/Qwen3.6-35B-A3B", "other"]
    assert listed_model(body) == "Qwen/Qwen3.6-35B-A3B"
    assert listed_model({"models": [{"name": "jev-latest"}]}) is None
    assert evaluate_catalog(200, body).ok
    assert not evaluate_catalog(200, {"data": []}).ok
    assert not evaluate_catalog(404, "Not Found").ok


def test_option_counts_and_names() -> None:
    checks = {c.name: c for c in build_checks("jev-latest", None)}
    assert "catalog_model_accepted" not in checks
    wide = checks["choice_64"].body["questions"]["wide"]["criteria"]  # type: ignore[index]
    too_wide = checks["choice_65_refused"].body["questions"]["wide"]["criteria"]  # type: ignore[index]
    assert (len(wide), len(too_wide)) == (64, 65)
    assert any(not name.isascii() for name in wide)
    assert None in wide.values()  # null descriptions are exercised too
    assert len(set(many_options(64))) == 64
    with_catalog = [c.name for c in build_checks("jev-latest", "some/model")]
    assert "catalog_model_accepted" in with_catalog


def test_65_options_must_be_refused_with_422_only() -> None:
    check = next(c for c in build_checks() if c.name == "choice_65_refused")
    assert check.evaluate(422, {"detail": []}).ok
    assert not check.evaluate(200, good_body()).ok
    assert not check.evaluate(400, {}).ok


def test_a_non_200_fails_with_the_status() -> None:
    check = build_checks()[0]
    verdict = check.evaluate(500, {"detail": "boom"})
    assert not verdict.ok
    assert "500" in verdict.reason


# -- The mirrored semantic pairs --------------------------------------------------------------
#
# A "correct model" puts 0.9 on the obvious answer. A broken label mapping permutes (or replaces)
# the distribution over labels before the server names the options. Every such mapping that is
# not the identity must fail at least one check of the noul pair and of the choice pair.

Mapping_ = Callable[[list[float]], list[float]]
MAPPINGS: dict[str, Mapping_] = {
    "reversed": lambda p: p[::-1],
    "rotated by one": lambda p: p[1:] + p[:1],
    "rotated back by one": lambda p: p[-1:] + p[:-1],
    "always the first label": lambda p: [0.9] + [0.1 / (len(p) - 1)] * (len(p) - 1),
    "always the last label": lambda p: [0.1 / (len(p) - 1)] * (len(p) - 1) + [0.9],
    "uniform": lambda p: [1 / len(p)] * len(p),
}


def verdicts(mapping: Mapping_) -> dict[str, bool]:
    out = {}
    for case in SEMANTIC_CASES:
        check = semantic_check(case, "jev-latest")
        answer = answer_for(case.question, mapping(correct_distribution(case.state, case.question)))
        body = {"model": "m", "answers": {"q": answer}, "usage": {"input_tokens": 1, "output_tokens": 2}}
        out[case.name] = check.evaluate(200, body).ok
    return out


def test_a_correct_mapping_passes_every_semantic_check() -> None:
    assert all(verdicts(lambda p: p).values())


@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_a_broken_mapping_fails_each_pair(name: str) -> None:
    result = verdicts(MAPPINGS[name])
    assert not (result["obvious_yes"] and result["obvious_no"]), result
    assert not (result["obvious_choice_first"] and result["obvious_choice_last"]), result


def test_pairs_are_mirrors() -> None:
    cases = {c.name: c for c in SEMANTIC_CASES}
    yes, no = cases["obvious_yes"], cases["obvious_no"]
    assert yes.question == no.question
    assert (yes.expect, no.expect) == (True, False)
    first, last = cases["obvious_choice_first"], cases["obvious_choice_last"]
    assert first.expect == last.expect
    assert next(iter(first.question["criteria"])) == first.expect
    assert list(last.question["criteria"])[-1] == last.expect
