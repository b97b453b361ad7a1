"""Request rules beyond the schema: counts, names, model, unsupported inputs.

See docs/spec.md#the-request and docs/spec.md#limits-and-errors.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from openjev.domain.errors import InvalidRequest, Issue, UnknownModel
from openjev.domain.limits import Limits
from openjev.domain.prompt import PromptPlan
from openjev.domain.wire import ChoiceQuestion, NoulQuestion, ScoreQuestion, SystemOneRequest

JEV_ALIAS = "jev-latest"
MAX_JSON_DEPTH = 64  # nesting of a JSON text value (state, instructions, descriptions); a flat object is 1


def validate_request(request: SystemOneRequest, limits: Limits) -> None:
    """Every schema-level rule that msgspec cannot express with static constraints."""
    issues: list[Issue] = []
    if request.assets is not None:
        issues.append(
            Issue(("body", "assets"), "assets are not supported: only text input is supported", "unsupported_content")
        )
    count = len(request.questions)
    if not 1 <= count <= limits.max_questions:
        issues.append(
            Issue(
                ("body", "questions"),
                f"expected 1 to {limits.max_questions} questions, got {count}",
                "too_many_questions" if count else "too_few_questions",
            )
        )
    issues += _too_deep(request)
    for qid, question in request.questions.items():
        if qid == "":
            issues.append(Issue(("body", "questions", qid), "question ids must be non-empty strings", "value_error"))
        if isinstance(question, ChoiceQuestion | ScoreQuestion):
            n = len(question.criteria)
            kind = "options" if isinstance(question, ChoiceQuestion) else "levels"
            if not limits.min_options <= n <= limits.max_options:
                issues.append(
                    Issue(
                        ("body", "questions", qid, "criteria"),
                        f"expected {limits.min_options} to {limits.max_options} {kind}, got {n}",
                        f"{'too_many' if n > limits.max_options else 'too_few'}_{kind}",
                    )
                )
    if issues:
        raise InvalidRequest(issues)


def _too_deep(request: SystemOneRequest) -> list[Issue]:
    """Text values nested deeper than MAX_JSON_DEPTH: refused here, before the prompt builder recurses."""
    values: list[tuple[tuple[str | int, ...], Any]] = [(("body", "state"), request.state)]
    for qid, question in request.questions.items():
        here: tuple[str | int, ...] = ("body", "questions", qid)
        values.append(((*here, "instructions"), question.instructions))
        if isinstance(question, NoulQuestion) and question.criteria is not None:
            values += [((*here, "criteria", "true"), question.criteria.true)]
            values += [((*here, "criteria", "false"), question.criteria.false)]
        elif isinstance(question, ChoiceQuestion):
            values += [((*here, "criteria", name), text) for name, text in question.criteria.items()]
        elif isinstance(question, ScoreQuestion):
            values += [((*here, "criteria", i), text) for i, text in enumerate(question.criteria)]
    return [
        Issue(loc, f"JSON nested deeper than {MAX_JSON_DEPTH} levels", "json_too_deep")
        for loc, value in values
        if json_depth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH
    ]


def json_depth(value: Any, stop_after: int) -> int:
    """How deeply `value` nests lists and objects (0 for a scalar), counted without recursion.

    Stops counting once past `stop_after`.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > stop_after:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def check_model(model: str, accepted: Collection[str]) -> None:
    if model != JEV_ALIAS and model not in accepted:
        names = ", ".join(sorted({JEV_ALIAS, *accepted}))
        raise UnknownModel(f"unknown model {model!r}: this server serves {names}")


def validate_tokens(plan: PromptPlan, limits: Limits, branch_limit: int) -> None:
    """Per-branch context (prompt + the one answer token) and the request's total token budget."""
    prefix = len(plan.prefix_ids)
    issues = [
        _branch_issue(branch.question_id, prefix, len(branch.suffix_ids), branch_limit, "")
        for branch in plan.branches
        if prefix + len(branch.suffix_ids) + 1 > branch_limit
    ]
    if plan.total_tokens > limits.max_total_input_tokens:
        issues.append(_total_issue(plan.total_tokens, limits, ""))
    if issues:
        raise InvalidRequest(issues)


def validate_token_floor(prefix: int, questions: Mapping[str, int], limits: Limits, branch_limit: int) -> None:
    """The same limits on lower bounds of the token counts, checked before anything is tokenized.

    Refuses only what cannot fit whatever the exact counts turn out to be.
    """
    issues = [
        _branch_issue(qid, prefix, suffix, branch_limit, "at least ")
        for qid, suffix in questions.items()
        if prefix + suffix + 1 > branch_limit
    ]
    total = prefix + sum(questions.values())
    if total > limits.max_total_input_tokens:
        issues.append(_total_issue(total, limits, "at least "))
    if issues:
        raise InvalidRequest(issues)


def _branch_issue(question_id: str, prefix: int, suffix: int, branch_limit: int, bound: str) -> Issue:
    return Issue(
        ("body", "questions", question_id),
        f"this question's prompt needs {bound}{prefix + suffix + 1} tokens (state {bound}{prefix}, question "
        f"{bound}{suffix}, answer 1); the limit per question is {branch_limit}",
        "tokens_exceeded",
    )


def _total_issue(total: int, limits: Limits, bound: str) -> Issue:
    return Issue(
        ("body",),
        f"the request needs {bound}{total} input tokens (state once plus every question); "
        f"the limit is {limits.max_total_input_tokens}",
        "tokens_exceeded",
    )
