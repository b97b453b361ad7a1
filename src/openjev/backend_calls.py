"""The use case's running half: backend calls under the process-wide limit, and their abort.

Every call holds its place in the `CallLimit` while it runs and keeps its id in the evaluation's
`in_flight` set until it ends normally, so that a failure, the deadline or a cancelled caller can
ask the backend to abort exactly the calls still running (`abort`). The branches of a decision go
in one `score_many` batch, or in batches of at most the limit, concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from openjev.call_limit import CallLimit
from openjev.domain.errors import BackendError
from openjev.domain.ports import CallUsage, LabelScores, ScoreCall, ScoringBackend
from openjev.domain.scoring_math import is_logprob, is_share
from openjev.evaluation_plan import BranchRequest
from openjev.logs import get_logger

log = get_logger("openjev.evaluation")
ABORT_TIMEOUT_SECONDS = 5.0


class BackendCalls:
    """One backend's calls for every evaluation of the process, under one `CallLimit`."""

    def __init__(self, backend: ScoringBackend, limit: CallLimit, new_call_id: Callable[[], str]) -> None:
        self.backend = backend
        self.limit = limit
        self._new_call_id = new_call_id

    async def warm(self, in_flight: set[str], prefix: list[int]) -> CallUsage:
        """Prefill the shared prefix: one call of the limit."""
        async with self.limit.hold(1):
            call_id = self._new_call_id()
            in_flight.add(call_id)
            result = await self.backend.warm(call_id, prefix)
            in_flight.discard(call_id)
            return result

    async def score_all(self, in_flight: set[str], wanted: list[BranchRequest]) -> list[LabelScores]:
        """Every branch in one backend batch, or in batches of at most the call limit (concurrently)."""
        size = self.limit.total
        if len(wanted) <= size:
            return await self._batch(in_flight, wanted)
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(self._batch(in_flight, wanted[i : i + size])) for i in range(0, len(wanted), size)
            ]
        return [score for task in tasks for score in task.result()]

    async def _batch(self, in_flight: set[str], wanted: list[BranchRequest]) -> list[LabelScores]:
        """One `score_many` holding one call of the limit per branch; every id stays in `in_flight` until it returns."""
        if not wanted:
            return []
        async with self.limit.hold(len(wanted)):
            calls = [ScoreCall(self._new_call_id(), w.token_ids, w.label_ids, w.label_mass) for w in wanted]
            ids = [call.call_id for call in calls]
            in_flight.update(ids)
            results = await self.backend.score_many(calls)
            for score in results:
                _check_scores(score)
            if len(results) != len(calls):
                raise BackendError(f"the backend returned {len(results)} scores for {len(calls)} calls")
            in_flight.difference_update(ids)
            return results

    async def abort(self, in_flight: set[str]) -> None:
        """Ask the backend to abort every call still in flight (best effort, never raises)."""
        if not in_flight:
            return
        ids = sorted(in_flight)
        in_flight.clear()
        log.info("branches_aborted", calls=len(ids))
        try:
            await asyncio.wait_for(asyncio.shield(self.backend.abort(ids)), ABORT_TIMEOUT_SECONDS)
        except (TimeoutError, asyncio.CancelledError, Exception):  # noqa: BLE001 - abort is best effort, never masks the cause
            pass


def _check_scores(score: LabelScores) -> None:
    """A backend's numbers are checked before they are used: a broken backend is a 502, never a 500 or a certainty."""
    bad = next((value for value in score.logprobs if not is_logprob(value)), None)
    if bad is not None:
        raise BackendError(f"the backend returned an invalid label log-probability {bad!r} (must be finite and ≤ 0)")
    if score.label_mass is not None and not is_share(score.label_mass):
        raise BackendError(f"the backend returned an invalid label mass {score.label_mass!r} (must be in [0, 1])")
