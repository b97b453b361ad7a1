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


def validate_tokens(
    plan: PromptPlan,
    decision: Decision,
    limits: Limits,
    branch_limit: int,
    priors: PromptPlan | None = None,
    examples: Sequence[PromptPlan] = (),
) -> None:
    """Per-branch context (prompt + the one answer token) and the decision's total token budget.

    The budget counts what the backend is sent: the warm-ups (the worked examples' start, the prefix),
    then every call whole (each ask in every option order, and every prior call, `priors`, and every
    call on a worked example, `examples`, whether or not its answer is cached).
    """
    prefix = len(plan.prefix_ids)
    issues = [
        _branch_issue(decision.asks[branch.ask], prefix, len(branch.suffix_ids), branch_limit, "")
        for branch in plan.branches
        if prefix + len(branch.suffix_ids) + 1 > branch_limit
    ]
    for example in examples:
        needed = len(example.prefix_ids) + max(len(branch.suffix_ids) for branch in example.branches) + 1
        if needed > branch_limit:
            issues.append(_example_issue(decision.asks[example.branches[0].ask], needed, branch_limit))
    sent = [*([priors] if priors is not None else []), *examples]
    total = plan.head_tokens + prefix + plan.sent_tokens + sum(p.sent_tokens for p in sent)
    if total > limits.max_total_input_tokens:
        issues.append(_total_issue(decision.root, total, limits, ""))
    if issues:
        raise InvalidRequest(issues)


def validate_token_floor(
    prefix: int,
    asks: Sequence[int],
    decision: Decision,
    limits: Limits,
    branch_limit: int,
    calls: Sequence[tuple[int, int]] | None = None,
) -> None:
    """The same limits on lower bounds of the token counts, checked before anything is tokenized.

    Refuses only what cannot fit whatever the exact counts turn out to be. `asks`: each ask's floor;
    `calls`: each ask's number of option orders and of prior calls (default: one order, no prior).
    A prior's content-free prefix counts 0.
    """
    issues = [
        _branch_issue(ask, prefix, suffix, branch_limit, "at least ")
        for ask, suffix in zip(decision.asks, asks, strict=True)
        if prefix + suffix + 1 > branch_limit
    ]
    counts = calls if calls is not None else [(1, 0)] * len(asks)
    total = prefix + sum(
        orders * (prefix + suffix) + priors * suffix for suffix, (orders, priors) in zip(asks, counts, strict=True)
    )
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


def _example_issue(ask: Ask, needed: int, branch_limit: int) -> Issue:
    return Issue(
        ask.where,
        f"a worked example of this question, asked like the case (x_debias fit), needs {needed} tokens; the "
        f"limit per question is {branch_limit}: shorten the example, or leave fit out to show it in the prompt",
        "tokens_exceeded",
    )


def _total_issue(root: Loc, total: int, limits: Limits, bound: str) -> Issue:
    return Issue(
        root,
        f"the request would send the backend {bound}{total} input tokens (the state's prefix, then every "
        "call whole: each question in every option order bias removal asks, each prior call, and each "
        "call on a worked example x_debias fit asks); "
        f"the limit is {limits.max_total_input_tokens}",
        "tokens_exceeded",
    )


def out_of_vocabulary(token: int, vocab_size: int) -> str:
    return (
        f"the prompt's token id {token} is outside the model's vocabulary (ids 0 to {vocab_size - 1}): openjev's "
        "tokenizer does not match the model the backend serves (OPENJEV_TOKENIZER, OPENJEV_MODEL)"
    )


def validate_vocabulary(plan: PromptPlan, decision: Decision, vocab_size: int | None) -> None:
    """Every id of the plan (prompts and labels) within [0, vocab_size), checked before any call is made.

    An id outside the model's vocabulary comes only from a tokenizer that does not match the model;
    sent in a prompt, it makes SGLang 0.5.23 exit (its embedding lookup fails, the server goes down).
    The issue points at the state when the prefix has one, else at the first question whose prompt does.
    """
    if vocab_size is None:
        return
    where: Loc = decision.state_where
    bad = _outside(plan.prefix_ids, vocab_size)
    for branch in plan.branches:
        if bad is not None:
            break
        where = decision.asks[branch.ask].where
        bad = _outside(branch.suffix_ids, vocab_size)
        if bad is None:
            bad = _outside(branch.label_ids, vocab_size)
    if bad is not None:
        raise InvalidRequest([Issue(where, out_of_vocabulary(bad, vocab_size), "token_out_of_vocabulary")])


def _outside(ids: Sequence[int], vocab_size: int) -> int | None:
    """The first id at or past vocab_size, or None (tokenizers make no negative id; `max` is one C loop)."""
    if not ids or max(ids) < vocab_size:
        return None
    return next(token for token in ids if token >= vocab_size)
