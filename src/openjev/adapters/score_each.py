"""`score_many` for backends whose wire has no batch: every call concurrently, as separate calls.

The embedded engine and the fake backend use it: each call still goes through the adapter's own
`score` (its slot routing, its checks), so a batch behaves exactly like the calls run one by one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from openjev.domain.errors import first_error
from openjev.domain.ports import LabelScores, ScoreCall

Score = Callable[[str, Sequence[int], Sequence[int]], Coroutine[Any, Any, LabelScores]]


async def score_each(score: Score, calls: Sequence[ScoreCall]) -> list[LabelScores]:
    """Results in the order of `calls`; the first failure cancels the others and is raised as it is."""
    if not calls:
        return []
    if len(calls) == 1:
        call = calls[0]
        return [await score(call.call_id, call.token_ids, call.label_ids)]
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(score(c.call_id, c.token_ids, c.label_ids)) for c in calls]
    except BaseExceptionGroup as failed:
        raise first_error(failed) from None
    return [task.result() for task in tasks]
