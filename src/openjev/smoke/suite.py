"""The whole smoke suite, in the order it runs: System One's checks, the Decisions checks, the semantic pairs.

Composed here so that `checks` (System One) and `decisions_checks` (which builds on it) import in
one direction only.
"""

from __future__ import annotations

from openjev.smoke.checks import ALIAS_MODEL, SEMANTIC_CASES, Check, semantic_check, system_one_checks
from openjev.smoke.decisions_checks import decisions_checks


def build_checks(model: str = ALIAS_MODEL, catalog_model: str | None = None) -> list[Check]:
    """The POST checks, in order. `catalog_model`, when the catalog listed one, must be accepted too."""
    return [
        *system_one_checks(model, catalog_model),
        *decisions_checks(model),
        *(semantic_check(case, model) for case in SEMANTIC_CASES),
    ]
