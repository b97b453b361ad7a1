"""TypeSafe's System One API (`POST /v1/systemone`): its wire types, parsing, responses and errors."""

from openjev.contracts.spec import ContractSpec, ErrorWire, LimitNames
from openjev.contracts.systemone import errors, openapi
from openjev.contracts.systemone.parsing import Parsed, parse
from openjev.contracts.systemone.response import respond
from openjev.contracts.systemone.wire import SystemOneRequest, SystemOneResponse

SPEC: ContractSpec[Parsed] = ContractSpec(
    name="systemone",
    path="/v1/systemone",
    request_type=SystemOneRequest,
    response_type=SystemOneResponse,
    parse=parse,
    respond=respond,
    errors=ErrorWire(errors.status_of, errors.error_body, errors.plain_body),
    openapi=openapi.OPERATION,
    limit_names=LimitNames(questions="questions", options=("criteria",)),
    request_id_header="x-typesafe-request-id",
    request_id_description="A fresh id.",
)

__all__ = ["SPEC", "Parsed", "parse", "respond"]
