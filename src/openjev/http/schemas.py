"""The response bodies of the small routes (/v1/models, /v1/limits, /health, /health/live).

The decision requests and responses live in their contracts (`openjev.contracts`).
"""

from __future__ import annotations

import msgspec

from openjev.http.limits import Limits

UNKNOWN_RELEASE_DATE = "unknown"


class ModelCard(msgspec.Struct):
    name: str
    description: str
    release_date: str  # YYYY-MM-DD, or "unknown" (the official SDK requires a string)


class OpenAIModel(msgspec.Struct):
    id: str
    object: str
    created: int
    owned_by: str


class ModelList(msgspec.Struct):
    """The catalog in both shapes: TypeSafe's `models` and OpenAI's `object`/`data`."""

    models: list[ModelCard]
    object: str
    data: list[OpenAIModel]


class ContractLimits(msgspec.Struct):
    """How one decision route names the limits: which fields the question and option counts apply to."""

    route: str
    questions: str
    options: list[str]


class LimitsReport(msgspec.Struct):
    limits: Limits
    branch_token_limit: int | None
    scope: str
    # Added after the fields above: the same limits hold on both decision routes, under these names.
    contracts: dict[str, ContractLimits] = msgspec.field(default_factory=dict)


class HealthReport(msgspec.Struct):
    status: str
    model: str
    backend: str
    backend_ok: bool
    backend_detail: str
    startup_seconds: float | None
    uptime_seconds: float
    # Added after the fields above (kept as they were): "starting", "ok", "slow" (answers, late:
    # still serving, still 200) or "down".
    backend_state: str = "ok"


class Liveness(msgspec.Struct):
    status: str
