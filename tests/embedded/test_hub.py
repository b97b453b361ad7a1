"""OPENJEV_MODEL=hf:owner/repo:quant: resolution and download against a local server that answers like the Hub.

The downloads run in a subprocess, as `openjev serve` would, so HF_ENDPOINT, HF_HOME, HF_TOKEN and
HF_HUB_OFFLINE reach `huggingface_hub` through the environment. No model is loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openjev.adapters.embedded.hub import HubReference, choose_files, parse_reference
from openjev.domain.errors import StartupError
from openjev.listen import free_port
from tests.embedded.fake_hub import FakeHub, fake_hub

REPO = "Qwen/Qwen2.5-0.5B-Instruct-GGUF"
MODEL = b"GGUF" + bytes(range(256)) * 1024  # 256 KiB, a GGUF by its magic (never loaded)
# What `openjev serve` runs, in a fresh interpreter that imports nothing of huggingface_hub itself:
# the library loads its submodules lazily, so only the module's own imports can make them usable.
BARE_RESOLVE = """
import sys
from pathlib import Path
from openjev.logs import configure_logging
from openjev.domain.errors import StartupError
from openjev.adapters.embedded.model import resolve_model_path
configure_logging()
try:
    path, packaged = resolve_model_path(sys.argv[1], Path(sys.argv[2]))
except StartupError as exc:
    print("ERROR", exc)
    sys.exit(3)
