"""Every error openjev raises has a status on every contract: none becomes a 500 by being forgotten."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

import openjev
from openjev.contracts import status
from openjev.contracts.registry import CONTRACTS
from openjev.contracts.spec import ContractSpec
from openjev.domain.errors import OpenJevError


def every_error_type() -> set[str]:
    """The `error_type` of every `OpenJevError` subclass defined anywhere in openjev."""
    for module in pkgutil.walk_packages(openjev.__path__, "openjev."):
        importlib.import_module(module.name)
    found: set[str] = set()
    pending: list[type[OpenJevError]] = [OpenJevError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls not in (OpenJevError, Probe):
            found.add(cls.error_type)
    return found


def test_every_error_type_has_a_status_or_is_internal() -> None:
    types = every_error_type()
    assert {"overloaded", "authentication_error", "client_closed_request", "template_error"} <= types
    assert types - set(status.STATUS) - status.INTERNAL == set()
    assert not status.INTERNAL & set(status.STATUS)


class Probe(OpenJevError):
    """An error of any type, to ask a contract its status."""

    def __init__(self, error_type: str) -> None:
        super().__init__("probe")
        self.error_type = error_type


@pytest.mark.parametrize("spec", CONTRACTS, ids=lambda spec: spec.name)
def test_each_contract_has_a_status_for_every_error_a_client_can_meet(spec: ContractSpec[Any]) -> None:
    for error_type in every_error_type():
        got = spec.errors.status_of(Probe(error_type))
        if error_type in status.INTERNAL:
            assert got == status.INTERNAL_STATUS, (spec.name, error_type)
        else:
            assert got != status.INTERNAL_STATUS, (spec.name, error_type)


def test_an_override_must_name_a_known_error_type() -> None:
    with pytest.raises(ValueError, match="overloded"):
        status.with_overrides({"overloded": 529})
