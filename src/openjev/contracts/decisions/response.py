"""The Decisions response for an outcome: answers in question order, each echoing its question's name.

Usage (docs/api.md): `input_tokens` are the prompt tokens of every backend call (the warm-up and
every branch, cached ones included, as System One counts them); `cached_tokens` those the backend
served from its prefix cache; `cache_write_tokens` the shared prefix's tokens the warm-up computed
and left in that cache for the questions; `output_tokens` the single-token calls (one token
each); `reasoning_tokens` 0 (nothing is generated). The cache figures are 0 when the backend does
not report cache hits (the `x-openjev-cached-tokens` header is then absent).
"""

from __future__ import annotations

from openjev.contracts.decisions.parsing import Parsed
from openjev.contracts.decisions.wire import (
    Answer,
    AnswerRefusal,
    Decision,
    DecisionUsage,
    InputTokensDetails,
    OutputTokensDetails,
)
from openjev.contracts.extensions import optional
from openjev.domain.outcome import Distribution, Outcome, Work


def respond(parsed: Parsed, outcome: Outcome, model: str) -> Decision:
    answers: list[Answer] = [
        question.answer(result)
        if isinstance(result, Distribution)
        else AnswerRefusal(name=question.name, x_reason=result.reason, x_label_mass=optional(result.label_mass))
        for question, result in zip(parsed.request.questions, outcome.results, strict=True)
    ]
    return Decision(answers=answers, model=model, usage=usage(outcome.work))


def usage(work: Work) -> DecisionUsage:
    warm_cached = work.warm_cached_tokens
    cached = 0 if warm_cached is None or work.branch_cached_tokens is None else warm_cached + work.branch_cached_tokens
    written = 0 if warm_cached is None else work.warm_prompt_tokens - warm_cached
    return DecisionUsage(
        input_tokens=work.input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=written),
        output_tokens=work.calls,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=work.input_tokens + work.calls,
    )
