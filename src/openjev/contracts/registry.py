"""The contracts this server speaks: adding one is a package exporting a `ContractSpec` and a line here.

The first is the server's own voice: routes that belong to no contract (the catalog, the limits,
an unknown path) answer errors in its shape.
"""

from __future__ import annotations

from typing import Any

from openjev.contracts import decisions, systemone
from openjev.contracts.spec import ContractSpec

CONTRACTS: tuple[ContractSpec[Any], ...] = (systemone.SPEC, decisions.SPEC)
