"""Runtime for the embedded backend: llama.cpp in process, codec and name from the GGUF itself."""

from __future__ import annotations

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.llama_engine import Engine, EngineConfig, LlamaEngine
from openjev.adapters.embedded.model import describe_model, resolve_model_path
from openjev.adapters.embedded.packaged_models import verify
from openjev.domain.ports import PromptCodec
from openjev.runtime import Runtime
from openjev.settings import Settings


def build_runtime(settings: Settings) -> Runtime:
    """Locate the GGUF and read its name (milliseconds); loading happens in `backend.start()`.

    A packaged model is assembled in the cache the first time (seconds, once) and its sha256 is
    checked in `backend.start()`, before llama.cpp reads it. Raises StartupError when OPENJEV_MODEL
    is not a readable GGUF file or a packaged model is missing.
    """
    path, packaged = resolve_model_path(
        settings.model, settings.embedded.resolved_cache_dir(), revision=settings.revision
    )
    info = describe_model(path, settings.served_model_name or (packaged.public_name if packaged else None))

    def load_engine(config: EngineConfig) -> Engine:
        if packaged is not None:
            verify(packaged, path)
        return LlamaEngine.load(config)

    backend = EmbeddedBackend(
        EngineConfig.create(
            path,
            threads=settings.embedded.threads,
            parallel_slots=settings.embedded.parallel_slots,
            slot_context=settings.embedded.slot_context,
            verbose=settings.log_level == "debug",
            deterministic=settings.deterministic is not False,
        ),
        load_engine=load_engine,
    )

    def load_codec() -> PromptCodec:
        codec = GGUFCodec.from_gguf(path)
        if backend.started:  # prove the rebuilt tokenizer matches llama.cpp's before serving
            backend.check_codec(codec)
        return codec

    real_name = packaged.public_name if packaged else describe_model(path).public_name
    return Runtime(
        kind="embedded",
        backend=backend,
        load_codec=load_codec,
        public_model=info.public_name,
        model_description=info.description,
        accepted_models=frozenset({info.public_name, real_name, info.file_stem, info.short_stem}),
        default_debias=packaged.debias if packaged else None,
    )
