"""openjev's `x_` extension fields, shared by both contracts' wire types."""

from __future__ import annotations

import msgspec


def optional(value: float | None) -> float | msgspec.UnsetType:
    """An optional extension field: left out of the answer when there is nothing to report."""
    return msgspec.UNSET if value is None else value
