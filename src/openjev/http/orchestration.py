"""The one path every decision route takes: read, parse, admit, prepare, evaluate, watch the client, count.

A route hands `decide` its contract's parser and gets back the parsed request and the outcome;
everything in between is the same for every contract:

- the body is read under the size limit (inflated bytes too) and its time limits;
- the contract parses and checks it (refused before anything else: a bad request never waits for a
  backend, never gets a 5xx);
- the server must be ready, and an admission slot free (else 503 or the contract's overload status);
- preparation (rendering, tokenizing) runs in a worker thread for large bodies, so other requests
  keep flowing; it is admitted too, so a burst of large requests is refused, not queued;
- the evaluation is cancelled, and its branches aborted, if the client goes away;
- its phases, sizes and tokens go to the metrics under the contract's name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import msgspec
from litestar import Request
from litestar.datastructures import State
from litestar.types import Receive

from openjev.contracts.spec import P
from openjev.domain.errors import echo
from openjev.domain.outcome import Outcome
from openjev.http.body import read_body
from openjev.http.errors import ClientGone, UnsupportedMediaType
from openjev.http.lifecycle import ServiceLifecycle

LARGE_BODY_BYTES = 64 * 1024  # above this, tokenizing goes to a thread so other requests keep flowing


class Decided(msgspec.Struct, frozen=True):
    outcome: Outcome
    prepare_seconds: float  # from the end of the body to the end of preparation (parse, render, tokenize)

    def headers(self) -> dict[str, str]:
        """The prefix, cache and timing headers every decision route sends."""
        work, t = self.outcome.work, self.outcome.timings
        headers = {
            "x-openjev-prefix-tokens": str(work.prefix_tokens),
            "Server-Timing": (
                f'prepare;dur={self.prepare_seconds * 1000:.3f};desc="prompt preparation", '
                f'prefill;dur={t.prefill * 1000:.3f};desc="shared prefill", '
                f'branches;dur={t.branches * 1000:.3f};desc="branch inference"'
            ),
        }
        if work.branch_cached_tokens is not None:
            headers["x-openjev-cached-tokens"] = str(work.branch_cached_tokens)
        return headers


async def decide(
    request: Request[None, None, State],
    service: ServiceLifecycle,
    parse: Callable[[bytes], P],
    *,
    contract: str,
) -> tuple[P, Decided]:
    require_json(request.headers.get("content-type"))
    body = await read_body(
        request.receive,
        request.headers.get("content-encoding"),
        request.headers.get("content-length"),
        service.admission_limits.max_body_bytes,
        within=service.settings.body_timeout,
        min_rate=service.settings.body_min_rate,
    )
    started = time.perf_counter()
    parsed = parse(body)
    evaluator = service.require_ready()
    with service.admission.slot():
        if len(body) > LARGE_BODY_BYTES:
            prepared = await asyncio.to_thread(evaluator.prepare, parsed.decision)
        else:
            prepared = evaluator.prepare(parsed.decision)
        prepare_seconds = time.perf_counter() - started
        outcome = await _unless_disconnected(request.receive, evaluator.evaluate(prepared))
    decided = Decided(outcome=outcome, prepare_seconds=prepare_seconds)
    service.metrics.evaluation(outcome, prepare_seconds, contract=contract)
    return parsed, decided


def require_json(content_type: str | None) -> None:
    """Only JSON bodies: a web page cannot send one without a CORS preflight (no "simple" request)."""
    media_type = (content_type or "").partition(";")[0].strip().lower()
    if media_type != "application/json" and not (
        media_type.startswith("application/") and media_type.endswith("+json")
    ):
        raise UnsupportedMediaType(
            f"the request body must be JSON: send the header `Content-Type: application/json` "
            f"(got {echo(content_type) if content_type else 'no Content-Type'})"
        )


async def _unless_disconnected(receive: Receive, work: Awaitable[Outcome]) -> Outcome:
    """Await the evaluation, cancelling it (and so aborting its branches) if the client goes away.

    The evaluation runs in this task and a watcher task waits for the disconnect: a second task
    and `asyncio.wait` per request cost more than the watcher alone. A cancellation that does
    not come from the watcher (shutdown) goes through as it is.
    """
    current = asyncio.current_task()
    assert current is not None
    left = done = False

    def client_left(watcher: asyncio.Future[None]) -> None:
        nonlocal left
        if not done and not watcher.cancelled():  # `done`: this may run after the evaluation ended
            left = True
            current.cancel()

    watcher = asyncio.ensure_future(_disconnect(receive))
    watcher.add_done_callback(client_left)
    try:
        return await work  # a cancellation aborts the branches before it leaves `evaluate`
    except asyncio.CancelledError:
        if left and current.uncancel() == 0:
            raise ClientGone("the client disconnected; the evaluation was cancelled") from None
        raise
    finally:
        done = True
        watcher.cancel()


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
