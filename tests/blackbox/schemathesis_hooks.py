"""Schemathesis hooks for the conformance run (`SCHEMATHESIS_HOOKS=tests.blackbox.schemathesis_hooks`).

A request can be schema-valid and still break a rule JSON Schema cannot state: a Decisions tool
output must name an earlier call's `call_id`, a call id and a choice value must be unique, an
`input_json` part has depth and size bounds; on both routes a worked example's answer must name
one of its question's options, and a question takes at most `max_examples` of them. Schemathesis
generates such requests by chance and reports their refusal as "schema-valid request rejected".
This hook drops exactly those reports, after checking with openjev's own parser that every rule the
request breaks is one of them; any other rejection stays a failure.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis

from openjev.contracts import decisions, systemone
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
        "invalid_example_answer",
        "too_many_examples",
    }
)
PARSERS = {"/v1/decisions": decisions.parse, "/v1/systemone": systemone.parse}


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    parse = PARSERS.get(case.operation.path)
    if type(failure).__name__ != "RejectedPositiveData" or parse is None:
        return True
    try:
        model = case.body.get("model") if isinstance(case.body, dict) else None
        served = frozenset({model}) if isinstance(model, str) else frozenset()  # the document's enum chose it
        parse(json.dumps(case.body).encode(), Limits(), served)
    except InvalidRequest as exc:
        return not all(issue.type in BEYOND_JSON_SCHEMA for issue in exc.issues)
    except UnknownModel:
        return True
    return True
