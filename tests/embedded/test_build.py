"""build_runtime and the engine parameters: cheap, no model load."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import xllamacpp  # type: ignore[import-untyped]

from openjev.adapters.embedded.backend import EmbeddedBackend
from openjev.adapters.embedded.build import build_runtime
from openjev.adapters.embedded.llama_engine import EngineConfig, available_cpus, engine_params
from openjev.adapters.embedded.model import smollm2_path
from openjev.domain.errors import StartupError
from openjev.settings import load_settings


def test_build_runtime_names_the_model_without_loading_it() -> None:
    started = time.perf_counter()
    runtime = build_runtime(load_settings({"OPENJEV_MODEL": "smollm2-135m"}))
    assert time.perf_counter() - started < 1.0
    assert runtime.kind == "embedded"
    assert runtime.public_model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert {"SmolLM2-135M-Instruct.Q4_1", "SmolLM2-135M-Instruct"} <= runtime.accepted_models
    assert "SmolLM2-135M-Instruct" in runtime.model_description and "llama.cpp" in runtime.model_description
    assert isinstance(runtime.backend, EmbeddedBackend)
    assert not runtime.backend.started and runtime.backend.context_tokens() is None


def test_settings_reach_the_engine_config() -> None:
    runtime = build_runtime(
        load_settings(
            {
                "OPENJEV_MODEL": "smollm2-135m",
                "OPENJEV_THREADS": "3",
                "OPENJEV_PARALLEL_SLOTS": "2",
                "OPENJEV_SLOT_CONTEXT": "1024",
            }
        )
    )
    assert isinstance(runtime.backend, EmbeddedBackend)
    config = runtime.backend.config
    assert (config.threads, config.parallel_slots, config.slot_context) == (3, 2, 1024)
    assert config.model_path == smollm2_path() and not config.verbose
    assert config.deterministic  # the default
    off = build_runtime(load_settings({"OPENJEV_MODEL": "smollm2-135m", "OPENJEV_DETERMINISTIC": "false"}))
    assert isinstance(off.backend, EmbeddedBackend) and not off.backend.config.deterministic
    assert EngineConfig.create(smollm2_path(), threads=None, parallel_slots=1, slot_context=8).threads == (
        available_cpus()
    )


def test_a_served_model_name_overrides_and_the_real_name_stays_accepted() -> None:
    runtime = build_runtime(
        load_settings({"OPENJEV_MODEL": "smollm2-135m", "OPENJEV_SERVED_MODEL_NAME": "acme/decider"})
    )
    assert runtime.public_model == "acme/decider"
    assert {"acme/decider", "HuggingFaceTB/SmolLM2-135M-Instruct"} <= runtime.accepted_models


def test_a_missing_model_file_fails_at_build_time_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="OPENJEV_MODEL"):
        build_runtime(load_settings({"OPENJEV_MODEL": str(tmp_path / "missing.gguf")}))


def test_engine_params_give_each_slot_its_context_privately_and_exactly() -> None:
    config = EngineConfig(model_path=smollm2_path(), threads=2, parallel_slots=3, slot_context=1024)
    params = engine_params(config, "secret")
    assert (params.n_parallel, params.n_ctx, params.kv_unified) == (3, 3072, False)
    assert params.cpuparams.n_threads == params.cpuparams_batch.n_threads == 2
    assert params.hostnames == ["127.0.0.1"] and params.port == 0 and params.api_keys == ["secret"]
    assert params.flash_attn_type == xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
    assert params.cache_type_k == params.cache_type_v == xllamacpp.ggml_type.GGML_TYPE_F32
    assert params.cache_prompt and not params.ctx_shift and not params.ui
    assert params.cache_ram_mib == 0  # deterministic: no host-memory prompt cache restoring states
    parallel = EngineConfig(model_path=Path("m.gguf"), threads=1, deterministic=False)
    assert engine_params(parallel, "k").cache_ram_mib == parallel.prompt_cache_mib
    assert params.verbosity == 1  # errors only, unless OPENJEV_LOG_LEVEL=debug
    assert engine_params(EngineConfig(model_path=Path("m.gguf"), threads=1, verbose=True), "k").verbosity == 3
    fast = engine_params(EngineConfig(model_path=Path("m.gguf"), threads=1, exact=False), "k")
    assert fast.cache_type_k == xllamacpp.ggml_type.GGML_TYPE_F16
