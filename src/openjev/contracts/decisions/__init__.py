"""OpenAI's Decisions API (`POST /v1/decisions`): its wire types, parsing, responses and errors."""

from openjev.contracts.decisions.parsing import Parsed, parse
from openjev.contracts.decisions.response import respond

__all__ = ["Parsed", "parse", "respond"]
