"""The embedded backend: a small GGUF chat model on llama.cpp's engine (xllamacpp), in process, on CPU.

`build_runtime(settings)` is the entry point; `GGUFCodec.from_gguf(path)` is the model's prompt
codec and can be reused on its own (e.g. by the fake backend) with any byte-level BPE GGUF.
"""

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.build import build_runtime
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import EngineConfig
from openjev.adapters.embedded.model import describe_model, smollm2_path

__all__ = ["EmbeddedBackend", "EngineConfig", "GGUFCodec", "build_runtime", "describe_model", "smollm2_path"]
