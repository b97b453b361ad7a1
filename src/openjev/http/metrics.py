"""Prometheus metrics for `GET /metrics` (docs/operations.md lists each one with its meaning).

One `Metrics` object per app, built by the app factory on a registry of its own (never the
library's global one), so two apps in one process, as in the tests, keep separate counts. Labels
take only values from small fixed sets: the route *template* (or `unmatched`), the HTTP status
code, the phase name, the backend state. Never a request id, a path as sent, or a model name.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

import openjev
from openjev.contracts.registry import CONTRACTS
from openjev.contracts.spec import ContractSpec
from openjev.domain.outcome import Outcome, Refusal

# Seconds: from a fake backend's millisecond up to the default 120 s request timeout.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, float("inf"))
COUNT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, float("inf"))
UNMATCHED_ROUTE = "unmatched"  # 404s and anything else that matched no route: one label value for all
BACKEND_STATES = ["starting", "ok", "slow", "down"]
STARTED_AT_KEY = "openjev_started"
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """Every openjev metric, registered on `registry`.

    `contracts`: the served contracts; their names are the `contract` label's values, their
    overload statuses what `openjev_overloaded_responses` counts.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        backend: str = "unknown",
        contracts: Sequence[ContractSpec[Any]] = CONTRACTS,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        Info("openjev", "The openjev build and the backend kind.", registry=r).info(
            {"version": openjev.__version__, "backend": backend}
        )
        self.requests = Counter(
            "openjev_http_requests",
            "HTTP responses by route template and status code.",
            ["route", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "openjev_http_request_duration_seconds",
            "Seconds from the request's arrival to the start of its response, by route template.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge("openjev_http_requests_in_flight", "HTTP requests being handled now.", registry=r)
        self.evaluations_running = Gauge(
            "openjev_evaluations_running",
            "Evaluations holding an admission slot now (OPENJEV_MAX_CONCURRENT_REQUESTS is the limit).",
            registry=r,
        )
        self.phase_seconds = Histogram(
            "openjev_evaluation_phase_seconds",
            "Seconds per phase of a successful evaluation: prepare (parse, render, tokenize), "
            "prefill (the shared prefix), branches (the question calls).",
            ["phase"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.questions = Histogram(
            "openjev_request_questions", "Questions per answered request.", buckets=COUNT_BUCKETS, registry=r
        )
        self.backend_calls = Histogram(
            "openjev_request_backend_calls",
            "Backend calls per answered request (warm-up + branches + debiasing calls).",
            buckets=COUNT_BUCKETS,
            registry=r,
        )
        self.input_tokens = Counter(
            "openjev_input_tokens", "Prompt tokens of every backend call (usage.input_tokens summed).", registry=r
        )
        self.prefix_tokens = Counter(
            "openjev_prefix_tokens", "Tokens of the shared prefixes (one per answered request).", registry=r
        )
        self.cached_tokens = Counter(
            "openjev_cached_tokens",
            "Branch tokens the backend served from its prefix cache (only when the backend reports them).",
            registry=r,
        )
        self.reported_input_tokens = Counter(
            "openjev_cache_reported_input_tokens",
            "Input tokens of the requests whose backend reported cached tokens: the denominator of the hit ratio.",
            registry=r,
        )
        self.overloaded = Counter(
            "openjev_overloaded_responses",
            "Requests refused because the admission limit was reached (529 on System One, 429 on Decisions).",
            registry=r,
        )
        self.timeouts = Counter(
            "openjev_timeout_responses", "Requests answered 504 (the backend missed the request timeout).", registry=r
        )
        self.debias_calls = Counter(
            "openjev_debias_extra_calls",
            "Backend calls made for bias removal: extra option orders and answer priors not in the cache.",
            registry=r,
        )
        self.prior_hits = Counter(
            "openjev_prior_cache_hits",
            "Answer priors served from the prior cache instead of a backend call.",
            registry=r,
        )
        self.answered = Counter(
            "openjev_answered_requests",
            "Decision requests answered, by contract (systemone, decisions).",
            ["contract"],
            registry=r,
        )
        self.refusals = Counter(
            "openjev_refusals",
            "Questions refused under the refusal policy (OPENJEV_REFUSE_BELOW_LABEL_MASS), by contract.",
            ["contract"],
            registry=r,
        )
        self.backend_state = Enum(
            "openjev_backend_state", "The backend's state at the last scrape.", states=BACKEND_STATES, registry=r
        )
        self.backend_up = Gauge(
            "openjev_backend_up", "1 when the backend answers its health check, else 0.", registry=r
        )
        self.startup_seconds = Gauge(
            "openjev_startup_seconds",
            "Seconds the start-up took (backend, labels, template); 0 until ready.",
            registry=r,
        )
        # Labelled children looked up once, not on every request (`labels()` validates and locks).
        self._phases = {phase: self.phase_seconds.labels(phase=phase) for phase in ("prepare", "prefill", "branches")}
        self._by_route: dict[tuple[str, int], tuple[Any, Any]] = {}  # route templates x status codes: small sets
        self._overload_statuses = frozenset(spec.overload_status for spec in contracts)
        self._by_contract = {
            spec.name: (self.answered.labels(contract=spec.name), self.refusals.labels(contract=spec.name))
            for spec in contracts
        }

    # Recording -------------------------------------------------------------------------------

    def request_started(self, scope: Any) -> None:
        scope.setdefault("state", {})[STARTED_AT_KEY] = time.perf_counter()
        self.in_flight.inc()

    def request_finished(self) -> None:
        self.in_flight.dec()

    def response_started(self, scope: Any, status: int) -> None:
        """Called once per response, routed or not (from the app's `before_send` hook)."""
        route = scope.get("path_template") if scope.get("route_handler") is not None else None
        route = route or UNMATCHED_ROUTE
        children = self._by_route.get((route, status))
        if children is None:
            children = (self.requests.labels(route=route, status=str(status)), self.request_seconds.labels(route=route))
            self._by_route[(route, status)] = children
        responses, seconds = children
        responses.inc()
        started = scope.get("state", {}).get(STARTED_AT_KEY)
        if started is not None:
            seconds.observe(time.perf_counter() - started)
        if status in self._overload_statuses:
            self.overloaded.inc()
        elif status == 504:
            self.timeouts.inc()

    def evaluation(self, outcome: Outcome, prepare_seconds: float, *, contract: str) -> None:
        """One answered decision request: its phases, sizes, tokens, debiasing work and refusals."""
        self._phases["prepare"].observe(prepare_seconds)
        self._phases["prefill"].observe(outcome.timings.prefill)
        self._phases["branches"].observe(outcome.timings.branches)
        work = outcome.work
        self.questions.observe(len(outcome.results))
        self.backend_calls.observe(work.calls)  # warm-up + branches (+ debiasing)
        self.input_tokens.inc(work.input_tokens)
        self.prefix_tokens.inc(work.prefix_tokens)
        if work.branch_cached_tokens is not None:
            self.cached_tokens.inc(work.branch_cached_tokens)
            self.reported_input_tokens.inc(work.input_tokens)
        self.debias_calls.inc(work.debias_calls)
        self.prior_hits.inc(work.prior_hits)
        answered, refusals = self._by_contract[contract]
        answered.inc()
        refusals.inc(sum(isinstance(r, Refusal) for r in outcome.results))

    def health(self, state: str, startup_seconds: float | None) -> None:
        self.backend_state.state(state if state in BACKEND_STATES else "down")
        self.backend_up.set(1 if state in ("ok", "slow") else 0)
        self.startup_seconds.set(startup_seconds or 0.0)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
