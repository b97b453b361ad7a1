"""What the HTTP layer admits (body size, requests at once), and every limit in force as GET /v1/limits reports it."""

from __future__ import annotations

import msgspec

from openjev.domain import limits


class AdmissionLimits(msgspec.Struct, frozen=True, kw_only=True):
    """Per API process: the largest body read (inflated bytes too) and the evaluations admitted at once."""

    max_body_bytes: int = 2 * 1024 * 1024
    max_concurrent_requests: int = 16


_DECISION, _ADMISSION = limits.Limits(), AdmissionLimits()


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Every limit in force, in the order GET /v1/limits has always listed them (the document's `Limits`)."""

    max_questions: int = _DECISION.max_questions
    min_options: int = _DECISION.min_options
    max_options: int = _DECISION.max_options
    max_body_bytes: int = _ADMISSION.max_body_bytes
    max_input_tokens: int = _DECISION.max_input_tokens
    max_total_input_tokens: int = _DECISION.max_total_input_tokens
    max_concurrent_requests: int = _ADMISSION.max_concurrent_requests
    max_concurrent_branches: int = _DECISION.max_concurrent_branches
    request_timeout_seconds: float = _DECISION.request_timeout_seconds
    max_examples: int = _DECISION.max_examples

    @classmethod
    def of(cls, decision: limits.Limits, admission: AdmissionLimits) -> Limits:
        return cls(**msgspec.structs.asdict(decision), **msgspec.structs.asdict(admission))
