"""The exact SGLang command line per frontend, profile and SGLang version."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from openjev.adapters.sglang import SGLangBackend
from openjev.adapters.sglang.build import build_runtime, sglang_url
from openjev.adapters.sglang.flags import (
    PROFILES,
    flag_names,
    is_hybrid_model,
    parse_version,
    profile_flags,
    sglang_command,
)
from openjev.domain.errors import SettingsError
from openjev.settings import SGLANG_DEFAULT_REVISION, load_settings

PY = "/opt/sglang/bin/python"
# 0.5.23's own flags and choices, extracted from the release by scripts/sglang-cli-fixture.py.
PINNED_CLI: dict[str, dict[str, object]] = json.loads(
    (Path(__file__).parents[1] / "data" / "sglang-0.5.23-cli.json").read_text(encoding="utf-8")
)
EVERY_SETTING = {
    "OPENJEV_PROFILE": "b200-nvfp4",
    "OPENJEV_REVISION": "abc123",
    "OPENJEV_SERVED_MODEL_NAME": "jev-qwen",
    "OPENJEV_BACKEND_API_KEY": "s3cret",
    "OPENJEV_CONTEXT_LENGTH": "65536",
    "OPENJEV_KV_CACHE_DTYPE": "fp8_e4m3",
    "OPENJEV_DETERMINISTIC": "true",
    "OPENJEV_ADAPTER": "ticket=org/ticket-lora",
}


def test_default_command_for_the_production_model_on_the_python_frontend() -> None:
    command = sglang_command(load_settings({}), python=PY)
    assert command.argv == (
        PY, "-m", "sglang.launch_server",
        "--model-path", "nvidia/Qwen3.6-35B-A3B-NVFP4",
        "--revision", SGLANG_DEFAULT_REVISION,  # pinned: a push to the repository's main changes nothing
        "--served-model-name", "Qwen/Qwen3.6-35B-A3B",
        "--host", "127.0.0.1", "--port", "30000",
        "--kv-cache-dtype", "bf16",
        "--mamba-radix-cache-strategy", "extra_buffer",
        "--log-level", "info",
    )  # fmt: skip
    # The Python frontend until a GPU run shows the Rust one starts Qwen3.6 (it may refuse its image processor).
    assert command.env == {"SGLANG_RUST_SERVER": "0", "SGLANG_WARMUP_TIMEOUT": "1800.0"}
    assert "--skip-tokenizer-init" not in command.argv


def test_the_pinned_revision_follows_the_default_model_only() -> None:
    assert re.fullmatch(r"[0-9a-f]{40}", SGLANG_DEFAULT_REVISION)  # a commit, not a branch that moves
    moved = sglang_command(load_settings({"OPENJEV_REVISION": "0" * 40}), python=PY).argv
    assert moved[moved.index("--revision") + 1] == "0" * 40
    other = sglang_command(load_settings({"OPENJEV_MODEL": "Qwen/Qwen3-8B"}), python=PY).argv
    assert "--revision" not in other  # another model's default branch, unless OPENJEV_REVISION says otherwise
    runtime = build_runtime(load_settings({"OPENJEV_SGLANG_URL": "http://127.0.0.1:30001"}))
    assert runtime.model_description.endswith(f"at revision {SGLANG_DEFAULT_REVISION}.")


def test_the_tokenizer_follows_the_pin_only_from_the_models_own_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    from openjev.adapters.hf_codec import HFCodec

    loads: list[tuple[str, str | None]] = []

    class Loaded:
        def id_limit(self) -> int:
            return 10

    def load(cls: type, where: str, revision: str | None = None) -> Loaded:
        loads.append((where, revision))
        return Loaded()

    monkeypatch.setattr(HFCodec, "load", classmethod(load))
    for env in (
        {},
        {"OPENJEV_TOKENIZER": "Qwen/Qwen3.6-35B-A3B"},
        {"OPENJEV_TOKENIZER": "x/y", "OPENJEV_REVISION": "r"},
    ):
        build_runtime(load_settings({"OPENJEV_SGLANG_URL": "http://127.0.0.1:1", **env})).load_codec()
    assert loads == [
        ("nvidia/Qwen3.6-35B-A3B-NVFP4", SGLANG_DEFAULT_REVISION),
        ("Qwen/Qwen3.6-35B-A3B", None),  # another repository: the model's commit means nothing there
        ("x/y", "r"),  # an explicit OPENJEV_REVISION applies to both, as documented
    ]


def test_a_local_snapshot_gets_no_revision_flag(tmp_path: Path) -> None:
    """A snapshot folder (what Modal serves from its Volume) is read as it is: `--revision` would only give
    SGLang a reason to ask the Hub about it."""
    snapshot = tmp_path / "snapshots" / SGLANG_DEFAULT_REVISION
    snapshot.mkdir(parents=True)
    settings = load_settings({"OPENJEV_MODEL": str(snapshot), "OPENJEV_REVISION": SGLANG_DEFAULT_REVISION})
    argv = sglang_command(settings, python=PY).argv
    assert argv[argv.index("--model-path") + 1] == str(snapshot)
    assert "--revision" not in argv


def test_sglang_warm_up_timeout_is_the_start_up_budget() -> None:
    """0.5.23 kills itself when its own warm-up request outlasts SGLANG_WARMUP_TIMEOUT (600 s when unset or
    <= 0; an EnvFloat, `srt/environ.py`); inside openjev's start-up budget it must not give up first."""
    env = sglang_command(load_settings({"OPENJEV_STARTUP_TIMEOUT": "3300"}), python=PY).env
    assert float(env["SGLANG_WARMUP_TIMEOUT"]) == 3300.0
    assert env["SGLANG_WARMUP_TIMEOUT"] == "3300.0"


