"""openjev on Modal: one B200 per container, SGLang and the API side by side (docs/modal.md).

    uv run --no-default-groups --group deploy modal run modal_app.py::prefetch  # fill the Volume (CPU only)
    uv run --no-default-groups --group deploy modal run modal_app.py    # prefetch, temporary deployment, smoke
    uv run --no-default-groups --group deploy modal deploy modal_app.py # persistent endpoint
    uv run --no-default-groups --group deploy python modal_app.py       # its URL

(`--no-default-groups --group deploy`: the Modal client and the API, not the embedded engine and its
1.1 GB model.) The GPU container runs `openjev serve --backend sglang`, which launches SGLang on
loopback and exits non-zero if SGLang dies; this file turns any exit of that process into the end
of the container, so Modal replaces it. The checkpoint, at a pinned commit, is fetched once into
the `openjev-huggingface` Volume by `prefetch` on a CPU container, which also checks its tokenizer
against the base model's; GPU containers then load it from the Volume with the Hub switched off
and refuse to start without that record. SGLang's tuning data and the compile caches live there
too; CUDA graphs are still captured at every start.

Everything Modal is told comes from the small pure functions below, so tests can check it with no
Modal account. Read at import on the deploying machine: OPENJEV_PROFILE, OPENJEV_FRONTEND,
OPENJEV_SERVED_MODEL_NAME and OPENJEV_REVISION (forwarded to the containers), OPENJEV_MIN_CONTAINERS
(default 0), OPENJEV_MAX_CONTAINERS (default: no cap) and OPENJEV_API_KEY_SECRET (default: none).
"""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, cast

import modal

from openjev.adapters.sglang.launcher import STOP_TIMEOUT as SGLANG_STOP_TIMEOUT
from openjev.deployment.checkpoint import Checkpoint, hub_snapshot, hub_tokenizer, require_checkpoint
from openjev.deployment.checkpoint import prefetch as prefetch_checkpoint
from openjev.deployment.image_env import export_api_set
from openjev.settings import SGLANG_DEFAULT_MODEL, SGLANG_DEFAULT_PUBLIC_NAME, SGLANG_DEFAULT_REVISION, load_settings

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
STARTUP_TIMEOUT = 60 * MINUTES  # a first start compiles and autotunes kernels (the weights come from prefetch)
# openjev's own wait for SGLang, inside Modal's budget above; SGLang's warm-up request may use all of
# it (SGLANG_WARMUP_TIMEOUT, set by openjev: src/openjev/adapters/sglang/flags.py).
API_STARTUP_BUDGET = 55 * MINUTES
TARGET_CONCURRENCY = 12  # requests per container Modal aims for; the API admits 16 (docs/settings.md)

VOLUME_NAME = "openjev-huggingface"
CACHE_ROOT = "/cache"  # the Volume, mounted once; every cache below points into it
CHECKPOINT_RECORDS = f"{CACHE_ROOT}/openjev/checkpoints"  # what prefetch found, one file per commit
PROJECT_DIR = "/opt/openjev"  # where the local project is copied into the image and installed from
PROJECT_ROOT = Path(__file__).resolve().parent
PREFETCH_CPU = 4.0  # download threads and the tokenizer comparison; no GPU
PREFETCH_MEMORY = 8 * GIB
PREFETCH_TIMEOUT = 2 * 60 * MINUTES

FORWARDED_VARIABLES = ("OPENJEV_PROFILE", "OPENJEV_FRONTEND", "OPENJEV_SERVED_MODEL_NAME")
REVISION_VARIABLE = "OPENJEV_REVISION"  # the checkpoint's commit; default SGLANG_DEFAULT_REVISION
MIN_CONTAINERS_VARIABLE = "OPENJEV_MIN_CONTAINERS"
MAX_CONTAINERS_VARIABLE = "OPENJEV_MAX_CONTAINERS"  # unset: no cap
API_KEY_SECRET_VARIABLE = "OPENJEV_API_KEY_SECRET"  # a Modal Secret holding OPENJEV_API_KEY; unset: no key

