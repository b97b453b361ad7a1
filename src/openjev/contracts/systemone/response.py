"""The System One response for an outcome: answers keyed by question id, in the request's order."""

from __future__ import annotations

from openjev.contracts.systemone.parsing import Parsed
from openjev.contracts.systemone.wire import Answer, SystemOneResponse, Usage
from openjev.domain.errors import BackendError
from openjev.domain.outcome import Distribution, Outcome


def respond(parsed: Parsed, outcome: Outcome, model: str) -> SystemOneResponse:
    """System One has no refusal: its decisions never ask for one, so every result is a distribution."""
    answers: dict[str, Answer] = {}
    for (qid, question), result in zip(parsed.request.questions.items(), outcome.results, strict=True):
        if not isinstance(result, Distribution):
            raise BackendError(f"question {qid!r} was refused, which System One cannot express: {result.reason}")
        answers[qid] = question.answer(result)
    work = outcome.work
    return SystemOneResponse(
        model=model, answers=answers, usage=Usage(input_tokens=work.input_tokens, output_tokens=work.calls)
    )
