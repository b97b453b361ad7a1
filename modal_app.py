"""openjev on Modal: one B200 per container, SGLang and the API side by side (docs/modal.md).

    uv run modal run modal_app.py       # temporary deployment, smoke check, smoke-result.json, teardown
    uv run modal deploy modal_app.py    # persistent endpoint; `uv run python modal_app.py` prints its URL

The container runs `openjev serve --backend sglang`, which launches SGLang on loopback and exits
non-zero if SGLang dies; this file turns any exit of that process into the end of the container,
so Modal replaces it. Weights, SGLang's tuning data and the Triton/Inductor compile caches live in
the `openjev-huggingface` Volume; CUDA graphs are still captured at every start. See docs/modal.md.

Everything Modal is told comes from the small pure functions below, so tests can check it with no
Modal account. Read at import on the deploying machine: OPENJEV_PROFILE, OPENJEV_FRONTEND and
OPENJEV_SERVED_MODEL_NAME (forwarded to the container) and OPENJEV_MIN_CONTAINERS (default 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, cast

import modal

MINUTES = 60
GIB = 1024  # Modal sizes memory in MiB

# The official SGLang image for sglang 0.5.23 (the version `openjev[sglang]` pins), CUDA 13.0 build:
# the 0.5.23 wheel itself is built against CUDA 13 (torch 2.14.1, cuda-python>=13, flashinfer cu13),
# and Blackwell's NVFP4 kernels want it. The full image rather than `-runtime`: the runtime variant has
# shipped without Python modules SGLang imports (v0.5.14-cu130-runtime lacked `distro`) and is only
# ~8% smaller. CUDA stays in this image; nothing CUDA is installed on top.
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.23-cu130"

APP_NAME = "openjev"
SERVER_NAME = "OpenJev"
GPU = "B200:1"  # one SGLang per GPU, one GPU per container
CPU = 8.0  # the API, SGLang's scheduler and tokenizer processes
MEMORY = 64 * GIB  # host RAM to stage ~23.5 GB of weights while loading
PORT = 8000
ROUTING_REGION = "us-west"  # where Modal's proxy takes requests in
COMPUTE_REGION = "us"  # any US region may run the GPU (broad regions cost less than one narrow region)
SCALEDOWN_WINDOW = 5 * MINUTES  # idle minutes before a container goes away (scale to zero)
STARTUP_TIMEOUT = 60 * MINUTES  # a first start downloads the weights and compiles kernels
API_STARTUP_BUDGET = 55 * MINUTES  # openjev's own wait for SGLang, inside Modal's budget above
EXIT_GRACE_PERIOD = 130  # seconds for in-flight requests on shutdown: the API's 120 s timeout + margin
TARGET_CONCURRENCY = 12  # requests per container Modal aims for; the API admits 16 (docs/settings.md)

VOLUME_NAME = "openjev-huggingface"
CACHE_ROOT = "/cache"  # the Volume, mounted once; every cache below points into it
PROJECT_DIR = "/opt/openjev"  # where the local project is copied into the image and installed from
PROJECT_ROOT = Path(__file__).resolve().parent

FORWARDED_VARIABLES = ("OPENJEV_PROFILE", "OPENJEV_FRONTEND", "OPENJEV_SERVED_MODEL_NAME")
MIN_CONTAINERS_VARIABLE = "OPENJEV_MIN_CONTAINERS"

DEFAULT_PROFILE = "b200-nvfp4"  # SGLang flags for this GPU and checkpoint; OPENJEV_PROFILE overrides

# Other settings for every container: add them here (they change the image), or name Modal Secrets
# (`modal secret create openjev OPENJEV_API_KEY=... HF_TOKEN=...`) to attach to the container.
EXTRA_IMAGE_ENV: dict[str, str] = {}
SECRET_NAMES: tuple[str, ...] = ()


def cache_env(root: str = CACHE_ROOT) -> dict[str, str]:
    """Point the Hugging Face cache, SGLang's kernel/tuning caches and the compilers into the Volume."""
    return {
        "HF_HOME": f"{root}/huggingface",
        "HF_HUB_CACHE": f"{root}/huggingface/hub",
        "HF_XET_HIGH_PERFORMANCE": "1",  # saturate the link on the first 23.5 GB download
        "TRITON_CACHE_DIR": f"{root}/triton",
        "TORCHINDUCTOR_CACHE_DIR": f"{root}/torchinductor",
        # SGLang's own cache root (flashinfer autotune results, Rust extension builds, DeepGEMM, ...)
        # and its JIT kernel builds, which do not follow SGLANG_CACHE_DIR in 0.5.23.
        "SGLANG_CACHE_DIR": f"{root}/sglang",
        "SGLANG_JIT_CACHE_DIR": f"{root}/sglang/jit",
        "SGLANG_DG_CACHE_DIR": f"{root}/sglang/deep_gemm",
        "FLASHINFER_WORKSPACE_BASE": f"{root}/flashinfer",
        "TVM_FFI_CACHE_DIR": f"{root}/tvm-ffi",
        "TILELANG_CACHE_DIR": f"{root}/tilelang",
        "CUTE_DSL_CACHE_DIR": f"{root}/cute-dsl",
    }