DEFAULT_PROFILE = "b200-nvfp4"  # SGLang flags for this GPU and checkpoint; OPENJEV_PROFILE overrides
# The model the checkpoint was quantised from, at the commit whose tokenizer and chat template the
# served ones must reproduce (checked by prefetch). Move it together with OPENJEV_REVISION.
BASE_MODEL_REVISION = "995ad96eacd98c81ed38be0c5b274b04031597b0"

# Other settings for every container: add them here (they change the image), or name Modal Secrets
# (`modal secret create hf HF_TOKEN=...`) to attach to the containers.
EXTRA_IMAGE_ENV: dict[str, str] = {}
SECRET_NAMES: tuple[str, ...] = ()

# Shutdown, from the inside out: Granian gives in-flight requests (each bounded by the request
# timeout) and closing the backend OPENJEV_SHUTDOWN_TIMEOUT; `openjev serve` then stops SGLang (up
# to SGLANG_STOP_TIMEOUT); `@modal.exit` waits for all of that, and Modal waits for `@modal.exit`.
REQUEST_TIMEOUT = load_settings(EXTRA_IMAGE_ENV).request_timeout
API_SHUTDOWN_TIMEOUT = math.ceil(REQUEST_TIMEOUT) + 10
SERVE_STOP_TIMEOUT = API_SHUTDOWN_TIMEOUT + math.ceil(SGLANG_STOP_TIMEOUT) + 10
EXIT_GRACE_PERIOD = SERVE_STOP_TIMEOUT + 10  # at most 3600 for an `@app.server` (modal/_server.py, 1.6.4)


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


