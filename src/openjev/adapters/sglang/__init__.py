"""The SGLang backend: an HTTP client for SGLang's native API, its command line, and its launcher."""

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.build import build_runtime

__all__ = ["SGLangBackend", "build_runtime"]