def prepare_cache_dirs(env: Mapping[str, str], root: str = CACHE_ROOT) -> list[Path]:
    """Create every cache folder of `env` that lives in the Volume (a fresh Volume is empty).

    Run at container start, once the Volume is mounted. Caches are folders named by variables,
    never links into the Volume: a link to a folder the Volume does not have yet is dangling, and
    SGLang's `mkdir(parents=True, exist_ok=True)` through it raises FileExistsError.
    """
    made = [Path(value) for value in env.values() if PurePosixPath(value).is_relative_to(root)]
    for path in made:
        path.mkdir(parents=True, exist_ok=True)
    return made


def is_project_file(relative: Path) -> bool:
    """What `pip install` of the project needs: pyproject, README, the sources (no caches, no tests)."""
    parts = relative.parts
    if not parts or "__pycache__" in parts or relative.suffix == ".pyc":
        return False
    return parts[0] == "src" or (len(parts) == 1 and parts[0] in {"pyproject.toml", "README.md", "LICENSE"})


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The OPENJEV_* settings forwarded from the deploying machine, when set and not empty."""
    return {name: environ[name] for name in FORWARDED_VARIABLES if environ.get(name)}


def min_containers(environ: Mapping[str, str]) -> int:
    """Warm containers to keep: OPENJEV_MIN_CONTAINERS at deploy time, 0 (scale to zero) by default."""
    text = environ.get(MIN_CONTAINERS_VARIABLE, "").strip() or "0"
    if not text.isdigit():
        raise ValueError(f"{MIN_CONTAINERS_VARIABLE} must be a whole number of containers, got {text!r}")
    return int(text)


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The container's own settings: openjev's SGLang start-up budget, the B200 profile, then the forwarded ones."""
    return {
        "OPENJEV_STARTUP_TIMEOUT": str(API_STARTUP_BUDGET),
        "OPENJEV_PROFILE": DEFAULT_PROFILE,
        **forwarded_env(environ),
    }


def serve_command(python: str) -> list[str]:
    """`openjev serve --backend sglang`, listening where Modal's proxy connects (SGLang stays on loopback)."""
    return [python, "-m", "openjev.cli", "serve", "--backend", "sglang", "--host", "0.0.0.0", "--port", str(PORT)]


def build_image() -> modal.Image:
    return (
        modal.Image.from_registry(SGLANG_IMAGE)
        .entrypoint([])  # the image's own entrypoint only prints a banner
        .env({**cache_env(), **EXTRA_IMAGE_ENV})
        .add_local_dir(PROJECT_ROOT, PROJECT_DIR, copy=True, ignore=lambda path: not is_project_file(path))
        # The project alone: `[project.dependencies]`, no dependency group, so neither the embedded
        # backend (group `embedded`) nor `modal` (group `deploy`; Modal mounts its client at run
        # time). Installed versions that fit stay, and tests/test_dependencies.py checks that none
        # of SGLang's pins has to move.
        .uv_pip_install(PROJECT_DIR)
    )


def server_options(
    environ: Mapping[str, str], image: modal.Image | None, volume: modal.Volume | None
) -> dict[str, Any]:
    """Every argument of `@app.server`. No `max_containers`: Modal adds B200s as load needs."""
    return {
        "image": image,
        "gpu": GPU,
        "cpu": CPU,
        "memory": MEMORY,
        "volumes": {CACHE_ROOT: volume} if volume is not None else {},
        "env": server_env(environ),
        "secrets": [modal.Secret.from_name(name) for name in SECRET_NAMES],
        "port": PORT,
        "unauthenticated": True,  # the API's own OPENJEV_API_KEY (via a Secret) is the gate, if wanted
        "routing_region": ROUTING_REGION,
        "compute_region": COMPUTE_REGION,
        "min_containers": min_containers(environ),
        "scaledown_window": SCALEDOWN_WINDOW,
        "startup_timeout": STARTUP_TIMEOUT,
        "exit_grace_period": EXIT_GRACE_PERIOD,
        "target_concurrency": TARGET_CONCURRENCY,
    }