def max_containers(environ: Mapping[str, str]) -> int | None:
    """The container cap: OPENJEV_MAX_CONTAINERS at deploy time, none by default (Modal adds B200s as load needs)."""
    text = environ.get(MAX_CONTAINERS_VARIABLE, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{MAX_CONTAINERS_VARIABLE} must be a whole number of containers, at least 1, got {text!r}")
    cap, floor = int(text), min_containers(environ)
    if cap < floor:
        raise ValueError(f"{MAX_CONTAINERS_VARIABLE}={cap} is below {MIN_CONTAINERS_VARIABLE}={floor}")
    return cap


def secret_requests(environ: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """(Modal Secret name, keys it must hold) for each Secret the containers get.

    OPENJEV_API_KEY_SECRET names a Secret holding OPENJEV_API_KEY: the API then wants that bearer key
    on /v1/* (Modal's own proxy auth stays off, so clients send only the key).
    """
    requests: list[tuple[str, list[str]]] = [(name, []) for name in SECRET_NAMES]
    key_secret = environ.get(API_KEY_SECRET_VARIABLE, "").strip()
    if key_secret:
        requests.append((key_secret, ["OPENJEV_API_KEY"]))
    return requests


def checkpoint(environ: Mapping[str, str]) -> Checkpoint:
    """The served checkpoint: the default model at OPENJEV_REVISION, else at the pinned default commit."""
    revision = environ.get(REVISION_VARIABLE, "").strip() or SGLANG_DEFAULT_REVISION
    return Checkpoint(SGLANG_DEFAULT_MODEL, revision, SGLANG_DEFAULT_PUBLIC_NAME, BASE_MODEL_REVISION)


def revision_env(environ: Mapping[str, str]) -> dict[str, str]:
    """OPENJEV_REVISION for both containers, so the server and prefetch name the same commit."""
    return {REVISION_VARIABLE: checkpoint(environ).revision}


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The GPU container's settings: budgets, B200 profile, the checkpoint's Volume folder, Hub off, forwarded ones."""
    return {
        "OPENJEV_STARTUP_TIMEOUT": str(API_STARTUP_BUDGET),
        "OPENJEV_SHUTDOWN_TIMEOUT": str(API_SHUTDOWN_TIMEOUT),
        "OPENJEV_PROFILE": DEFAULT_PROFILE,
        # SGLang and the tokenizer read the snapshot prefetch filled; nothing asks the Hub.
        "OPENJEV_MODEL": str(checkpoint(environ).snapshot_dir(Path(cache_env()["HF_HUB_CACHE"]))),
        "HF_HUB_OFFLINE": "1",
        **revision_env(environ),
        **forwarded_env(environ),
    }


def serve_command(python: str) -> list[str]:
    """`openjev serve --backend sglang`, listening where Modal's proxy connects (SGLang stays on loopback)."""
    return [python, "-m", "openjev.cli", "serve", "--backend", "sglang", "--host", "0.0.0.0", "--port", str(PORT)]


IMAGE_ENV_SCRIPT = f"{PROJECT_DIR}/src/openjev/deployment/image_env.py"  # standard library only
API_SET_FILE = f"{PROJECT_DIR}/image/api-set.txt"  # uv.lock's versions of the API's packages
CONSTRAINTS_FILE = f"{PROJECT_DIR}/image/constraints.txt"  # the image's packages pinned, then the API set's others
PIP_BASELINE_FILE = f"{PROJECT_DIR}/image/pip-check-before.txt"  # what `pip check` said before openjev


def write_lines_command(path: str, lines: Sequence[str]) -> str:
    """A shell command writing `lines` to `path`, one a line (the text is in the command, so it keys the layer)."""
    folder = str(PurePosixPath(path).parent)
    return f"mkdir -p {shlex.quote(folder)} && " + shlex.join(["printf", "%s\n", *lines]) + f" > {shlex.quote(path)}"


def install_steps(api_set: Sequence[str]) -> tuple[list[str], str, list[str]]:
    """(commands before the install, `uv pip install` options, commands after): docs/modal.md#the-image."""
    before = [
        write_lines_command(API_SET_FILE, api_set),
        f"python {IMAGE_ENV_SCRIPT} constraints {API_SET_FILE} {CONSTRAINTS_FILE}",
        f"python {IMAGE_ENV_SCRIPT} baseline {PIP_BASELINE_FILE}",
    ]
    return before, f"--constraint {CONSTRAINTS_FILE}", [f"python {IMAGE_ENV_SCRIPT} check {PIP_BASELINE_FILE}"]


def build_image(api_set: Sequence[str]) -> modal.Image:
    before, constraints, after = install_steps(api_set)
    return (
        modal.Image.from_registry(SGLANG_IMAGE)
        .entrypoint([])  # the image's own entrypoint only prints a banner
        .env({**cache_env(), **EXTRA_IMAGE_ENV})
        .add_local_dir(PROJECT_ROOT, PROJECT_DIR, copy=True, ignore=lambda path: not is_project_file(path))
        .run_commands(*before)
        # The project alone: `[project.dependencies]`, no dependency group, so neither the embedded
        # backend (group `embedded`) nor `modal` (group `deploy`; Modal mounts its client at run
        # time); every package the image holds stays at its version (tests/deployment/test_image_install.py).
        .uv_pip_install(PROJECT_DIR, extra_options=constraints)
        .run_commands(*after)
    )


def secrets(environ: Mapping[str, str]) -> list[modal.Secret]:
    return [modal.Secret.from_name(name, required_keys=keys) for name, keys in secret_requests(environ)]


def server_options(
    environ: Mapping[str, str], image: modal.Image | None, volume: modal.Volume | None
) -> dict[str, Any]:
    """Every argument of `@app.server`. `max_containers` only when OPENJEV_MAX_CONTAINERS sets one."""
    cap = max_containers(environ)
    return {
        "image": image,
        "gpu": GPU,
        "cpu": CPU,
        "memory": MEMORY,
        "volumes": {CACHE_ROOT: volume} if volume is not None else {},
        "env": server_env(environ),
        "secrets": secrets(environ),
        "port": PORT,
        "unauthenticated": True,  # the API's own OPENJEV_API_KEY (OPENJEV_API_KEY_SECRET) is the gate, if wanted
        "routing_region": ROUTING_REGION,
        "compute_region": COMPUTE_REGION,
        "min_containers": min_containers(environ),
        **({"max_containers": cap} if cap is not None else {}),
        "scaledown_window": SCALEDOWN_WINDOW,
        "startup_timeout": STARTUP_TIMEOUT,
        "exit_grace_period": EXIT_GRACE_PERIOD,
        "target_concurrency": TARGET_CONCURRENCY,
    }


def prefetch_options(
    environ: Mapping[str, str], image: modal.Image | None, volume: modal.Volume | None
) -> dict[str, Any]:
    """Every argument of `@app.function` for `prefetch`: the same image and Volume, no GPU."""
    return {
        "image": image,
        "cpu": PREFETCH_CPU,
        "memory": PREFETCH_MEMORY,
        "timeout": PREFETCH_TIMEOUT,
        "volumes": {CACHE_ROOT: volume} if volume is not None else {},
        "env": revision_env(environ),
        "secrets": secrets(environ),
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
# Read here, on the deploying machine (inside a container the image is Modal's, already built).
API_SET = export_api_set(PROJECT_ROOT) if modal.is_local() else []
IMAGE = build_image(API_SET)
SERVER_OPTIONS = server_options(os.environ, IMAGE, volume)
CHECKPOINT = checkpoint(os.environ)
HUB_CACHE = Path(cache_env()["HF_HUB_CACHE"])


@app.function(**prefetch_options(os.environ, IMAGE, volume))
def prefetch(force: bool = False) -> str:
    """Fill the Volume with the pinned checkpoint and check its tokenizer, once per commit (a CPU container)."""
    prepare_cache_dirs(cache_env())
    try:
        record = prefetch_checkpoint(
            CHECKPOINT,
            hub_cache=HUB_CACHE,
            records=Path(CHECKPOINT_RECORDS),
            download_snapshot=hub_snapshot(HUB_CACHE),
            download_tokenizer=hub_tokenizer(HUB_CACHE),
            force=force,
        )
    finally:
        volume.commit()  # a refusal is recorded too, so GPU containers refuse as well
    summary = (
        f"{record.model} at {record.revision}: {record.files} files, {record.bytes / 1e9:.1f} GB in {record.snapshot}; "
        f"tokenizer and template match {record.base_model} at {record.base_revision}"
    )
    print(summary, flush=True)
    return summary


@app.server(name=SERVER_NAME, **SERVER_OPTIONS)
class OpenJev:
    process: subprocess.Popen[bytes]
    stopping: threading.Event

    @modal.enter()
    def start(self) -> None:
        self.stopping = threading.Event()
        prepare_cache_dirs(cache_env())
        # Before any GPU work: the snapshot prefetch filled and checked, or a start that says to run it.
        require_checkpoint(CHECKPOINT, hub_cache=HUB_CACHE, records=Path(CHECKPOINT_RECORDS))
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
        if hasattr(self, "process"):  # not when the start refused before launching anything
            stop(self.process, timeout=SERVE_STOP_TIMEOUT)


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
    """`modal run`: fill the Volume if needed, then smoke-check the temporary deployment; Modal tears it down."""
    print(prefetch.remote())  # at once when the Volume already holds this commit
    url = deployed_url()
    print(f"openjev is at {url}")
    code = smoke_step(url, out=out, startup_timeout=startup_timeout, key=key or os.environ.get("OPENJEV_API_KEY"))
    if code:
        raise SystemExit(code)


if __name__ == "__main__":
    # `uv run --no-default-groups --group deploy python modal_app.py`: the deployed endpoint's URL.
    print(modal.Server.from_name(APP_NAME, SERVER_NAME).get_url())
