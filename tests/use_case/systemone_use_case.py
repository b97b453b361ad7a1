"""The use case driven with System One requests, as the System One route drives it, for the tests.

`OverSystemOne(evaluator)` prepares a parsed System One request and evaluates it into the System One
response, so use-case tests can state what a caller sees (answers by question id, usage).
"""

from __future__ import annotations

import msgspec

from openjev.contracts import systemone
from openjev.contracts.systemone.wire import SystemOneResponse
from openjev.domain.outcome import Outcome
from openjev.domain.prompt import Branch, PromptPlan
from openjev.evaluation import Evaluator, Prepared


class PreparedRequest(msgspec.Struct, frozen=True):
    parsed: systemone.Parsed
    prepared: Prepared

    @property
    def plan(self) -> PromptPlan:
        return self.prepared.plan

    @property
    def priors(self) -> PromptPlan | None:
        return self.prepared.prior_plan

    def qid(self, branch: Branch) -> str:
        """The question id of a branch (a branch names its ask by position)."""
        return list(self.parsed.request.questions)[branch.ask]


class Evaluated(msgspec.Struct, frozen=True):
    response: SystemOneResponse
    outcome: Outcome

    @property
    def debias_calls(self) -> int:
        return self.outcome.work.debias_calls

    @property
    def prior_hits(self) -> int:
        return self.outcome.work.prior_hits

    @property
    def cached_tokens(self) -> int | None:
        """The branches' cache hits, as the backend reported them (None: it does not)."""
        return self.outcome.work.branch_cached_tokens


class OverSystemOne:
    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def prepare(self, parsed: systemone.Parsed) -> PreparedRequest:
        return PreparedRequest(parsed=parsed, prepared=self.evaluator.prepare(parsed.decision))

    async def evaluate(self, request: PreparedRequest) -> Evaluated:
        outcome = await self.evaluator.evaluate(request.prepared)
        return Evaluated(response=systemone.respond(request.parsed, outcome, "m"), outcome=outcome)
