"""OpenAI's Decisions API (`POST /v1/decisions`): its wire types, parsing, responses and errors."""

from openjev.contracts.decisions import errors, openapi
from openjev.contracts.decisions.parsing import Parsed, parse
from openjev.contracts.decisions.response import respond
from openjev.contracts.decisions.wire import Decision, DecisionRequest
from openjev.contracts.spec import ContractSpec, ErrorWire, LimitNames

SPEC: ContractSpec[Parsed] = ContractSpec(
    name="decisions",
    path="/v1/decisions",
    request_type=DecisionRequest,
    response_type=Decision,
    parse=parse,
    respond=respond,
    errors=ErrorWire(errors.status_of, errors.error_body, errors.plain_body),
    openapi=openapi.OPERATION,
    limit_names=LimitNames(questions="questions", options=("choices", "levels")),
    request_id_header="x-request-id",
    request_id_description="The same id (OpenAI's name).",
)

__all__ = ["SPEC", "Parsed", "parse", "respond"]
