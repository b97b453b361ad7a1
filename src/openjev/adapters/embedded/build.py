"""Runtime for the embedded backend: OpenVINO or llama.cpp in process, codec and name from the GGUF itself.

The engine (`OPENJEV_ENGINE`): `auto` takes OpenVINO when it is installed and the model is a Qwen2
(the packaged Qwen models, measured against llama.cpp), llama.cpp otherwise (SmolLM2 and any other
GGUF); `openvino` also takes the other architectures OpenVINO reads. Both engines load the same
verified GGUF and answer the same prompts (docs/performance.md).

A decision GGUF (docs/models.md#decision-ggufs) is prompted with its own `systemone` template and
read by its type's rules (`decision_prompt`); `auto` runs it on llama.cpp, whose /v1/systemone
those rules come from. A type openjev cannot serve is refused here, before anything loads.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import msgspec

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.built import sha256_of
from openjev.adapters.embedded.decision_prompt import SystemOnePrompt, read_decision, special_texts
from openjev.adapters.embedded.gguf_codec import GGUFCodec
from openjev.adapters.embedded.gguf_file import read_gguf_metadata
from openjev.adapters.embedded.llama_engine import Engine, EngineConfig, LlamaEngine, available_cpus
from openjev.adapters.embedded.merged import describe_merged, served_file, served_path
from openjev.adapters.embedded.model import ModelInfo, describe_model, resolve_model_path
from openjev.adapters.embedded.packaged_models import DEFAULT_MODEL, PACKAGED_MODELS, PackagedModel
from openjev.adapters.embedded.tuned import AdapterFolder, read_folder
from openjev.domain.errors import StartupError
from openjev.domain.own_prompt import ModelPrompt
from openjev.domain.ports import PromptCodec, ScoringBackend
from openjev.runtime import Runtime
from openjev.settings import Settings


def build_runtime(settings: Settings) -> Runtime:
    """Locate the GGUF and read its name (milliseconds); loading happens in `backend.start()`.

    A packaged model is assembled in the cache the first time (seconds, once) and its sha256 is
    checked in `backend.start()`, before llama.cpp reads it. Raises StartupError when OPENJEV_MODEL
    is not a readable GGUF file or a packaged model is missing. A tuned adapter (OPENJEV_ADAPTER) is
    read and checked against its manifest here, and merged in `backend.start()`.
    """
    path, packaged = resolve_model_path(
        settings.model, settings.embedded.resolved_cache_dir(), revision=settings.revision
    )
    tuned = _tuned(settings, packaged)
    info = describe_model(path, settings.served_model_name or (packaged.public_name if packaged else None))
    if packaged is not None and packaged.adapter is not None:
        info = describe_merged(info, packaged)
    base_names = {info.public_name, info.file_stem, info.short_stem}
    if tuned is not None:
        info = _describe_tuned(info, tuned, settings.served_model_name)
    decision = read_decision(read_gguf_metadata(path, arrays=False), str(path))  # refuses what cannot be served
    engine = "llama.cpp" if decision is not None and settings.embedded.engine == "auto" else None
    engine = engine or choose_engine(settings.embedded.engine, info.architecture)
    build = _openvino_backend if engine == "openvino" else _llama_backend
    backend = build(settings, path, packaged, tuned)

    def load_codec() -> PromptCodec:  # from the file the engine loaded, checked by then
        codec = GGUFCodec.from_gguf(served_path(packaged, path, settings.embedded.resolved_cache_dir(), tuned))
        if isinstance(backend, EmbeddedBackend) and backend.started:  # prove it tokenizes as llama.cpp does
            backend.check_codec(codec)
        return codec

    def load_model_prompt(codec: PromptCodec) -> ModelPrompt:  # a decision GGUF's own prompt, on its codec
        assert decision is not None
        served = served_path(packaged, path, settings.embedded.resolved_cache_dir(), tuned)
        return SystemOnePrompt(codec, decision, special_texts(read_gguf_metadata(served)))

    real_name = packaged.public_name if packaged else describe_model(path).public_name
    return Runtime(
        kind="embedded",
        backend=backend,
        load_codec=load_codec,
        public_model=info.public_name,
        model_description=info.description.replace(
            "the embedded llama.cpp engine", "the embedded OpenVINO engine (weights as Q8_0)"
        )
        if engine == "openvino"
        else info.description,
        accepted_models=frozenset({info.public_name, real_name, *base_names}),
        # A decision model answers as llama.cpp's /v1/systemone does unless bias removal is asked for.
        default_debias=packaged.debias if packaged else ("none" if decision is not None else None),
        default_temperature=packaged.temperature if packaged else None,
        load_model_prompt=load_model_prompt if decision is not None else None,
    )


def _tuned(settings: Settings, packaged: PackagedModel | None) -> AdapterFolder | None:
    """OPENJEV_ADAPTER's folder, read and checked; refused at once when it names another packaged model
    (a model given by path is checked by its sha256 when the backend starts)."""
    if settings.adapter is None:
        return None
    tuned = read_folder(Path(settings.adapter).expanduser())
    trained_on = tuned.manifest.base_model
    served = packaged.name if packaged is not None else settings.model or DEFAULT_MODEL.name
    if trained_on in PACKAGED_MODELS and trained_on != served:
        raise StartupError(
            f"the adapter in {tuned.folder} was trained on {trained_on}, and the model served is {served}: "
            f"set OPENJEV_MODEL={trained_on}, or train the adapter again on {served}"
        )
    return tuned


def _describe_tuned(info: ModelInfo, tuned: AdapterFolder, served_model_name: str | None) -> ModelInfo:
    """The adapted model's id, `<base>+<adapter name>` (OPENJEV_SERVED_MODEL_NAME still wins), and what it is."""
    manifest = tuned.manifest
    after = f"{manifest.after.accuracy:.0%} right on its {manifest.after.items} evaluation items, against "
    after += f"{manifest.before.accuracy:.0%} before"
    return msgspec.structs.replace(
        info,
        public_name=served_model_name or f"{info.public_name}+{manifest.name}",
        description=f"{info.description} With the adapter `{manifest.name}` trained by openjev tune ({after}).",
    )


