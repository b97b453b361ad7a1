"""Parse a Decisions body: strict decoding, the rules beyond the schema, the model, then the decision.

Errors carry Decisions locations (`("questions", 0, "choices")`), which the error envelope writes
as OpenAI's `param` (`questions[0].choices`). The limits are System One's (`GET /v1/limits`).
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec

from openjev.contracts.decisions.errors import validation_code
from openjev.contracts.decisions.input import json_text, part_text, state_of
from openjev.contracts.decisions.wire import DecisionRequest, InputJSON, Instructions, Question
from openjev.contracts.decoding import decode_strict, explain_validation_error
from openjev.contracts.examples import example_issues, with_examples
from openjev.contracts.models import check_model
from openjev.domain.decision import Ask, Decision, Loc, Policy
from openjev.domain.errors import InvalidRequest, Issue
from openjev.domain.kinds import KINDS
from openjev.domain.limits import Limits
from openjev.domain.validation import ask_count_issue

_decoder = msgspec.json.Decoder(DecisionRequest)


class Parsed(msgspec.Struct, frozen=True):
    """A checked Decisions request and the decision it asks for."""

    request: DecisionRequest
    decision: Decision


def parse(body: bytes, limits: Limits, accepted_models: Collection[str]) -> Parsed:
    """Everything that can be checked without the tokenizer: schema, counts, items, model; then translate."""
    request = decode_request(body)
    issues = _question_issues(request.questions, limits)
    if issues:
        raise InvalidRequest(issues)
    check_model(request.model, accepted_models)
    state = state_of(request.input)
    wheres: list[Loc] = [("questions", i) for i in range(len(request.questions))]
    asks = [
        msgspec.structs.replace(
            question.ask(instructions_text(question.instructions, (*where, "instructions")), where), name=question.name
        )
        for question, where in zip(request.questions, wheres, strict=True)
    ]
    issues = [
        issue
        for question, ask, where in zip(request.questions, asks, wheres, strict=True)
        for issue in example_issues(ask, [e.answer for e in question.x_examples or ()], (*where, "x_examples"), limits)
    ]
    if issues:
        raise InvalidRequest(issues)
    decision = Decision(
        state=state,
        asks=tuple(_solved(q, ask, where) for q, ask, where in zip(request.questions, asks, wheres, strict=True)),
        policy=Policy(debias=request.x_debias, label_mass=request.x_label_mass, refusals=True),
        root=(),
        state_where=("input",),
    )
    return Parsed(request=request, decision=decision)


def _solved(question: Question, ask: Ask, where: Loc) -> Ask:
    """The ask with the question's worked examples, their answers checked."""
    if not question.x_examples:
        return ask
    examples = question.x_examples
    states = [state_of(example.input, (*where, "x_examples", j, "input")) for j, example in enumerate(examples)]
    return with_examples(ask, [(state, example.answer) for state, example in zip(states, examples, strict=True)])


def decode_request(body: bytes) -> DecisionRequest:
    return decode_strict(_decoder, body, (), _issue)


def _issue(exc: msgspec.ValidationError) -> Issue:
    message, path = explain_validation_error(exc)
    return Issue(tuple(path), message, validation_code(message))


def instructions_text(instructions: Instructions, where: Loc) -> str:
    """Instructions as the model reads them: a string, or its parts' texts joined with a line break."""
    if isinstance(instructions, str):
        return instructions
    return "\n".join(
        json_text(part.data, (*where, j)) if isinstance(part, InputJSON) else part_text(part, (*where, j))
        for j, part in enumerate(instructions)
    )


def _question_issues(questions: list[Question], limits: Limits) -> list[Issue]:
    issues: list[Issue] = []
    count = ask_count_issue(len(questions), limits, ("questions",))
    if count is not None:
        issues.append(count)
    for i, question in enumerate(questions):
        where = ("questions", i)
        options = KINDS[question.kind].count_issue(question.option_count, limits, (*where, question.options_field))
        if options is not None:
            issues.append(options)
        issues += question.duplicate_issues(where)
    return issues