def wait_until_serving(process: subprocess.Popen[bytes], url: str, *, timeout: float, interval: float = 5.0) -> None:
    """Block until GET url answers 200; raise if the process exits first or the time runs out.

    Modal routes requests to a container once its enter methods return, so returning only when
    the API is ready keeps a new container from answering 503s while a warm one could serve.
    """
    deadline = time.monotonic() + timeout
    while True:
        code = process.poll()
        if code is not None:
            raise RuntimeError(f"openjev serve exited with status {code} while starting")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass  # refused while booting, or 503 while SGLang loads
        if time.monotonic() > deadline:
            raise TimeoutError(f"openjev serve did not answer {url} within {timeout:.0f} s")
        time.sleep(interval)


def watch(
    process: subprocess.Popen[bytes], stopping: threading.Event, on_exit: Callable[[int], Any] = os._exit
) -> None:
    """Wait for the process; if it ends while nobody asked it to, end the container with its status.

    A container whose openjev (and so SGLang) died would otherwise stay up and answer nothing.
    """
    code = process.wait()
    if not stopping.is_set():
        print(f"openjev serve exited unexpectedly with status {code}; stopping the container", flush=True)
        on_exit(code or 1)


def stop(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM (openjev then stops SGLang cleanly), SIGKILL to the whole group if it lingers."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


app = modal.App(APP_NAME)
volume = modal.Volume.from_name(VOLUME_NAME, create_if_missing=True)
SERVER_OPTIONS = server_options(os.environ, build_image(), volume)  # read here, on the deploying machine


@app.server(name=SERVER_NAME, **SERVER_OPTIONS)
class OpenJev:
    process: subprocess.Popen[bytes]
    stopping: threading.Event

    @modal.enter()
    def start(self) -> None:
        self.stopping = threading.Event()
        prepare_cache_dirs(cache_env())
        self.process = subprocess.Popen(serve_command(sys.executable), start_new_session=True)
        try:
            wait_until_serving(self.process, f"http://127.0.0.1:{PORT}/health", timeout=STARTUP_TIMEOUT)
        except BaseException:
            stop(self.process, timeout=30)  # a failed start ends the container; Modal starts another
            raise
        threading.Thread(target=watch, args=(self.process, self.stopping), daemon=True).start()

    @modal.exit()
    def shutdown(self) -> None:
        self.stopping.set()
        stop(self.process, timeout=EXIT_GRACE_PERIOD - 10)


def deployed_url() -> str:
    """The Server's public URL (the temporary one during `modal run`)."""
    server = cast(modal.Server, OpenJev)  # mypy ignores what a class decorator returns
    url = server.get_url()
    if not url:
        raise RuntimeError("Modal reported no URL for the openjev Server")
    return url


def smoke_step(url: str, *, out: str, startup_timeout: float, key: str | None) -> int:
    """`openjev smoke URL`: waits out the cold start (Modal answers 503 meanwhile), writes `out`."""
    from openjev.smoke.runner import SmokeOptions, format_summary, run_smoke_sync

    result = run_smoke_sync(SmokeOptions(url=url, key=key or None, out=Path(out), startup_timeout=startup_timeout))
    print(format_summary(result))
    print(f"wrote {out}")
    return result.exit_code


@app.local_entrypoint()
def main(out: str = "smoke-result.json", startup_timeout: float = STARTUP_TIMEOUT, key: str = "") -> None:
    """`modal run`: smoke-check the temporary deployment; Modal tears it down when this returns."""
    url = deployed_url()
    print(f"openjev is at {url}")
    code = smoke_step(url, out=out, startup_timeout=startup_timeout, key=key or os.environ.get("OPENJEV_API_KEY"))
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    # `uv run python modal_app.py`: the URL of the deployed (`modal deploy`) endpoint.
    print(modal.Server.from_name(APP_NAME, SERVER_NAME).get_url())