OPENVINO_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3"})  # what OpenVINO GenAI's GGUF reader builds
AUTO_OPENVINO = frozenset({"qwen2"})  # measured against llama.cpp (docs/performance.md): the packaged Qwen models


def choose_engine(setting: str, architecture: str) -> str:
    """`openvino` or `llama.cpp` for OPENJEV_ENGINE and the GGUF's architecture."""
    if setting == "llama.cpp":
        return setting
    installed = all(importlib.util.find_spec(name) is not None for name in ("openvino", "openvino_genai"))
    if setting == "openvino":
        if not installed:
            raise StartupError("OPENJEV_ENGINE=openvino needs `openvino` and `openvino-genai`: run `uv sync`")
        if architecture not in OPENVINO_ARCHITECTURES:
            raise StartupError(
                f"OpenVINO cannot read a `{architecture}` GGUF (it reads {', '.join(sorted(OPENVINO_ARCHITECTURES))}): "
                "use OPENJEV_ENGINE=llama.cpp or auto"
            )
        return setting
    return "openvino" if installed and architecture in AUTO_OPENVINO else "llama.cpp"


def _openvino_backend(
    settings: Settings, path: Path, packaged: PackagedModel | None, tuned: AdapterFolder | None
) -> ScoringBackend:
    from openjev.adapters.openvino.backend import OpenVINOBackend
    from openjev.adapters.openvino.convert import ensure_model
    from openjev.adapters.openvino.engine import EngineConfig as OpenVINOConfig
    from openjev.adapters.openvino.engine import OpenVINOEngine

    cache_dir = settings.embedded.resolved_cache_dir()
    threads = settings.embedded.threads or available_cpus()
    context = settings.embedded.slot_context

    def load_engine() -> OpenVINOEngine:
        source, source_sha256 = served_file(packaged, path, cache_dir, tuned, workers=threads)
        model_xml = ensure_model(source, source_sha256 or sha256_of(source), cache_dir, workers=threads)
        config = OpenVINOConfig(
            model_xml=model_xml,
            threads=threads,
            context=context,
            int8_activations=settings.embedded.int8_activations,
        )
        return OpenVINOEngine.load(config)

    served = served_path(packaged, path, cache_dir, tuned).name
    return OpenVINOBackend(load_engine, model=served, threads=threads, context=context)


def _llama_backend(
    settings: Settings, path: Path, packaged: PackagedModel | None, tuned: AdapterFolder | None
) -> EmbeddedBackend:
    cache_dir = settings.embedded.resolved_cache_dir()

    def load_engine(config: EngineConfig) -> Engine:
        served_file(packaged, path, cache_dir, tuned, workers=config.threads)  # checked (built first if need be)
        return LlamaEngine.load(config)

    return EmbeddedBackend(
        EngineConfig.create(
            served_path(packaged, path, cache_dir, tuned),
            threads=settings.embedded.threads,
            parallel_slots=settings.embedded.parallel_slots,
            slot_context=settings.embedded.slot_context,
            verbose=settings.log_level == "debug",
            deterministic=settings.deterministic is not False,
        ),
        load_engine=load_engine,
    )
