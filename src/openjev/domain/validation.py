"""The rules every contract applies the same way: counts, JSON depth and the token limits.

Each contract checks its own wire shape, then calls these with the locations of its own fields, so
the same request breaks the same rule with the same message whichever contract it came through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openjev.domain.decision import Ask, Decision, Loc
from openjev.domain.errors import InvalidRequest, Issue
from openjev.domain.limits import Limits
from openjev.domain.prompt import PromptPlan

MAX_JSON_DEPTH = 64  # nesting of a JSON text value (state, instructions, descriptions); a flat object is 1


def ask_count_issue(count: int, limits: Limits, loc: Loc) -> Issue | None:
    if 1 <= count <= limits.max_questions:
        return None
    return Issue(
        loc,
        f"expected 1 to {limits.max_questions} questions, got {count}",
        "too_many_questions" if count else "too_few_questions",
    )


def depth_issues(values: Iterable[tuple[Loc, Any]]) -> list[Issue]:
    """JSON values nested deeper than MAX_JSON_DEPTH: refused before anything recurses into them."""
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


def validate_tokens(plan: PromptPlan, decision: Decision, limits: Limits, branch_limit: int) -> None:
    """Per-branch context (prompt + the one answer token) and the decision's total token budget."""
    prefix = len(plan.prefix_ids)
    issues = [
        _branch_issue(decision.asks[branch.ask], prefix, len(branch.suffix_ids), branch_limit, "")
        for branch in plan.branches
        if prefix + len(branch.suffix_ids) + 1 > branch_limit
    ]
    if plan.total_tokens > limits.max_total_input_tokens:
        issues.append(_total_issue(decision.root, plan.total_tokens, limits, ""))
    if issues:
        raise InvalidRequest(issues)


def validate_token_floor(
    prefix: int, asks: Sequence[int], decision: Decision, limits: Limits, branch_limit: int
) -> None:
    """The same limits on lower bounds of the token counts, checked before anything is tokenized.

    Refuses only what cannot fit whatever the exact counts turn out to be. `asks`: each ask's floor.
    """
    issues = [
        _branch_issue(ask, prefix, suffix, branch_limit, "at least ")
        for ask, suffix in zip(decision.asks, asks, strict=True)
        if prefix + suffix + 1 > branch_limit
    ]
    total = prefix + sum(asks)
    if total > limits.max_total_input_tokens:
        issues.append(_total_issue(decision.root, total, limits, "at least "))
    if issues:
        raise InvalidRequest(issues)


def _branch_issue(ask: Ask, prefix: int, suffix: int, branch_limit: int, bound: str) -> Issue:
    return Issue(
        ask.where,
        f"this question's prompt needs {bound}{prefix + suffix + 1} tokens (state {bound}{prefix}, question "
        f"{bound}{suffix}, answer 1); the limit per question is {branch_limit}",
        "tokens_exceeded",
    )


def _total_issue(root: Loc, total: int, limits: Limits, bound: str) -> Issue:
    return Issue(
        root,
        f"the request needs {bound}{total} input tokens (state once plus every question); "
        f"the limit is {limits.max_total_input_tokens}",
        "tokens_exceeded",
    )
