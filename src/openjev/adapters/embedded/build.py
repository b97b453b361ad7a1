"""Runtime for the embedded backend: llama.cpp in process, codec and name from the GGUF itself."""

from __future__ import annotations

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import EngineConfig
from openjev.adapters.embedded.model import describe_model, resolve_model_path
from openjev.domain.ports import PromptCodec
from openjev.runtime import Runtime
from openjev.settings import Settings


def build_runtime(settings: Settings) -> Runtime:
    """Locate the GGUF and read its name (milliseconds); loading happens in `backend.start()`.

    Raises StartupError when OPENJEV_MODEL is not a readable GGUF file, or when the default model
    package is missing.
    """
    path = resolve_model_path(settings.model)
    info = describe_model(path, settings.served_model_name)
    backend = EmbeddedBackend(
        EngineConfig.create(
            path,
            threads=settings.threads,
            parallel_slots=settings.parallel_slots,
            slot_context=settings.slot_context,
            verbose=settings.log_level == "debug",
        )
    )

    def load_codec() -> PromptCodec:
        codec = GGUFCodec.from_gguf(path)
        if backend.started:  # prove the rebuilt tokenizer matches llama.cpp's before serving
            backend.check_codec(codec)
        return codec

    real_name = describe_model(path).public_name if settings.served_model_name else info.public_name
    return Runtime(
        kind="embedded",
        backend=backend,
        load_codec=load_codec,
        public_model=info.public_name,
        model_description=info.description,
        accepted_models=frozenset({info.public_name, real_name, info.file_stem, info.short_stem}),
    )
