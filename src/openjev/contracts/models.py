"""Which `model` a request may name: the served model, its configured aliases, or TypeSafe's `jev-latest`.

A wire rule both contracts share (the core never sees a model name): `jev-latest` is the alias
System One clients send by default, accepted on every contract and listed by GET /v1/models.
"""

from __future__ import annotations

from collections.abc import Collection

from openjev.domain.errors import UnknownModel, echo

JEV_ALIAS = "jev-latest"


def check_model(model: str, accepted: Collection[str]) -> None:
    if model != JEV_ALIAS and model not in accepted:
        names = ", ".join(sorted({JEV_ALIAS, *accepted}))
        raise UnknownModel(f"unknown model {echo(model)}: this server serves {names}")