def test_the_rust_frontend_stays_a_setting_but_refuses_a_backend_key() -> None:
    """0.5.23's Rust frontend has no API key: `--api-key` with it would leave SGLang's port open."""
    command = sglang_command(load_settings({"OPENJEV_FRONTEND": "rust"}), python=PY)
    assert command.env["SGLANG_RUST_SERVER"] == "1"
    with pytest.raises(SettingsError, match=r"OPENJEV_BACKEND_API_KEY: SGLang's Rust frontend .* ignores --api-key"):
        sglang_command(load_settings({"OPENJEV_FRONTEND": "rust", "OPENJEV_BACKEND_API_KEY": "k"}), python=PY)


@pytest.mark.parametrize("dtype", ["bf16", "auto", "fp8_e4m3"])
def test_the_kv_cache_dtype_is_always_explicit(dtype: str) -> None:
    """With SGLang's `auto`, a checkpoint declaring FP8 KV quantisation silently gets an FP8 KV cache."""
    env = {"OPENJEV_KV_CACHE_DTYPE": dtype} if dtype != "bf16" else {}
    argv = sglang_command(load_settings(env), python=PY).argv
    assert argv[argv.index("--kv-cache-dtype") + 1] == dtype
    with pytest.raises(SettingsError, match="OPENJEV_KV_CACHE_DTYPE"):
        load_settings({"OPENJEV_KV_CACHE_DTYPE": "fp16"})


def test_python_frontend_b200_profile_with_every_setting() -> None:
    env = {
        "OPENJEV_FRONTEND": "python",
        "OPENJEV_PROFILE": "b200-nvfp4",
        "OPENJEV_MODEL": "Qwen/Qwen3.6-35B-A3B-FP8",
        "OPENJEV_REVISION": "abc123",
        "OPENJEV_SERVED_MODEL_NAME": "jev-qwen",
        "OPENJEV_BACKEND_API_KEY": "s3cret",
        "OPENJEV_CONTEXT_LENGTH": "65536",
        "OPENJEV_SGLANG_PORT": "31000",
        "OPENJEV_LOG_LEVEL": "warning",
    }
    command = sglang_command(load_settings(env), python=PY)
    assert command.argv == (
        PY, "-m", "sglang.launch_server",
        "--model-path", "Qwen/Qwen3.6-35B-A3B-FP8",
        "--revision", "abc123",
        "--served-model-name", "jev-qwen",
        "--host", "127.0.0.1", "--port", "31000",
        "--api-key", "s3cret",
        "--context-length", "65536",
        "--kv-cache-dtype", "bf16",
        "--mamba-radix-cache-strategy", "extra_buffer",
        "--log-level", "warning",
        "--schedule-policy", "lpm", "--cuda-graph-max-bs-decode", "16", "--enable-metrics",
    )  # fmt: skip
    assert command.env["SGLANG_RUST_SERVER"] == "0"
    assert "s3cret" not in command.redacted()
    assert "--api-key '***'" in command.redacted()


