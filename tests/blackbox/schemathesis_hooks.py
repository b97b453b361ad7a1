"""Schemathesis hooks for the conformance run (`SCHEMATHESIS_HOOKS=tests.blackbox.schemathesis_hooks`).

A Decisions request can be schema-valid and still break a rule JSON Schema cannot state: a tool
output must name an earlier call's `call_id`, a call id and a choice value must be unique, an
`input_json` part has depth and size bounds. Schemathesis generates such requests by chance and
reports their 400 as "schema-valid request rejected". This hook drops exactly those reports, after
checking with openjev's own parser that every rule the request breaks is one of them; any other
rejection, on any route, stays a failure.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

from openjev.contracts import decisions
from openjev.domain.errors import InvalidRequest, UnknownModel
from openjev.domain.limits import Limits

BEYOND_JSON_SCHEMA = frozenset(
    {
        "unknown_call_id",
        "duplicate_call_id",
        "duplicate_call_output",
        "duplicate_choice",
        "json_too_deep",
        "json_too_large",
    }
)


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    if type(failure).__name__ != "RejectedPositiveData" or case.operation.path != "/v1/decisions":
        return True
    try:
        decisions.parse(json.dumps(case.body).encode(), Limits(), frozenset())
    except InvalidRequest as exc:
        return not all(issue.type in BEYOND_JSON_SCHEMA for issue in exc.issues)
    except UnknownModel:
        return True
    return True
