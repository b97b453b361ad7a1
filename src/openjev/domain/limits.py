"""The limits a decision is checked against (counts, tokens) and run under (backend calls, deadline).

Derived from the settings (docs/spec.md#limits-and-errors). What the HTTP layer admits (body
size, requests at once) is `openjev.http.limits`; GET /v1/limits reports both.
"""

from __future__ import annotations

import msgspec


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    max_questions: int = 64
    min_options: int = 2
    max_options: int = 64
    max_input_tokens: int = 32_768  # per branch, including the one output token
    max_total_input_tokens: int = 262_144  # prefix + every suffix of one request
    max_concurrent_branches: int = 64
    request_timeout_seconds: float = 120.0
    max_examples: int = 32  # worked examples per question