def test_older_sglang_gets_the_flag_names_it_knows() -> None:
    command = sglang_command(load_settings({"OPENJEV_PROFILE": "b200-nvfp4"}), python=PY, version="0.5.13.post1")
    assert "--mamba-scheduler-strategy" in command.argv
    assert "--cuda-graph-max-bs" in command.argv
    assert "--mamba-radix-cache-strategy" not in command.argv
    assert flag_names("0.5.15").mamba_strategy == "--mamba-radix-cache-strategy"
    assert flag_names("0.6.0rc1").mamba_strategy == "--mamba-radix-cache-strategy"
    assert flag_names(None).mamba_strategy == "--mamba-radix-cache-strategy"
    assert parse_version("0.5.13.post1") == (0, 5, 13)
    assert parse_version("0.6.0rc1") == (0, 6, 0)


def test_unknown_profile_names_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"OPENJEV_PROFILE: unknown profile 'h100' \(known: b200-nvfp4, default\)"):
        profile_flags("h100")
    assert set(PROFILES) == {"default", "b200-nvfp4"}


def test_extra_buffer_only_for_hybrid_architectures(tmp_path: Path) -> None:
    assert is_hybrid_model("nvidia/Qwen3.6-35B-A3B-NVFP4")
    assert is_hybrid_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert not is_hybrid_model("Qwen/Qwen3-8B")
    assert not is_hybrid_model("meta-llama/Llama-3.1-8B-Instruct")
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"]}))
    assert is_hybrid_model(str(local))
    (local / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    assert not is_hybrid_model(str(local))
    command = sglang_command(load_settings({"OPENJEV_MODEL": "Qwen/Qwen3-8B"}), python=PY)
    assert not any("mamba" in arg for arg in command.argv)


def test_runtime_names_and_urls() -> None:
    runtime = build_runtime(load_settings({"OPENJEV_SGLANG_URL": "http://127.0.0.1:30001/"}))
    assert runtime.kind == "sglang"
    assert runtime.public_model == "Qwen/Qwen3.6-35B-A3B"
    assert runtime.accepted_models == {"Qwen/Qwen3.6-35B-A3B", "nvidia/Qwen3.6-35B-A3B-NVFP4"}
    assert isinstance(runtime.backend, SGLangBackend)
    assert runtime.backend.url == "http://127.0.0.1:30001"
    assert sglang_url(load_settings({"OPENJEV_SGLANG_PORT": "31234"})) == "http://127.0.0.1:31234"
    with pytest.raises(SettingsError, match="OPENJEV_SGLANG_URL"):
        sglang_url(load_settings({"OPENJEV_SGLANG_URL": "127.0.0.1:30000"}))


def _pinned_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang.launch_server", exit_on_error=False, add_help=False)
    for flag, spec in PINNED_CLI.items():
        choices = spec["choices"]
        if spec["takes_value"]:
            parser.add_argument(flag, choices=choices if isinstance(choices, list) else None)
        else:
            parser.add_argument(flag, action="store_true")
    return parser


@pytest.mark.parametrize("env", [{}, EVERY_SETTING], ids=["defaults", "every-setting"])
def test_every_flag_and_value_is_one_the_pinned_release_parses(env: dict[str, str]) -> None:
    argv = sglang_command(load_settings(env), python=PY).argv
    assert argv[1:3] == ("-m", "sglang.launch_server")
    parsed, unknown = _pinned_parser().parse_known_args(list(argv[3:]))
    assert unknown == []
    assert parsed.enable_deterministic_inference is ("OPENJEV_DETERMINISTIC" in env)


def test_deterministic_inference_keeps_the_radix_cache_on_a_b200() -> None:
    """0.5.23 falls back to flashinfer on Blackwell, which turns the radix cache off in this mode."""
    off = sglang_command(load_settings({}), python=PY).argv
    assert "--enable-deterministic-inference" not in off and "--attention-backend" not in off
    argv = sglang_command(load_settings({"OPENJEV_DETERMINISTIC": "true"}), python=PY).argv
    tail = argv[argv.index("--enable-deterministic-inference") :]
    assert tail[1:5] == ("--attention-backend", "triton", "--linear-attn-prefill-backend", "triton")
