"""Admission limits in force, derived from settings (docs/spec.md#limits-and-errors) and exposed by GET /v1/limits."""

from __future__ import annotations

import msgspec


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_questions: int = 64
    min_options: int = 2
    max_options: int = 64
    max_body_bytes: int = 2 * 1024 * 1024
    max_input_tokens: int = 32_768  # per branch, including the one output token
    max_total_input_tokens: int = 262_144  # prefix + every suffix of one request
    max_concurrent_requests: int = 16
    max_concurrent_branches: int = 64
    request_timeout_seconds: float = 120.0
