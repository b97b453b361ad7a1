"""TypeSafe's System One API (`POST /v1/systemone`): its wire types, parsing and responses."""

from openjev.contracts.systemone.parsing import Parsed, parse
from openjev.contracts.systemone.response import respond

__all__ = ["Parsed", "parse", "respond"]
