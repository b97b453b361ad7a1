"""What a wire contract tells the server about itself: one `ContractSpec` per contract package.

The HTTP layer knows no contract by name: it mounts one route per registered spec (`registry`)
and takes from the spec everything that differs between contracts (the parser and response
builder, the error shapes and statuses, the OpenAPI operation, how the limits are named, the
request-id header its clients read). Nothing here imports the web framework, so a contract stays
a translation between its wire and the core.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from openjev.domain.decision import Decision
from openjev.domain.errors import OpenJevError, Overloaded
from openjev.domain.limits import Limits
from openjev.domain.outcome import Outcome


class Translated(Protocol):
    """What a contract's parser returns: its checked request, holding the decision it asks for."""

    @property
    def decision(self) -> Decision: ...


P = TypeVar("P", bound=Translated)
Schemas = dict[str, Any]
"""The OpenAPI document's `components.schemas`, by component name."""


@dataclass(frozen=True)
class ErrorWire:
    """How one contract writes errors: the status of an openjev error, and the bodies.

    `body(exc, message)` is the body for an openjev error (`message`: what the client may be told);
    `plain(status, error_type, message)` for any other HTTP error (the framework's own 404, 405, …).
    """

    status_of: Callable[[OpenJevError], int]
    body: Callable[[OpenJevError, str], Any]
    plain: Callable[[int, str, str], Any]


@dataclass(frozen=True)
class Example:
    """A request example shown in the OpenAPI document (and editable in the docs pages)."""

    summary: str
    value: Mapping[str, Any]


@dataclass(frozen=True)
class ErrorDoc:
    """One documented error response: what it means, and the type of its body."""

    description: str
    body: type


@dataclass(frozen=True)
class OpenAPIOperation:
    """The decision route's operation in the OpenAPI document.

    `description` becomes the handler's docstring (what the route does); `operation_id` is fixed
    here so that it does not follow the handler's name.
    `components`: the types whose schemas the document gains (the request, and anything it decodes
    itself); `complete(schemas, limits, models)` then states in those schemas what only the
    settings in force know (question and option counts, model names). `error_body`: the body of
    this contract's errors (the 401 of a keyed server is documented with it).
    """

    tag: str
    summary: str
    description: str
    operation_id: str
    examples: Mapping[str, Example]
    errors: Mapping[int, ErrorDoc]
    error_body: type
    components: tuple[type, ...]
    complete: Callable[[Schemas, Limits, Collection[str]], None]


def bound_option_count(schema: dict[str, Any], limits: Limits) -> None:
    """State the option limits in an options field's schema: an object's property count, else an array's length."""
    if schema.get("type") == "object":
        schema.update(minProperties=limits.min_options, maxProperties=limits.max_options)
    else:
        schema.update(minItems=limits.min_options, maxItems=limits.max_options)


@dataclass(frozen=True)
class LimitNames:
    """The request fields the question and option counts of `GET /v1/limits` apply to on this contract."""

    questions: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ContractSpec(Generic[P]):
    """One wire contract: its route, its translation to and from the core, its errors and its documentation.

    `name` is the metrics label value and the key in `GET /v1/limits`; `request_type` the body's
    schema component (the route decodes the body itself, through `parse`); `response_type` what
    `respond` returns. Every response carries the request id under each contract's
    `request_id_header`, the name its clients read.
    """

    name: str
    path: str
    request_type: type
    response_type: type
    parse: Callable[[bytes, Limits, Collection[str]], P]
    respond: Callable[[P, Outcome, str], Any]
    errors: ErrorWire
    openapi: OpenAPIOperation
    limit_names: LimitNames
    request_id_header: str
    request_id_description: str = "The request's id."

    @property
    def overload_status(self) -> int:
        """The status this contract answers when the admission limit is reached."""
        return self.errors.status_of(Overloaded(""))