print("PATH", path)
"""
# The library's download chunk is 10 MiB; a small one lets a cut download leave a partial file.
RESOLVE = "import huggingface_hub.constants\nhuggingface_hub.constants.DOWNLOAD_CHUNK_SIZE = 16 * 1024\n" + BARE_RESOLVE


def test_references_in_the_llama_cpp_and_ollama_forms() -> None:
    assert parse_reference("hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:q4_k_m") == HubReference(
        "hf:Qwen/Qwen2.5-1.5B-Instruct-GGUF:q4_k_m", "Qwen/Qwen2.5-1.5B-Instruct-GGUF", quant="q4_k_m"
    )
    assert parse_reference("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q8_0") == HubReference(
        "hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q8_0", "bartowski/Llama-3.2-1B-Instruct-GGUF", quant="Q8_0"
    )
    assert parse_reference("hf:o/r/sub/model-Q8_0.gguf") == HubReference(
        "hf:o/r/sub/model-Q8_0.gguf", "o/r", file="sub/model-Q8_0.gguf"
    )
    assert parse_reference("hf:o/r") == HubReference("hf:o/r", "o/r")
    assert parse_reference("/models/x.gguf") is None and parse_reference("smollm2-135m") is None
    for bad in ("hf:onlyowner", "hf:o/r:", "hf:o/r/readme.md", "hf:o/r/x.gguf:Q4_0"):
        with pytest.raises(StartupError, match="OPENJEV_MODEL"):
            parse_reference(bad)


def test_the_file_is_chosen_like_llama_cpp_does() -> None:
    files = ["README.md", "m-q8_0.gguf", "m-q4_k_m.gguf", "m-Q4_K_S.gguf", "mmproj-m-f16.gguf"]
    assert choose_files(HubReference("t", "o/r", quant="Q8_0"), files) == ["m-q8_0.gguf"]
    assert choose_files(HubReference("t", "o/r"), files) == ["m-q4_k_m.gguf"]  # Q4_K_M by default
    assert choose_files(HubReference("t", "o/r"), ["b-f16.gguf", "a-q8_0.gguf", "mmproj.gguf"]) == ["a-q8_0.gguf"]
    split = ["big-Q4_K_M-00002-of-00002.gguf", "big-Q4_K_M-00001-of-00002.gguf", "big-Q8_0.gguf"]
    assert choose_files(HubReference("t", "o/r", quant="q4_k_m"), split) == [
        "big-Q4_K_M-00001-of-00002.gguf",
        "big-Q4_K_M-00002-of-00002.gguf",
    ]
    with pytest.raises(StartupError, match=r"no IQ2_XS file in o/r; its GGUF files are \['m-Q4_K_S.gguf'"):
        choose_files(HubReference("t", "o/r", quant="IQ2_XS"), files)
    with pytest.raises(StartupError, match="has no GGUF file"):
        choose_files(HubReference("t", "o/r"), ["model.safetensors"])


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    repos = {
        REPO: {
            "README.md": b"# model",
            "qwen2.5-0.5b-instruct-q4_k_m.gguf": MODEL,
            "qwen2.5-0.5b-instruct-q8_0.gguf": MODEL[::-1],
        },
        "someone/NotGGUF": {"model-Q4_K_M.gguf": b"<!DOCTYPE html>" + bytes(100)},
        "corp/Gated-GGUF": {"gated-Q4_K_M.gguf": MODEL},
    }
    with fake_hub(FakeHub(repos=repos, gated={"corp/Gated-GGUF": "hf_secret"})) as running:
        yield running


def resolve(
    reference: str, hf_home: Path, endpoint: str, script: str = RESOLVE, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "OPENJEV_"))}
    environ |= {"HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_TELEMETRY": "1", **env}
    return subprocess.run(
        [sys.executable, "-c", script, reference, str(hf_home / "openjev")],
        env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def path_of(done: subprocess.CompletedProcess[str]) -> Path:
    assert done.returncode == 0 and done.stdout.startswith("PATH "), done.stdout + done.stderr
    return Path(done.stdout.removeprefix("PATH ").strip())


def events(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_downloads_once_into_hf_home_with_progress_in_the_log(hub: FakeHub, tmp_path: Path) -> None:
    done = resolve(f"hf:{REPO}:Q4_K_M", tmp_path, hub.url)
    path = path_of(done)
    assert path.read_bytes() == MODEL and path.name == "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    assert path.is_relative_to(tmp_path / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct-GGUF")
    logged = [e["event"] for e in events(done.stderr)]
    assert "model_download_started" in logged and "model_download_progress" in logged and "model_ready" in logged
    assert len(hub.file_gets) == 1
    # The Ollama spelling of the same model, lower case quant: found in the cache, not downloaded again.
    assert path_of(resolve(f"hf.co/{REPO}:q4_k_m", tmp_path, hub.url)) == path
    assert len(hub.file_gets) == 1
    # Offline, and with the Hub gone: the cache is enough.
    dead = f"http://127.0.0.1:{free_port()}"
    assert path_of(resolve(f"hf:{REPO}:Q4_K_M", tmp_path, dead, HF_HUB_OFFLINE="1")) == path
    assert path_of(resolve(f"hf:{REPO}:Q4_K_M", tmp_path, dead)) == path


def test_a_fresh_interpreter_resolves_and_explains_without_importing_the_hub_itself(
    hub: FakeHub, tmp_path: Path
) -> None:
    assert path_of(resolve(f"hf:{REPO}", tmp_path, hub.url, BARE_RESOLVE)).read_bytes() == MODEL
    offline = resolve(f"hf:{REPO}", tmp_path / "empty", hub.url, BARE_RESOLVE, HF_HUB_OFFLINE="1")
    assert offline.returncode == 3 and "not in the local Hub cache" in offline.stdout, offline.stdout + offline.stderr


def test_a_cut_download_resumes_where_it_stopped(hub: FakeHub, tmp_path: Path) -> None:
    hub.cut_after = 100 * 1024  # the connection drops after 100 KiB
    done = resolve(f"hf:{REPO}", tmp_path, hub.url)
    assert path_of(done).read_bytes() == MODEL
    first, again = [span for _, span in hub.file_gets]
    assert first is None and again is not None
    resumed_at = int(again.removeprefix("bytes=").removesuffix("-"))  # whole chunks received are kept
    assert 0 < resumed_at <= 100 * 1024  # only the rest was sent again
    assert not list((tmp_path / "hub").rglob("*.incomplete"))


def test_a_failed_download_names_the_reference_and_the_next_start_gets_it(hub: FakeHub, tmp_path: Path) -> None:
    hub.down = True
    failed = resolve(f"hf:{REPO}", tmp_path, hub.url)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert f"OPENJEV_MODEL='hf:{REPO}': cannot get {REPO} from the Hugging Face Hub" in failed.stdout
    assert "503" in failed.stdout and "HF_ENDPOINT" in failed.stdout
    assert not list((tmp_path / "hub").rglob("*.gguf"))  # nothing half-written is left to load
    hub.down = False
    assert path_of(resolve(f"hf:{REPO}", tmp_path, hub.url)).read_bytes() == MODEL


def test_unreachable_hub_offline_mode_and_missing_quant_fail_clearly(hub: FakeHub, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    done = resolve(f"hf:{REPO}:Q4_K_M", tmp_path, dead)
    assert done.returncode == 3 and f"OPENJEV_MODEL='hf:{REPO}:Q4_K_M'" in done.stdout
    assert "check the network (or HF_ENDPOINT" in done.stdout and "local .gguf path" in done.stdout
    offline = resolve(f"hf:{REPO}:Q4_K_M", tmp_path, hub.url, HF_HUB_OFFLINE="1")
    assert offline.returncode == 3 and "not in the local Hub cache" in offline.stdout
    assert hub.file_gets == []
    missing = resolve(f"hf:{REPO}:IQ1_S", tmp_path, hub.url)
    assert missing.returncode == 3 and "no IQ1_S file" in missing.stdout and "q8_0.gguf" in missing.stdout
    nowhere = resolve("hf:nobody/Nothing-GGUF", tmp_path, hub.url)
    assert nowhere.returncode == 3 and "no such repository" in nowhere.stdout


def test_gated_repositories_need_hf_token(hub: FakeHub, tmp_path: Path) -> None:
    refused = resolve("hf:corp/Gated-GGUF", tmp_path, hub.url)
    assert refused.returncode == 3 and "HF_TOKEN" in refused.stdout and "hf:corp/Gated-GGUF" in refused.stdout
    assert path_of(resolve("hf:corp/Gated-GGUF", tmp_path, hub.url, HF_TOKEN="hf_secret")).read_bytes() == MODEL


def test_a_file_that_is_not_gguf_is_refused_before_loading(hub: FakeHub, tmp_path: Path) -> None:
    done = resolve("hf:someone/NotGGUF:Q4_K_M", tmp_path, hub.url)
    assert done.returncode == 3 and "is not a GGUF file (it starts with b'<!DO'" in done.stdout
