"""The API's life: starting (backend loading, labels being verified), ready, or failed; and its health.

`ServiceLifecycle` starts the evaluator through `openjev.bootstrap` in the background, so the app
answers at once (/health says 503 until the evaluator is ready), and closes the backend on shutdown.
Handlers reach it through the typed application state, `AppState.service`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from enum import StrEnum
from typing import Any

from litestar.datastructures import State

from openjev.bootstrap import limits_from, start_evaluator
from openjev.contracts.spec import ContractSpec
from openjev.domain.errors import NotReady, StartupError
from openjev.domain.ports import BackendHealth
from openjev.evaluation import Evaluator
from openjev.http.admission import Admission
from openjev.http.errors import public_text
from openjev.http.limits import AdmissionLimits
from openjev.http.metrics import Metrics
from openjev.http.schemas import HealthReport
from openjev.logs import get_logger
from openjev.runtime import Runtime
from openjev.settings import Settings

log = get_logger("openjev.startup")
STARTUP_FAILURE_EXIT_CODE = 3
HEALTH_TIMEOUT_SECONDS = 5


class Phase(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"


def backend_state(phase: Phase, backend: BackendHealth) -> str:
    if phase is Phase.STARTING:
        return "starting"
    if phase is Phase.FAILED or not backend.ok:
        return "down"
    return "slow" if backend.slow else "ok"


class ServiceLifecycle:
    def __init__(
        self,
        settings: Settings,
        runtime: Runtime,
        *,
        exit_on_failure: bool = False,
        metrics: Metrics | None = None,
        freeze_heap: bool = False,
    ) -> None:
        self.settings = settings
        self.runtime = runtime
        self.limits = limits_from(settings)
        self.admission_limits = AdmissionLimits(
            max_body_bytes=settings.max_body_bytes, max_concurrent_requests=settings.max_concurrent_requests
        )
        self.admission = Admission(self.admission_limits.max_concurrent_requests)
        self.metrics = metrics if metrics is not None else Metrics(backend=runtime.kind)
        self.metrics.evaluations_running.set_function(lambda: self.admission.active)
        self.model_aliases = settings.aliases()
        self.accepted_models = runtime.model_names | frozenset(self.model_aliases)
        self.phase = Phase.STARTING
        self.detail = "loading the backend"
        self.evaluator: Evaluator | None = None
        self.startup_seconds: float | None = None
        self._created = time.monotonic()
        self.created_at = time.time()
        self._exit_on_failure = exit_on_failure
        self._freeze_heap = freeze_heap
        self._task: asyncio.Task[None] | None = None

    def begin(self) -> None:
        self._task = asyncio.create_task(self._start(), name="openjev-startup")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        await self.runtime.backend.close()

    def require_ready(self) -> Evaluator:
        if self.evaluator is None:
            raise NotReady(f"the server is {self.phase.value}: {self.public_detail}")
        return self.evaluator

    @property
    def public_detail(self) -> str:
        """What clients are told about start-up: a failure's text (URLs, backend output) stays in the log."""
        if self.phase is Phase.FAILED:
            return "start-up failed; the server log has the reason"
        return public_text(self.detail)

    async def health(self) -> HealthReport:
        backend = BackendHealth(ok=False, detail=self.public_detail)
        if self.phase is Phase.READY:
            try:
                backend = await asyncio.wait_for(self.runtime.backend.health(), HEALTH_TIMEOUT_SECONDS)
            except Exception as exc:  # noqa: BLE001 - any failure of the probe means "unhealthy"
                log.warning("health_check_failed", error=repr(exc))
                backend = BackendHealth(ok=False, detail="the health check failed; the server log has the details")
            if not backend.ok:
                backend = BackendHealth(ok=False, slow=backend.slow, detail=public_text(backend.detail))
            elif self.evaluator is not None and self.evaluator.model_prompt is not None:  # a decision model
                detail = f"{backend.detail}; prompts: {self.evaluator.prompt_format}"
                backend = BackendHealth(ok=True, slow=backend.slow, detail=detail)
        status = self.phase.value if self.phase is not Phase.READY or backend.ok else "backend_unavailable"
        state = backend_state(self.phase, backend)
        self.metrics.health(state, self.startup_seconds)
        return HealthReport(
            status=status,
            model=self.runtime.public_model,
            backend=self.runtime.kind,
            backend_ok=backend.ok,
            backend_detail=backend.detail,
            startup_seconds=self.startup_seconds,
            uptime_seconds=time.monotonic() - self._created,
            backend_state=state,
        )

    async def _start(self) -> None:
        started = time.monotonic()
        runtime = self.runtime
        log.info("backend_starting", backend=runtime.kind, model=runtime.public_model)
        try:
            evaluator = await start_evaluator(self.settings, runtime, limits=self.limits, on_step=self._step)
        except Exception as exc:
            self.phase = Phase.FAILED
            self.detail = str(exc)
            log.error("startup_failed", backend=runtime.kind, error=str(exc), error_type=type(exc).__name__)
            if self._exit_on_failure:
                # The platform must see a failed start and replace the process, not a server stuck at 503.
                os._exit(STARTUP_FAILURE_EXIT_CODE)
            if not isinstance(exc, StartupError):
                raise
            return
        if self._freeze_heap:
            freeze_startup_heap()
        self.evaluator = evaluator
        self.startup_seconds = time.monotonic() - started
        self.phase = Phase.READY
        self.detail = "serving"
        log.info(
            "ready",
            backend=runtime.kind,
            model=runtime.public_model,
            labels=evaluator.labels.capacity,
            prompt=evaluator.prompt_format,
            debias=evaluator.debias,
            temperature=evaluator.config.temperature,
            branch_token_limit=evaluator.branch_limit,
            startup_seconds=round(self.startup_seconds, 3),
        )

    def _step(self, detail: str) -> None:
        self.detail = detail


def freeze_startup_heap() -> None:
    """Keep what start-up built (tokenizer, templates, routes) out of every later garbage collection.

    A full collection walks every tracked object; after start-up most of them live as long as the
    process, and walking them again and again was about a tenth of the CPU time per request.
    """
    gc.collect()
    gc.freeze()


class AppState(State):
    """The application state, typed: handlers declare `state: AppState`."""

    service: ServiceLifecycle
    contracts: tuple[ContractSpec[Any], ...]  # the served contracts, one decision route each
    guarded_paths: dict[str, type]  # the paths behind the bearer key, with their error body's type (for OpenAPI)
