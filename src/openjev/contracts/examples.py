"""Worked examples (`x_examples`) as both contracts take them: checked against the ask, then attached.

Each contract decodes its own shapes (a System One `state`, a Decisions `input`) and names the
answer as its answers name options: true/false for yes/no, an option's name or value, a level's
0-based index. Here those become the core's `Example`, so the same examples give the same prompt
whichever route sent them.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from openjev.domain.decision import Ask, Example, Loc, OptionKey, State
from openjev.domain.errors import Issue, echo
from openjev.domain.limits import Limits

SHOWN_KEYS = 10  # option names quoted in an error, at most


def example_issues(ask: Ask, answers: Sequence[OptionKey], where: Loc, limits: Limits) -> list[Issue]:
    """Too many examples, or an answer that names no option of the ask (typed: `1` is not `true`)."""
    if not answers:
        return []
    issues: list[Issue] = []
    if len(answers) > limits.max_examples:
        message = f"expected at most {limits.max_examples} examples per question, got {len(answers)}"
        issues.append(Issue(where, message, "too_many_examples"))
    keys = [option.key for option in ask.options]
    shown = ", ".join(msgspec.json.encode(key).decode() for key in keys[:SHOWN_KEYS])
    more = ", …" if len(keys) > SHOWN_KEYS else ""
    for j, answer in enumerate(answers):
        if ask.option_index(answer) is None:
            said = echo(answer) if isinstance(answer, str) else msgspec.json.encode(answer).decode()
            message = f"the example's answer {said} is none of this question's answers ({shown}{more})"
            issues.append(Issue((*where, j, "answer"), message, "invalid_example_answer"))
    return issues


def with_examples(ask: Ask, examples: Sequence[tuple[State, OptionKey]]) -> Ask:
    """The ask with its examples attached; every answer was checked by `example_issues`."""
    solved = []
    for state, answer in examples:
        index = ask.option_index(answer)
        if index is None:
            raise ValueError(f"unchecked example answer {answer!r}")
        solved.append(Example(state=state, answer=index))
    return msgspec.structs.replace(ask, examples=tuple(solved))
