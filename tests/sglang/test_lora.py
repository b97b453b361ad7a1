"""OPENJEV_ADAPTER on SGLang: a LoRA adapter SGLang serves by name (`adapters/sglang/lora.py`).

The setting read and refused, the launch flags, the served model's name, and against the emulator the
start-up check and `lora_path` on every /generate. Behind the real router: test_router.py; the whole
chain through `openjev serve` launching SGLang: test_launcher.py. That an `openjev tune` folder is
refused on SGLang: tests/tuning/test_cli.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from openjev.adapters.sglang.backend import SGLangBackend
from openjev.adapters.sglang.build import build_runtime
from openjev.adapters.sglang.flags import sglang_command
from openjev.adapters.sglang.lora import SGLangAdapter, adapter_setting
from openjev.domain.errors import BackendError, SettingsError, StartupError
from openjev.domain.ports import ScoreCall
from openjev.settings import load_settings
from tests.sglang_emulator import SGLangEmulator, logprob_of

PROMPT = [151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198]
LABELS = (32, 33, 34, 35)
SERVED = {"ticket": "/adapters/ticket"}
CONNECTED = {"OPENJEV_SGLANG_URL": "http://127.0.0.1:30001"}


def new_id() -> str:
    return uuid.uuid4().hex


def peft_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "ticket-lora"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    return folder


def test_connected_it_is_a_name_launching_a_name_and_where_sglang_loads_it_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    peft_folder(tmp_path)
    assert adapter_setting(" ticket ", launching=False) == SGLangAdapter("ticket")
    # A local folder is passed as an absolute path (SGLang does not run in openjev's folder); anything
    # else (a Hugging Face repository, a path on SGLang's host) as it is.
    assert adapter_setting("ticket=ticket-lora", launching=True) == SGLangAdapter(
        "ticket", str(tmp_path.resolve() / "ticket-lora")
    )
    assert adapter_setting("ticket=org/ticket-lora", launching=True) == SGLangAdapter("ticket", "org/ticket-lora")


@pytest.mark.parametrize(
    ("value", "launching", "says"),
    [
        ("ticket", True, "set OPENJEV_ADAPTER=ticket=PATH"),
        ("ticket=org/lora", False, "start it with --enable-lora --lora-paths ticket=org/lora and set OPENJEV_ADAPTER="),
        ("ticket=", True, "NAME=PATH needs a PATH"),
        ("=org/lora", True, "expected the name of an adapter SGLang serves"),
        ("my ticket", False, "expected the name of an adapter SGLang serves"),
        ("ticket={plain}", True, "has no adapter_config.json; SGLang loads LoRA adapters in PEFT's format"),
        ("ticket={gguf}", True, "is a GGUF adapter"),
    ],
)  # fmt: skip
def test_what_sglang_cannot_serve_is_refused_saying_what_to_set(
    tmp_path: Path, value: str, launching: bool, says: str
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "lora.gguf").write_bytes(b"GGUF")
    value = value.format(plain=tmp_path / "plain", gguf=tmp_path / "lora.gguf")
    with pytest.raises(SettingsError, match=r"docs/sglang\.md#serving-an-adapter") as refused:
        adapter_setting(value, launching=launching)
    assert says in refused.value.message


def test_the_sglang_openjev_launches_loads_the_adapter(tmp_path: Path) -> None:
    folder = peft_folder(tmp_path)
    argv = sglang_command(load_settings({"OPENJEV_ADAPTER": f"ticket={folder}"}), python="/py").argv
    at = argv.index("--enable-lora")
    assert argv[at : at + 3] == ("--enable-lora", "--lora-paths", f"ticket={folder.resolve()}")
    assert "--enable-lora" not in sglang_command(load_settings({}), python="/py").argv


def test_the_served_model_is_named_with_the_adapter_unless_a_name_is_set() -> None:
    runtime = build_runtime(load_settings({**CONNECTED, "OPENJEV_ADAPTER": "ticket"}))
    assert runtime.public_model == "Qwen/Qwen3.6-35B-A3B+ticket"
    assert runtime.accepted_models == {
        "Qwen/Qwen3.6-35B-A3B+ticket", "Qwen/Qwen3.6-35B-A3B", "nvidia/Qwen3.6-35B-A3B-NVFP4",
    }  # fmt: skip
    assert "with the LoRA adapter `ticket`" in runtime.model_description
    assert isinstance(runtime.backend, SGLangBackend) and runtime.backend.adapter == "ticket"
    named = build_runtime(load_settings({**CONNECTED, "OPENJEV_ADAPTER": "ticket", "OPENJEV_SERVED_MODEL_NAME": "jev"}))
    assert named.public_model == "jev"  # as on the embedded backend: OPENJEV_SERVED_MODEL_NAME wins
    plain = build_runtime(load_settings(CONNECTED))
    assert isinstance(plain.backend, SGLangBackend) and plain.backend.adapter is None


async def test_start_up_finds_the_adapter_and_every_generate_names_it(emulator: SGLangEmulator) -> None:
    emulator.config.lora_paths = dict(SERVED)
    client = SGLangBackend(emulator.url, startup_timeout=5.0, adapter="ticket")
    try:
        await client.start()
        probes = emulator.generate_bodies()  # the vocabulary probe and the label check
        await client.warm(new_id(), PROMPT[:8])
        [scores] = await client.score_many([ScoreCall(new_id(), PROMPT, LABELS)])
        await client.score_many([ScoreCall(new_id(), PROMPT, LABELS), ScoreCall(new_id(), PROMPT[:9], LABELS)])
    finally:
        await client.close()
    bodies = emulator.generate_bodies()
    assert (len(probes), len(bodies)) == (2, 5)
    assert [body.get("lora_path") for body in bodies] == ["ticket"] * 5  # one string for a whole batch too
    assert scores.logprobs == tuple(logprob_of(PROMPT, label, adapter="ticket") for label in LABELS)


@pytest.mark.parametrize(
    ("served", "why"),
    [({}, "it lists none: LoRA is off, or no adapter is loaded"), ({"other": "/adapters/other"}, "it lists other")],
)
async def test_start_up_stops_when_sglang_does_not_list_the_adapter(
    emulator: SGLangEmulator, served: dict[str, str], why: str
) -> None:
    emulator.config.lora_paths = served
    client = SGLangBackend(emulator.url, startup_timeout=5.0, adapter="ticket")
    try:
        with pytest.raises(StartupError) as stopped:
            await client.start()
    finally:
        await client.close()
    said = stopped.value.message
    assert f"OPENJEV_ADAPTER=ticket: SGLang at {emulator.url} serves no LoRA adapter of that name ({why})" in said
    assert "--enable-lora --lora-paths ticket=PATH" in said
    assert 'POST /load_lora_adapter {"lora_name": "ticket", "lora_path": PATH}' in said
    assert emulator.generate_bodies() == []  # stopped before any call


async def test_a_call_sglang_refuses_for_the_adapter_names_the_setting(emulator: SGLangEmulator) -> None:
    """An SGLang that stops serving the adapter after start-up (a worker added behind the router without it)."""
    emulator.config.lora_paths = dict(SERVED)
    client = SGLangBackend(emulator.url, startup_timeout=5.0, adapter="ticket")
    try:
        await client.start()
        emulator.config.lora_paths, emulator.config.enable_lora = {}, True
        with pytest.raises(BackendError, match=r"does not serve OPENJEV_ADAPTER=ticket: .*never been loaded: ticket"):
            await client.score(new_id(), PROMPT, LABELS)
    finally:
        await client.close()
